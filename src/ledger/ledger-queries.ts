import type pg from 'pg';
import { z } from 'zod';
import { COST_GROUPINGS, type CostGrouping, type CostRow, type DailyReport, type TimelineEntry } from './types';
import type { Severity } from '../shared/safety-events';
import { dailyReport } from './daily-report';
import { readIntentRecord, type IntentRecord } from './intent-record';
import { workflowIdForIntent } from '../shared/ids';

const ZERO_USD = '0.000000';

const CostGroupingSchema = z.enum(COST_GROUPINGS);
const GROUP_KEY: Record<CostGrouping, string> = {
  intent: 'intent_id',
  stage: 'stage',
  model: 'model_id',
  agent: 'agent_id',
  day: `to_char("timestamp" AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
};

/**
 * The ledger's read side across its tables: where an intent worked and what it merged, its
 * timeline, spend by grouping, an intent's record and the daily report (behind `warden audit`,
 * `warden costs`, `warden status` and `warden report`). It writes nothing.
 */
export class LedgerQueries {
  constructor(private readonly pool: pg.Pool) {}

  /** Where an intent worked: the repository its INTENT_STARTED event names (undefined if unknown). */
  async intentRepoPath(intentId: string): Promise<string | undefined> {
    const { rows } = await this.pool.query<{ repo: string | null }>(
      `SELECT metadata->>'repoPath' AS repo FROM safety_events WHERE intent_id = $1 AND event_type = 'INTENT_STARTED' ORDER BY seq NULLS FIRST, "timestamp" LIMIT 1`,
      [intentId],
    );
    return rows[0]?.repo ?? undefined;
  }

  /** Every repository an intent started in (from INTENT_STARTED): where the sweeper looks for resume refs past their date. */
  async intentRepositories(): Promise<string[]> {
    const { rows } = await this.pool.query<{ repo: string }>(
      `SELECT DISTINCT metadata->>'repoPath' AS repo FROM safety_events WHERE event_type = 'INTENT_STARTED' AND metadata->>'repoPath' IS NOT NULL`,
    );
    return rows.map((row) => row.repo);
  }

  /**
   * A merged intent as the ledger knows it: where it worked (INTENT_STARTED) and the commit its
   * merge made (INTENT_MERGED); undefined when it never merged.
   */
  async mergedIntent(intentId: string): Promise<{ readonly repoPath: string; readonly baseBranch: string; readonly mergedCommit: string } | undefined> {
    const { rows } = await this.pool.query<{ repo: string | null; base: string | null; merged: string | null }>(
      `SELECT (SELECT metadata->>'repoPath' FROM safety_events WHERE intent_id = $1 AND event_type = 'INTENT_STARTED' ORDER BY seq DESC NULLS LAST, "timestamp" DESC LIMIT 1) AS repo,
              (SELECT metadata->>'baseBranch' FROM safety_events WHERE intent_id = $1 AND event_type = 'INTENT_STARTED' ORDER BY seq DESC NULLS LAST, "timestamp" DESC LIMIT 1) AS base,
              (SELECT metadata->>'mergedCommit' FROM safety_events WHERE intent_id = $1 AND event_type = 'INTENT_MERGED' ORDER BY seq DESC NULLS LAST, "timestamp" DESC LIMIT 1) AS merged`,
      [intentId],
    );
    const row = rows[0];
    return row?.repo && row.base && row.merged ? { repoPath: row.repo, baseBranch: row.base, mergedCommit: row.merged } : undefined;
  }

  /**
   * Everything the ledger holds about one intent (safety events, costs, gate decisions), in the
   * order the ledger received them (`seq`; rows from before it was numbered come first, by their
   * clocks); with `activities`, also each activity attempt the worker ran (`activity_runs`),
   * placed where it was written, at its end, with its start and outcome in the summary.
   */
  async timeline(intentId: string, opts: { activities?: boolean } = {}): Promise<TimelineEntry[]> {
    z.string().min(1).parse(intentId);
    const result = await this.pool.query<{ at: Date; kind: TimelineEntry['kind']; type: string; stage: string | null; summary: string; severity: Severity | null; usd: string | null }>(
      `SELECT at, kind, type, stage, summary, severity, usd FROM (
         SELECT seq, "timestamp" AS at, 'safety' AS kind, 0 AS kind_order, event_type AS type, stage, reason AS summary,
                severity, NULL::text AS usd, recorded_at, id::text AS id
           FROM safety_events WHERE intent_id = $1
         UNION ALL
         SELECT seq, "timestamp", 'cost', 1, 'COST', stage,
                agent_id || ' / ' || model_id || ', attempt ' || attempt || ': ' || input_tokens || ' input + ' || output_tokens || ' output tokens',
                NULL, usd::text, recorded_at, id::text
           FROM cost_events WHERE intent_id = $1
         UNION ALL
         SELECT seq, decided_at, 'gate', 2, 'GATE_DECISION', NULL,
                gate || ' gate: ' || decision || ' by ' || decided_by
                  || CASE WHEN signed THEN ' (signed)' WHEN NOT signed THEN ' (unsigned)' ELSE '' END
                  || CASE WHEN timed_out THEN ' (timed out)' ELSE '' END
                  || coalesce(': ' || reason, '')
                  || CASE WHEN jsonb_array_length(conditions) > 0
                          THEN '; conditions: ' || (SELECT string_agg(c, '; ') FROM jsonb_array_elements_text(conditions) AS c)
                          ELSE '' END,
                NULL, NULL, recorded_at, id::text
           FROM gate_decisions WHERE intent_id = $1
         UNION ALL
         SELECT seq, ended_at, 'activity', 3, activity_type, stage,
                'attempt ' || attempt || ' ' || outcome || coalesce(' (' || failure_type || ')', '')
                  || ' after ' || round(duration_ms / 1000.0, 1) || ' s, started ' || to_char(started_at AT TIME ZONE 'UTC', 'HH24:MI:SS.MS')
                  || ' (run ' || left(run_id, 8) || ', activity ' || activity_id || ')',
                NULL, spend_usd::text, recorded_at,
                run_id || '/' || activity_id || '/' || attempt
           FROM activity_runs WHERE $2 AND (workflow_id = $3 OR intent_id = $1)
       ) AS entries
       ORDER BY seq NULLS FIRST, at, recorded_at, kind_order, id`,
      [intentId, opts.activities === true, workflowIdForIntent(intentId)],
    );
    return result.rows.map((row) => ({
      at: row.at,
      kind: row.kind,
      type: row.type,
      ...(row.stage !== null && { stage: row.stage }),
      summary: row.summary,
      ...(row.severity !== null && { severity: row.severity }),
      ...(row.usd !== null && { usd: row.usd }),
    }));
  }

  /**
   * Spend grouped by intent, stage, model, agent or day (UTC), summed in SQL so every total is
   * exact. Rows are ordered by spend, largest first (by date for `day`).
   */
  async costs(opts: { since?: Date; by: CostGrouping }): Promise<{ rows: CostRow[]; totalUsd: string }> {
    const by = CostGroupingSchema.parse(opts.by);
    const since = z.date().optional().parse(opts.since);
    const key = GROUP_KEY[by];
    // Byte order, so the answer does not depend on the server's collation.
    const order = by === 'day' ? `${key} COLLATE "C"` : `sum(usd) DESC, ${key} COLLATE "C"`;
    const result = await this.pool.query<{ key: string; usd: string; input: string; output: string; calls: number; total: string }>(
      `SELECT ${key} AS key, round(sum(usd), 6)::text AS usd, sum(input_tokens)::text AS input, sum(output_tokens)::text AS output,
              count(*)::int AS calls, round(sum(sum(usd)) OVER (), 6)::text AS total
         FROM cost_events
        WHERE $1::timestamptz IS NULL OR "timestamp" >= $1::timestamptz
        GROUP BY 1
        ORDER BY ${order}`,
      [since ?? null],
    );
    return {
      rows: result.rows.map((row) => ({ key: row.key, usd: row.usd, inputTokens: Number(row.input), outputTokens: Number(row.output), calls: row.calls })),
      totalUsd: result.rows[0]?.total ?? ZERO_USD,
    };
  }

  /** One intent as the ledger records it, for `warden status` (see intent-record.ts). */
  intentRecord(intentId: string): Promise<IntentRecord> {
    return readIntentRecord(this.pool, z.string().min(1).parse(intentId));
  }

  /** The daily health report for a UTC day (see dailyReport in daily-report.ts). */
  dailyReport(opts: { date: string; dayBudgetUsd?: string }): Promise<DailyReport> {
    return dailyReport(this.pool, opts);
  }

}
