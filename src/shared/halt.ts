import type { SafetyEventType } from '../ledger/types';

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
}
