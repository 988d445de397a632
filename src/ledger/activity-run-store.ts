import type pg from 'pg';
import { z } from 'zod';
import { RoundTripGroup } from './round-trip-group';
import { storable } from './storable';
import { ActivityRunSchema, type ActivityOutcome, type ActivityRun, type ActivityRunInput } from './types';

/** An activity attempt as it is stored. */
type StorableRun = z.output<typeof ActivityRunSchema>;

function keyOf(workflowId: string, runId: string, activityId: string, attempt: number): string {
  return JSON.stringify([workflowId, runId, activityId, attempt]);
}

/**
 * The activity attempts the worker ran (`activity_runs`): start, end, outcome and spend of each,
 * one row per (workflow, run, activity, attempt).
 */
export class ActivityRunStore {
  constructor(private readonly pool: pg.Pool) {}

  /** Rows recorded at the same time go in one statement (see RoundTripGroup). */
  private readonly writes = new RoundTripGroup<StorableRun, boolean>((rows) => this.insert(rows));

  /**
   * Records one activity attempt (start, end, duration, outcome, spend). True if inserted; false
   * if this (workflow, run, activity, attempt) is already recorded: a repeated write is a no-op.
   * Resolves once the row is committed.
   */
  async record(input: ActivityRunInput): Promise<boolean> {
    return this.writes.run(ActivityRunSchema.parse(storable(input)));
  }

  private async insert(rows: readonly StorableRun[]): Promise<boolean[]> {
    const result = await this.pool.query<{ workflow_id: string; run_id: string; activity_id: string; attempt: number }>(
      `INSERT INTO activity_runs (workflow_id, run_id, activity_id, attempt, activity_type, task_queue, intent_id, stage,
                                  agent_id, model_id, started_at, ended_at, duration_ms, outcome, failure_type, spend_usd)
       SELECT workflow_id, run_id, activity_id, attempt, activity_type, task_queue, intent_id, stage,
              agent_id, model_id, started_at, ended_at, duration_ms, outcome, failure_type, spend_usd
         FROM jsonb_to_recordset($1::jsonb) AS r(workflow_id text, run_id text, activity_id text, attempt int, activity_type text,
                                                 task_queue text, intent_id text, stage text, agent_id text, model_id text,
                                                 started_at timestamptz, ended_at timestamptz, duration_ms int, outcome text,
                                                 failure_type text, spend_usd numeric)
       ON CONFLICT (workflow_id, run_id, activity_id, attempt) DO NOTHING
       RETURNING workflow_id, run_id, activity_id, attempt`,
      [
        JSON.stringify(
          rows.map((r) => ({
            workflow_id: r.workflowId,
            run_id: r.runId,
            activity_id: r.activityId,
            attempt: r.attempt,
            activity_type: r.activityType,
            task_queue: r.taskQueue,
            intent_id: r.intentId ?? null,
            stage: r.stage ?? null,
            agent_id: r.agentId ?? null,
            model_id: r.modelId ?? null,
            started_at: r.startedAt.toISOString(),
            ended_at: r.endedAt.toISOString(),
            duration_ms: r.endedAt.getTime() - r.startedAt.getTime(),
            outcome: r.outcome,
            failure_type: r.failureType ?? null,
            spend_usd: r.spendUsd ?? null,
          })),
        ),
      ],
    );
    const inserted = new Set(result.rows.map((row) => keyOf(row.workflow_id, row.run_id, row.activity_id, row.attempt)));
    // Of two equal rows in one statement the first is inserted, the second is a repeat.
    return rows.map((r) => inserted.delete(keyOf(r.workflowId, r.runId, r.activityId, r.attempt)));
  }

  /** The activity attempts recorded for a workflow id (every run), in the order they started. */
  async ofWorkflow(workflowId: string): Promise<ActivityRun[]> {
    z.string().min(1).parse(workflowId);
    const result = await this.pool.query<{
      workflow_id: string; run_id: string; activity_id: string; attempt: number; activity_type: string; task_queue: string;
      intent_id: string | null; stage: string | null; agent_id: string | null; model_id: string | null; started_at: Date;
      ended_at: Date; duration_ms: number; outcome: ActivityOutcome; failure_type: string | null; spend_usd: string | null;
    }>(
      `SELECT workflow_id, run_id, activity_id, attempt, activity_type, task_queue, intent_id, stage, agent_id, model_id,
              started_at, ended_at, duration_ms, outcome, failure_type, spend_usd::text AS spend_usd
         FROM activity_runs WHERE workflow_id = $1
        ORDER BY started_at, run_id, activity_id COLLATE "C", attempt`,
      [workflowId],
    );
    return result.rows.map((row) => ({
      workflowId: row.workflow_id,
      runId: row.run_id,
      activityId: row.activity_id,
      attempt: row.attempt,
      activityType: row.activity_type,
      taskQueue: row.task_queue,
      ...(row.intent_id !== null && { intentId: row.intent_id }),
      ...(row.stage !== null && { stage: row.stage }),
      ...(row.agent_id !== null && { agentId: row.agent_id }),
      ...(row.model_id !== null && { modelId: row.model_id }),
      startedAt: row.started_at,
      endedAt: row.ended_at,
      durationMs: row.duration_ms,
      outcome: row.outcome,
      ...(row.failure_type !== null && { failureType: row.failure_type }),
      ...(row.spend_usd !== null && { spendUsd: row.spend_usd }),
    }));
  }
}
