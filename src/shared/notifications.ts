import type { SafetyEventType } from './safety-events';

/**
 * What a person is told about, by name. Each is one or more ledger event types: every
 * notification starts as a SafetyEvent row, so the ledger is the outbox and nothing a worker
 * records is missed by a crash between writing and telling. Pure data: the workflow imports it.
 */
export const NOTIFICATION_KINDS = [
  'gate.opened',
  'gate.timeout-near',
  'gate.escalated',
  'gate.decided',
  'breaker.opened',
  'budget.warning',
  'budget.exhausted',
  'intent.merged',
  'intent.rejected',
  'intent.failed',
  'intent.stopped',
] as const;
export type NotificationKind = (typeof NOTIFICATION_KINDS)[number];

/** The ledger events behind each kind. A COST_WARNING counts only with a `share` (80 %, 90 %), not a released reservation. */
export const NOTIFIED_EVENTS: Readonly<Partial<Record<SafetyEventType, NotificationKind>>> = {
  GATE_REQUESTED: 'gate.opened',
  GATE_TIMEOUT_NEAR: 'gate.timeout-near',
  GATE_ESCALATED: 'gate.escalated',
  GATE_DECIDED: 'gate.decided',
  GATE_AUTO_PASSED: 'gate.decided',
  CIRCUIT_TRIPPED: 'breaker.opened',
  COST_WARNING: 'budget.warning',
  COST_BUDGET_EXCEEDED: 'budget.exhausted',
  INTENT_MERGED: 'intent.merged',
  INTENT_REJECTED: 'intent.rejected',
  INTENT_FAILED: 'intent.failed',
  INTENT_CANCELLED: 'intent.stopped',
  INTENT_STOPPED: 'intent.stopped',
};

export const NOTIFIED_EVENT_TYPES = Object.keys(NOTIFIED_EVENTS) as SafetyEventType[];

/** The kind of notification a ledger event makes, or undefined when it makes none. */
export function notificationKindOf(eventType: string, metadata: Readonly<Record<string, unknown>>): NotificationKind | undefined {
  const kind = NOTIFIED_EVENTS[eventType as SafetyEventType];
  if (kind === 'budget.warning' && typeof metadata.share !== 'number') return undefined;
  return kind;
}
