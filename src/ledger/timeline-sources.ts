import type pg from 'pg';
import { workflowIdForIntent } from '../shared/ids';

/**
 * One row of an intent's timeline with what says where it was written from: the run and activity
 * id of the activity attempt that wrote it (events written by the worker's safety layers,
 * activity runs, and costs through their reservation), or the run and the history's length at
 * the workflow task that recorded it (events the workflow wrote). A gate decision names neither:
 * the workflow writes it together with its GATE_DECIDED event.
 */
export interface TimelineSource {
  readonly id: string;
  readonly at: Date;
  readonly kind: 'safety' | 'cost' | 'gate' | 'activity';
  readonly type: string;
  readonly stage: string | null;
  readonly summary: string;
  readonly runId: string | null;
  readonly activityId: string | null;
  readonly historyLength: number | null;
}

/** Every ledger row of the intent, activity runs included, in the order the ledger received them (as `warden audit`). */
export async function timelineSources(pool: pg.Pool, intentId: string): Promise<TimelineSource[]> {
  const result = await pool.query<{ id: string; at: Date; kind: TimelineSource['kind']; type: string; stage: string | null; summary: string; run_id: string | null; activity_id: string | null; history_length: number | null }>(
    `SELECT id, at, kind, type, stage, summary, run_id, activity_id, history_length FROM (
       SELECT seq, "timestamp" AS at, 'safety' AS kind, 0 AS kind_order, event_type AS type, stage, reason AS summary, recorded_at, id::text AS id,
              metadata->>'runId' AS run_id, metadata->>'activityId' AS activity_id,
              CASE WHEN jsonb_typeof(metadata->'historyLength') = 'number' THEN (metadata->>'historyLength')::int END AS history_length
         FROM safety_events WHERE intent_id = $1
       UNION ALL
       SELECT c.seq, c."timestamp", 'cost', 1, 'COST', c.stage, c.agent_id || ' / ' || c.model_id || ', attempt ' || c.attempt || ': $' || c.usd,
              c.recorded_at, c.id::text, r.run_id, r.activity_id, NULL
         FROM cost_events c LEFT JOIN budget_reservations r ON r.id = c.reservation_id WHERE c.intent_id = $1
       UNION ALL
       SELECT seq, decided_at, 'gate', 2, 'GATE_DECISION', NULL, gate || ' gate: ' || decision || ' by ' || decided_by, recorded_at, id::text, NULL, NULL, NULL
         FROM gate_decisions WHERE intent_id = $1
       UNION ALL
       SELECT seq, started_at, 'activity', 3, activity_type, stage, 'attempt ' || attempt || ' ' || outcome, recorded_at,
              run_id || '/' || activity_id || '/' || attempt, run_id, activity_id, NULL
         FROM activity_runs WHERE workflow_id = $2 OR intent_id = $1
     ) AS entries
     ORDER BY seq NULLS FIRST, at, recorded_at, kind_order, id`,
    [intentId, workflowIdForIntent(intentId)],
  );
  return result.rows.map((row) => ({ id: row.id, at: row.at, kind: row.kind, type: row.type, stage: row.stage, summary: row.summary, runId: row.run_id, activityId: row.activity_id, historyLength: row.history_length }));
}
