import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { z } from 'zod';
import { inTransaction } from './transaction';
import { retentionCut } from './chain';

/** Retention of the ledger's tables. Recorded model exchanges have their own (ExchangeStore.cleanup). */
export class Retention {
  constructor(private readonly pool: pg.Pool) {}

  /**
   * Retention: deletes rows older than `retentionDays` (before `now` minus the retention), the
   * only DELETE path (the tables' triggers refuse any other). Never deletes an unsettled
   * reservation, nor the latest state of a control or of a ladder scope. Returns rows deleted per table.
   */
  async cleanup(retentionDays: number, now: Date = new Date()): Promise<Record<string, number>> {
    z.number().positive().finite().parse(retentionDays);
    z.date().parse(now);
    const cutoff = new Date(now.getTime() - retentionDays * 86_400_000);
    return inTransaction(this.pool, async (client) => {
      await client.query(`SET LOCAL warden.retention_cleanup = 'on'`);
      // What leaves the hash chains (whole batches from each chain's start) is summarised in them
      // first, so they still verify; rows from before the chains go by their time alone.
      const chained = await retentionCut(client, cutoff, now, randomUUID());
      const deleted: Record<string, number> = {};
      for (const [table, column] of [['safety_events', '"timestamp"'], ['cost_events', '"timestamp"'], ['gate_decisions', 'decided_at']] as const) {
        deleted[table] = (await client.query(`DELETE FROM ${table} WHERE id = ANY($1::uuid[]) OR (chain_pos IS NULL AND ${column} < $2)`, [chained[table], cutoff])).rowCount ?? 0;
      }
      const simple: Array<[table: string, column: string]> = [
        ['model_calls', '"timestamp"'],
        ['activity_runs', 'ended_at'],
        ['notification_dispatches', 'at'],
        ['notification_dead_letters', 'at'],
        ['decision_links', 'used_at'],
        ['gate_view_links', 'made_at'],
      ];
      for (const [table, column] of simple) {
        deleted[table] = (await client.query(`DELETE FROM ${table} WHERE ${column} < $1`, [cutoff])).rowCount ?? 0;
      }
      // One statement, so "settled" is judged before the settlement rows go.
      const budget = await client.query<{ reservations: number; settlements: number }>(
        `WITH old AS (
           SELECT r.id FROM budget_reservations r
            WHERE r.created_at < $1 AND (NOT r.granted OR EXISTS (SELECT 1 FROM budget_settlements s WHERE s.reservation_id = r.id))
         ), settlements AS (
           DELETE FROM budget_settlements s USING old WHERE s.reservation_id = old.id RETURNING 1
         ), reservations AS (
           DELETE FROM budget_reservations r USING old WHERE r.id = old.id RETURNING 1
         )
         SELECT (SELECT count(*) FROM reservations)::int AS reservations, (SELECT count(*) FROM settlements)::int AS settlements`,
        [cutoff],
      );
      deleted.budget_reservations = budget.rows[0]!.reservations;
      deleted.budget_settlements = budget.rows[0]!.settlements;
      deleted.controls =
        (
          await client.query(
            `DELETE FROM controls c WHERE c.at < $1 AND EXISTS (SELECT 1 FROM controls n WHERE n.control = c.control AND n.seq > c.seq)`,
            [cutoff],
          )
        ).rowCount ?? 0;
      deleted.ladder_metrics =
        (
          await client.query(
            `DELETE FROM ladder_metrics m WHERE m.recorded_at < $1
                AND EXISTS (SELECT 1 FROM ladder_metrics n WHERE n.scope = m.scope AND (n.recorded_at, n.id) > (m.recorded_at, m.id))`,
            [cutoff],
          )
        ).rowCount ?? 0;
      return deleted;
    });
  }

}
