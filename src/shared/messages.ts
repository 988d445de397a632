import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { IntentState } from './state';

/**
 * Decide a pending gate. The payload is validated in the workflow against `DecisionSchema`;
 * an invalid one, or one for a gate that is not pending, is logged and ignored.
 * Typed `unknown` on purpose: anything may arrive from the Web UI.
 */
export const decideSignal = defineSignal<[unknown]>('decide');

/** Who asks to pause or resume, and why. */
export interface PauseRequest {
  readonly by: string;
  readonly reason?: string;
}

/** Hold the intent before its next stage (the running one finishes). */
export const pauseSignal = defineSignal<[PauseRequest]>('pause');

/** Let a paused intent go on. */
export const resumeSignal = defineSignal<[PauseRequest]>('resume');

/** The intent's current state: stage, attempts, spend, pending gate, decisions, artifacts. */
export const stateQuery = defineQuery<IntentState>('state');
