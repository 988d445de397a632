import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { Logger } from 'pino';
import { activityLogger } from '../../activities/log-context';
import { ZodError } from 'zod';
import { LedgerError, type Ledger } from '../../ledger/ledger';
import { activityKind } from '../../shared/activity-kinds';
import { FailureType } from '../../shared/errors';
import { safetyEventId, type KillSwitchOptions } from './agent-safety';

export interface StageKillSwitchDeps {
  readonly ledger: Ledger;
  readonly logger: Logger;
  readonly killSwitch: KillSwitchOptions;
}

/** Which kill switch is on, and what to do about it. */
export interface KillSwitchOn {
  readonly source: 'WARDEN_ENABLED' | 'EMERGENCY_STOP' | 'global_stop';
  readonly reason: string;
  readonly suggestion: string;
}

/** Longest pause between two reads of an unreachable ledger: well inside a 10 s heartbeat timeout. */
const LEDGER_RETRY_MAX_MS = 4_000;
/** Stop waiting for the ledger this long before the attempt's start-to-close timeout. */
const DEADLINE_MARGIN_MS = 5_000;

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
        const on = await killSwitchOn(ctx, deps, stopFile);
        if (!on) return next(input);
        const eventId = await recordRefusal(ctx, deps, on, input.args);
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

/** Which kill switch is on, if any: the cheap local ones first, then the ledger's flag. */
async function killSwitchOn(ctx: Context, deps: StageKillSwitchDeps, stopFile: string): Promise<KillSwitchOn | undefined> {
  if (!deps.killSwitch.enabled) {
    return {
      source: 'WARDEN_ENABLED',
      reason: 'Warden is disabled on this worker (WARDEN_ENABLED=false)',
      suggestion: 'Unset WARDEN_ENABLED (or set it to true), restart the worker, then resume the intent (warden resume ID).',
    };
  }
  if (existsSync(stopFile)) {
    return { source: 'EMERGENCY_STOP', reason: `the emergency stop file ${stopFile} exists`, suggestion: `Remove ${stopFile} once it is safe, then resume the intent (warden resume ID).` };
  }
  const stop = await patiently(ctx, deps, 'read the global stop flag', () => deps.ledger.globalStop());
  if (stop.stopped) {
    return {
      source: 'global_stop',
      reason: `global stop set by ${stop.by ?? 'someone'}: ${stop.reason ?? 'no reason given'}`,
      suggestion: 'Once it is safe: warden unlock --reason TEXT, then resume the intent (warden resume ID).',
    };
  }
  return undefined;
}

/** One INTENT_STOPPED event per refused attempt (a repeated write adds nothing); returns its id. */
async function recordRefusal(ctx: Context, deps: StageKillSwitchDeps, on: KillSwitchOn, args: readonly unknown[]): Promise<string> {
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
    await patiently(ctx, deps, 'record INTENT_STOPPED', () =>
      deps.ledger.recordSafetyEvent({
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

/** Runs a ledger operation, waiting out an unreachable database (heartbeating) until shortly before the deadline. */
async function patiently<T>(ctx: Context, deps: StageKillSwitchDeps, what: string, fn: () => Promise<T>): Promise<T> {
  const timeoutMs = ctx.info.startToCloseTimeoutMs > 0 ? ctx.info.startToCloseTimeoutMs : 60_000;
  const deadline = Date.now() + timeoutMs - DEADLINE_MARGIN_MS;
  for (let waitMs = 250; ; waitMs = Math.min(waitMs * 2, LEDGER_RETRY_MAX_MS)) {
    try {
      return await fn();
    } catch (error) {
      // A bad row or a ledger state conflict will not get better by waiting.
      if (error instanceof LedgerError || error instanceof ZodError || ctx.cancellationSignal.aborted || Date.now() + waitMs > deadline) throw error;
      activityLogger(deps.logger).warn({ error: error instanceof Error ? error.message : String(error), retryInMs: waitMs }, `ledger unreachable; waiting to ${what}`);
      ctx.heartbeat();
      await ctx.sleep(waitMs);
    }
  }
}
