import type { Context } from '@temporalio/activity';
import { ledgerDeadlineOf } from './ledger-patience';

/** One activity attempt, as the ledger's keys and the logs name it. */
export interface CallRef {
  readonly workflowId: string;
  readonly runId: string;
  readonly activityId: string;
  readonly attempt: number;
  readonly activityType: string;
  readonly taskQueue: string;
  readonly intentId?: string;
  readonly stage?: string;
  /** `Date.now()` when the attempt reached the interceptor. */
  readonly startedMs: number;
  /** When to stop waiting for an unreachable ledger. */
  readonly deadlineMs: number;
}

/**
 * Names the attempt running in `ctx`. The intent and stage are read from the first argument when
 * it carries them (stage activities do); an activity run outside a workflow is keyed by its id.
 */
export function describeCall(ctx: Context, args: readonly unknown[]): CallRef {
  const info = ctx.info;
  const first = args[0] as { intent?: { id?: unknown }; stage?: unknown } | undefined;
  const startedMs = Date.now();
  return {
    workflowId: info.workflowExecution?.workflowId ?? `activity:${info.activityId}`,
    runId: info.workflowExecution?.runId ?? info.activityRunId ?? 'none',
    activityId: info.activityId,
    attempt: info.attempt,
    activityType: info.activityType,
    taskQueue: info.taskQueue,
    intentId: typeof first?.intent?.id === 'string' ? first.intent.id : undefined,
    stage: typeof first?.stage === 'string' ? first.stage : undefined,
    startedMs,
    deadlineMs: ledgerDeadlineOf(ctx, startedMs),
  };
}
