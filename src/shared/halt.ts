import type { SafetyEventType } from './safety-events';

/**
 * Details of a SAFETY_HALT failure, thrown by the stage guard or an activity: the SafetyEvent the
 * workflow writes for it.
 */
export interface HaltDetails {
  readonly eventType: SafetyEventType;
  readonly reason: string;
  readonly suggestion: string;
  readonly current: number;
  readonly threshold: number;
  /** What the activity undid before it halted (a reverted escape): the workflow writes it as a ROLLBACK row. */
  readonly rollback?: { readonly reason: string; readonly metadata: Record<string, unknown> };
}

/**
 * Details of a KILL_SWITCH failure thrown while an agent or test ran (`midRun`): the global stop
 * killed it. `warden stop --all` cancels the intent right after, and the workflow waits a moment
 * for that cancellation so it ends as cancelled rather than failed.
 */
export interface KillSwitchDetails {
  readonly source: 'global_stop';
  readonly midRun: true;
}
