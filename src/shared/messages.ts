import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { DecisionAnswer } from './decisions';
import type { IntentState } from './state';

/**
 * Decide a pending gate. The payload is validated in the workflow by `parseDecision`;
 * an invalid one, or one for a gate that is not pending, is logged and ignored.
 * Typed `unknown` on purpose: anything may arrive from the Web UI.
 */
export const decideSignal = defineSignal<[unknown]>('decide');

/**
 * The same decision, for callers that want the answer: a payload that does not parse is refused
 * by the update's validator (nothing reaches history); one that parses but may not decide (not
 * pending, not an approver, the agent itself) is answered `{ accepted: false, reason }` and
 * recorded as a refused decision.
 */
export const decideUpdate = defineUpdate<DecisionAnswer, [unknown]>('decision');

/** Who asks to pause or resume, and why. */
export interface PauseRequest {
  readonly by: string;
  readonly reason?: string;
  /** How long this pause may hold the intent before its policy applies (default `limits.pauseTimeout`). */
  readonly timeout?: string;
}

/** Hold the intent before its next stage (the running one finishes). A `PauseRequest`, checked on receipt. */
/**
 * Something happened on an intent's pull request (a webhook delivery the worker verified): the
 * workflow reads the pull request now rather than at its next poll. It carries no decision.
 */
export const forgeEventSignal = defineSignal<[unknown]>('forgeEvent');

export const pauseSignal = defineSignal<[unknown]>('pause');

/** Let a paused intent go on. A `PauseRequest`, checked on receipt. */
export const resumeSignal = defineSignal<[unknown]>('resume');

/** The intent's current state: stage, attempts, spend, pending gate, decisions, artifacts. */
export const stateQuery = defineQuery<IntentState>('state');
