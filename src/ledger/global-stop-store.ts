import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { z } from 'zod';
import { inTransaction } from './transaction';
import { readInTurn } from './read-turn';
import { RoundTripGroup } from './round-trip-group';
import { safetyEventRow } from './chained-rows';
import type { LedgerWriter } from './ledger-writer';
import { SafetyEventSchema, type GlobalStop } from './types';

const ActorSchema = z.string().trim().min(1, 'say who');
const ReasonSchema = z.string().trim().min(1, 'give a reason');

/**
 * The global stop flag (`controls`): an append-only history of sets and clears, the latest of
 * which decides. Each change is also a safety event in the chain, written in the same transaction.
 */
export class GlobalStopStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly writer: LedgerWriter,
  ) {}

  /** Reads that arrive together share one (none older than its request: see RoundTripGroup). */
  private readonly reads = new RoundTripGroup<void, GlobalStop>(async (requests) => {
    const stop = await this.readFlag();
    return requests.map(() => stop);
  });

  /** The global stop flag: its latest change decides. Read fresh for every call. */
  current(): Promise<GlobalStop> {
    return this.reads.run(undefined);
  }

  private async readFlag(): Promise<GlobalStop> {
    const result = await readInTurn<{ active: boolean; set_by: string; reason: string; at: Date }>(this.pool, {
      text: `SELECT active, set_by, reason, at FROM controls WHERE control = 'global_stop' ORDER BY seq DESC LIMIT 1`,
    });
    const row = result.rows[0];
    return row ? { stopped: row.active, by: row.set_by, reason: row.reason, at: row.at } : { stopped: false };
  }

  /** Sets the global stop (appends to its history) and records the GLOBAL_STOP_SET event in the same transaction. */
  async set(by: string, reason: string): Promise<void> {
    await this.change(true, ActorSchema.parse(by), ReasonSchema.parse(reason));
  }

  /** Clears the global stop (appends to its history) and records GLOBAL_STOP_CLEARED in the same transaction. */
  async clear(by: string, reason: string): Promise<void> {
    await this.change(false, ActorSchema.parse(by), ReasonSchema.parse(reason));
  }

  private async change(active: boolean, by: string, reason: string): Promise<void> {
    await inTransaction(this.pool, async (client) => {
      const row = await client.query<{ seq: string; at: Date }>(
        `INSERT INTO controls (control, active, set_by, reason) VALUES ('global_stop', $1, $2, $3) RETURNING seq::text, at`,
        [active, by, reason],
      );
      const { seq, at } = row.rows[0]!;
      const event = SafetyEventSchema.parse({
        id: randomUUID(),
        timestamp: at,
        eventType: active ? 'GLOBAL_STOP_SET' : 'GLOBAL_STOP_CLEARED',
        severity: active ? 'critical' : 'info',
        reason: `${active ? 'global stop set' : 'global stop cleared'} by ${by}: ${reason}`,
        metadata: { control: 'global_stop', seq: Number(seq), by },
      });
      await this.writer.write(client, [safetyEventRow(event)]);
    });
  }
}
