import type pg from 'pg';

/** The decision links already used (table `decision_links`): a link decides once. */
export class DecisionLinkUses {
  constructor(private readonly pool: pg.Pool) {}

  /** Records the first use of `nonce`; false when it was used before (then nothing is written). */
  async claim(use: { readonly nonce: string; readonly intentId: string; readonly gate: string; readonly approver: string; readonly decision: string }): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      'INSERT INTO decision_links (nonce, intent_id, gate, approver, decision) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (nonce) DO NOTHING',
      [use.nonce, use.intentId, use.gate, use.approver, use.decision],
    );
    return rowCount === 1;
  }

  /** When and how `nonce` was used, if it was. */
  async usage(nonce: string): Promise<{ readonly usedAt: string; readonly decision: string } | undefined> {
    const { rows } = await this.pool.query<{ used_at: Date; decision: string }>('SELECT used_at, decision FROM decision_links WHERE nonce = $1', [nonce]);
    return rows[0] ? { usedAt: rows[0].used_at.toISOString(), decision: rows[0].decision } : undefined;
  }
}
