import type { Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import { activityLogger } from '../../activities/log-context';
import type { Ledger } from '../../ledger/ledger';
import type { ActivityOutcome } from '../../ledger/types';
import type { AgentEndpoint } from './agent-endpoint';
import type { CallRef } from './call-ref';
import { messageOf } from './failures';
import { patientlyWithLedger } from './ledger-patience';

/** What the audit row of an agent attempt learns while the attempt runs. */
export interface RunFacts {
  agent?: AgentEndpoint;
  spendUsd?: string;
}

/** How an attempt ended, as its audit row says. */
export interface RunEnd {
  readonly outcome: ActivityOutcome;
  readonly failureType?: string;
}

/**
 * The audit of every activity attempt, agent call or not: one `activity_runs` row per attempt
 * (start, end, duration, outcome, the agent and its spend when there was one).
 */
export class ActivityAudit {
  constructor(private readonly deps: { readonly ledger: Ledger; readonly logger: Logger }) {}

  /** Writes the attempt's row, waiting out an unreachable ledger. Never throws: the audit must not change the activity's outcome. */
  async record(ctx: Context, call: CallRef, end: RunEnd, facts: RunFacts): Promise<void> {
    const endedAt = new Date(Math.max(Date.now(), call.startedMs));
    try {
      await patientlyWithLedger(ctx, this.deps.logger, call.deadlineMs, 'record the activity run', () =>
        this.deps.ledger.activityRuns.record({
          workflowId: call.workflowId,
          runId: call.runId,
          activityId: call.activityId,
          attempt: call.attempt,
          activityType: call.activityType,
          taskQueue: call.taskQueue,
          intentId: call.intentId,
          stage: call.stage,
          agentId: facts.agent?.agentId,
          modelId: facts.agent?.modelId,
          startedAt: new Date(call.startedMs),
          endedAt,
          outcome: end.outcome,
          failureType: end.failureType,
          spendUsd: facts.spendUsd,
        }),
      );
    } catch (error) {
      activityLogger(this.deps.logger).error({ outcome: end.outcome, error: messageOf(error) }, 'could not record the activity run in the ledger');
    }
  }
}
