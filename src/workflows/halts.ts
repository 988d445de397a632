import { ApplicationFailure } from '@temporalio/workflow';
import type { SafetyEventType } from '../shared/safety-events';
import { checkTimeLimit, type LimitCheck } from '../safety/limits';
import { FailureType } from '../shared/errors';
import type { HaltDetails } from '../shared/halt';

/**
 * A non-retryable SAFETY_HALT failure that names the limit that tripped. The intent's ending
 * writes the SafetyEvent from its details (event type, reason, suggestion, figures).
 */
export function haltFailure(eventType: SafetyEventType, check: Pick<LimitCheck, 'detail' | 'suggestion' | 'current' | 'threshold'>): ApplicationFailure {
  const details: HaltDetails = { eventType, reason: check.detail, suggestion: check.suggestion, current: check.current, threshold: check.threshold };
  return ApplicationFailure.create({ type: FailureType.SafetyHalt, message: `${eventType}: ${check.detail}`, nonRetryable: true, details: [details] });
}

/**
 * A halt decided by the workflow itself (a gate said no, triage said PROHIBITED): no SafetyEvent
 * of its own, but a suggestion of what a person can do about it.
 */
export function stopped(message: string, suggestion: string): ApplicationFailure {
  return ApplicationFailure.create({ type: FailureType.SafetyHalt, message, nonRetryable: true, details: [{ suggestion }] });
}

/** The halt for a time limit that ran out: `scope` worked `limitMs`; `setting` is the config key that says how long it may. */
export function timeLimitHalt(scope: string, limitMs: number, setting: string): ApplicationFailure {
  const check = checkTimeLimit(scope, 0, limitMs, limitMs);
  return haltFailure('TIME_LIMIT_EXCEEDED', { ...check, suggestion: `${check.suggestion} The limit is ${setting} in the config.` });
}
