import { createHash, randomBytes } from 'node:crypto';
import type pg from 'pg';

/** What a view link shows: one opening of one gate, and why it cannot decide it. */
export interface ViewLink {
  readonly intentId: string;
  readonly gate: string;
  /** The gate's `requestedAt`: the link ends when this opening closes. */
  readonly gateOpenedAt: string;
  readonly why: string;
}

function hashOf(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/**
 * The links that only show a gate (table `gate_view_links`), made where no decision link can be.
 * A token is random and names nothing; the ledger keeps its hash and what it shows.
 */
export class GateViewLinks {
  constructor(private readonly pool: pg.Pool) {}

  /** A new token showing `link`. */
  async make(link: ViewLink): Promise<string> {
    const token = randomBytes(24).toString('base64url');
    await this.pool.query('INSERT INTO gate_view_links (token_hash, intent_id, gate, gate_opened_at, why) VALUES ($1, $2, $3, $4, $5)', [
      hashOf(token),
      link.intentId,
      link.gate,
      link.gateOpenedAt,
      link.why,
    ]);
    return token;
  }

  /** What `token` shows, when this ledger made it. */
  async find(token: string): Promise<ViewLink | undefined> {
    const { rows } = await this.pool.query<{ intent_id: string; gate: string; gate_opened_at: string; why: string }>(
      'SELECT intent_id, gate, gate_opened_at, why FROM gate_view_links WHERE token_hash = $1',
      [hashOf(token)],
    );
    const row = rows[0];
    return row ? { intentId: row.intent_id, gate: row.gate, gateOpenedAt: row.gate_opened_at, why: row.why } : undefined;
  }
}
