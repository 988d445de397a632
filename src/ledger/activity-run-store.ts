import type pg from 'pg';
import { z } from 'zod';
import { storable } from './storable';
import { ActivityRunSchema, type ActivityOutcome, type ActivityRun, type ActivityRunInput } from './types';

/**
 * The activity attempts the worker ran (`activity_runs`): start, end, outcome and spend of each,
 * one row per (workflow, run, activity, attempt).
 */
export class ActivityRunStore {
  constructor(private readonly pool: pg.Pool) {}

  /**
   * Records one activity attempt (start, end, duration, outcome, spend). True if inserted; false
   * if this (workflow, run, activity, attempt) is already recorded: a repeated write is a no-op.
   */
  async record(input: ActivityRunInput): Promise<boolean> {
    const r = ActivityRunSchema.parse(storable(input));
    const result = await this.pool.query(
      `INSERT INTO activity_runs (workflow_id, run_id, activity_id, attempt, activity_type, task_queue, intent_id, stage,
                                  agent_id, model_id, started_at, ended_at, duration_ms, outcome, failure_type, spend_usd)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
       ON CONFLICT (workflow_id, run_id, activity_id, attempt) DO NOTHING`,
      [
        r.workflowId,
        r.runId,
        r.activityId,
        r.attempt,
        r.activityType,
        r.taskQueue,
        r.intentId ?? null,
        r.stage ?? null,
        r.agentId ?? null,
        r.modelId ?? null,
        r.startedAt,
        r.endedAt,
        r.endedAt.getTime() - r.startedAt.getTime(),
        r.outcome,
        r.failureType ?? null,
        r.spendUsd ?? null,
      ],
    );
    return result.rowCount === 1;
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
