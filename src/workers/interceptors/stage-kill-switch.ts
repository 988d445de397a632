import path from 'node:path';
import type { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { Logger } from 'pino';
import { activityLogger } from '../../activities/log-context';
import type { Ledger } from '../../ledger/ledger';
import { activityKind } from '../../shared/activity-kinds';
import { FailureType } from '../../shared/errors';
import { killSwitchOn, ledgerDeadlineOf, patientlyWithLedger, type KillSwitchOn, type KillSwitchOptions } from './ledger-patience';
import { safetyEventId } from './safety-events';

export interface StageKillSwitchDeps {
  readonly ledger: Ledger;
  readonly logger: Logger;
  readonly killSwitch: KillSwitchOptions;
}

/**
 * The kill switches for every stage activity that is not an agent call (the agent-safety
 * interceptor guards those): preparing the worktree, running the repo's tests, the mechanical
 * checks, archiving the lineage and, above all, the merge. While WARDEN_ENABLED=false on this
 * worker, the EMERGENCY_STOP file exists, or the ledger's global stop flag is set, such an
 * activity is not started: it fails with a non-retryable KILL_SWITCH, and one INTENT_STOPPED
 * SafetyEvent says which switch and which activity. Bookkeeping (ledger writes, the final
 * worktree cleanup) always runs. The global stop flag is read fresh for every activity; while
 * the ledger cannot be read, the activity waits for it (failing closed), then fails retryably.
 */
export function stageKillSwitchInterceptor(deps: StageKillSwitchDeps): ActivityInterceptorsFactory {
  const stopFile = path.resolve(deps.killSwitch.emergencyStopFile);
  return (ctx: Context) => ({
    inbound: {
      async execute(input, next) {
        const { activityType } = ctx.info;
        if (activityKind(activityType) !== 'stage') return next(input);
        const deadlineMs = ledgerDeadlineOf(ctx, Date.now());
        const on = await killSwitchOn(deps.killSwitch.enabled, stopFile, () =>
          patientlyWithLedger(ctx, deps.logger, deadlineMs, 'read the global stop flag', () => deps.ledger.globalStop.current()),
        );
        if (!on) return next(input);
        const eventId = await recordRefusal(ctx, deps, deadlineMs, on, input.args);
        activityLogger(deps.logger).warn({ killSwitch: on.source, reason: on.reason }, `kill switch is on: refusing to start ${activityType}`);
        throw ApplicationFailure.create({
          type: FailureType.KillSwitch,
          message: `kill switch (${on.source}): ${on.reason}; ${activityType} was not started`,
          nonRetryable: true,
          details: [{ eventId, source: on.source }],
        });
      },
    },
  });
}

/** One INTENT_STOPPED event per refused attempt (a repeated write adds nothing); returns its id. */
async function recordRefusal(ctx: Context, deps: StageKillSwitchDeps, deadlineMs: number, on: KillSwitchOn, args: readonly unknown[]): Promise<string> {
  const info = ctx.info;
  const call = {
    workflowId: info.workflowExecution?.workflowId ?? `activity:${info.activityId}`,
    runId: info.workflowExecution?.runId ?? info.activityRunId ?? 'none',
    activityId: info.activityId,
    attempt: info.attempt,
  };
  const first = args[0] as { intent?: { id?: unknown } } | undefined;
  const id = safetyEventId(call, 'INTENT_STOPPED');
  try {
    await patientlyWithLedger(ctx, deps.logger, deadlineMs, 'record INTENT_STOPPED', () =>
      deps.ledger.audit.recordSafetyEvent({
        id,
        timestamp: new Date(),
        eventType: 'INTENT_STOPPED',
        severity: 'high',
        reason: `kill switch (${on.source}): ${on.reason}; ${info.activityType} was not started`,
        suggestion: on.suggestion,
        intentId: typeof first?.intent?.id === 'string' ? first.intent.id : undefined,
        metadata: { killSwitch: on.source, activityType: info.activityType, ...call },
      }),
    );
  } catch (error) {
    // The refusal stands even if its record could not be written; say so loudly.
    activityLogger(deps.logger).error({ eventId: id, error: error instanceof Error ? error.message : String(error) }, 'could not record a safety event');
  }
  return id;
}
