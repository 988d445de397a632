import type { Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import { activityLogger } from '../../activities/log-context';
import { deterministicUuid } from '../../ledger/event-id';
import type { Ledger } from '../../ledger/ledger';
import type { SafetyEventInput } from '../../ledger/types';
import type { SafetyEventType, Severity } from '../../shared/safety-events';
import type { AgentEndpoint } from './agent-endpoint';
import type { CallRef } from './call-ref';
import { messageOf } from './failures';
import { patientlyWithLedger } from './ledger-patience';

/** The attempt a SafetyEvent belongs to: the parts of its id that are not the decision. */
export type EventAttempt = Pick<CallRef, 'workflowId' | 'runId' | 'activityId' | 'attempt'>;

/**
 * The SafetyEvent id of a decision taken in one activity attempt: a version-8 UUID made from a
 * sha256 of its inputs, so the same decision always gets the same id.
 */
export function safetyEventId(call: EventAttempt, eventType: SafetyEventType, key = ''): string {
  return deterministicUuid(call.workflowId, call.runId, call.activityId, call.attempt, eventType, key);
}

/** The budgets' figures at the moment of a decision. */
export type CostSnapshot = NonNullable<SafetyEventInput['costSnapshot']>;

/** What a SafetyEvent says besides its type, severity and reason. */
export interface EventDetails {
  readonly suggestion?: string;
  readonly breakerId?: string;
  readonly costSnapshot?: CostSnapshot;
  readonly metadata?: Record<string, unknown>;
  /** Tells apart two events of one type in one attempt (e.g. two breakers resetting). */
  readonly key?: string;
}

/** Records one decision of an agent attempt as a SafetyEvent and returns the event's id. */
export type RecordEvent = (eventType: SafetyEventType, severity: Severity, reason: string, details?: EventDetails) => Promise<string>;

/**
 * The event recorder of one agent attempt. Each write carries its deterministic id, so a repeat
 * adds nothing; it waits out an unreachable ledger within the attempt. A write that still fails
 * is logged and the decision stands: the caller's refusal or halt does not depend on its record.
 */
export function eventRecorder(deps: { readonly ledger: Ledger; readonly logger: Logger }, ctx: Context, call: CallRef, agent: AgentEndpoint): RecordEvent {
  return async (eventType, severity, reason, details = {}) => {
    const id = safetyEventId(call, eventType, details.key);
    await patientlyWithLedger(ctx, deps.logger, call.deadlineMs, `record ${eventType}`, () =>
      deps.ledger.recordSafetyEvent({
        id,
        timestamp: new Date(),
        eventType,
        severity,
        reason,
        intentId: call.intentId,
        stage: call.stage,
        agentId: agent.agentId,
        modelId: agent.modelId,
        breakerId: details.breakerId,
        costSnapshot: details.costSnapshot,
        suggestion: details.suggestion,
        metadata: { ...details.metadata, workflowId: call.workflowId, runId: call.runId, activityId: call.activityId, attempt: call.attempt },
      }),
    ).catch((error: unknown) => {
      activityLogger(deps.logger).error({ eventId: id, eventType, reason, error: messageOf(error) }, 'could not record a safety event');
    });
    return id;
  };
}
