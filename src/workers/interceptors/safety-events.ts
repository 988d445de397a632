import type { Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import { activityLogger } from '../../activities/log-context';
import { deterministicUuid } from '../../ledger/event-id';
import type { Ledger } from '../../ledger/ledger';
import type { SafetyEventType } from '../../shared/safety-events';
import type { RecordEvent } from '../../gateway/attempt-scope';
import type { AgentEndpoint } from './agent-endpoint';
import type { CallRef } from './call-ref';
import { messageOf } from './failures';
import { patientlyWithLedger } from './ledger-patience';

export type { CostSnapshot, EventDetails, RecordEvent } from '../../gateway/attempt-scope';

/** The attempt a SafetyEvent belongs to: the parts of its id that are not the decision. */
export type EventAttempt = Pick<CallRef, 'workflowId' | 'runId' | 'activityId' | 'attempt'>;

/**
 * The SafetyEvent id of a decision taken in one activity attempt: a version-8 UUID made from a
 * sha256 of its inputs, so the same decision always gets the same id.
 */
export function safetyEventId(call: EventAttempt, eventType: SafetyEventType, key = ''): string {
  return deterministicUuid(call.workflowId, call.runId, call.activityId, call.attempt, eventType, key);
}

/**
 * The event recorder of one agent attempt. Each write carries its deterministic id, so a repeat
 * adds nothing; it waits out an unreachable ledger within the attempt. A write that still fails
 * is logged and the decision stands: the caller's refusal or halt does not depend on its record.
 */
export function eventRecorder(deps: { readonly ledger: Ledger; readonly logger: Logger }, ctx: Context, call: CallRef, agent: AgentEndpoint): RecordEvent {
  return async (eventType, severity, reason, details = {}) => {
    const id = safetyEventId(call, eventType, details.key);
    await patientlyWithLedger(ctx, deps.logger, call.deadlineMs, `record ${eventType}`, () =>
      deps.ledger.audit.recordSafetyEvent({
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
