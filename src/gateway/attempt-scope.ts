import { AsyncLocalStorage } from 'node:async_hooks';
import type { SafetyEventInput } from '../ledger/types';
import type { SafetyEventType, Severity } from '../shared/safety-events';
import type { SpendMeter } from './spend-meter';

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
 * What the worker's agent-safety interceptor hands the agent attempt it wraps: the meter every
 * paid call goes through, and the recorder its safety decisions are written with. The gateway's
 * keys are issued against it, so a call made by a CLI is metered and recorded as the attempt's.
 */
export interface AttemptScope {
  readonly meter: SpendMeter;
  readonly event?: RecordEvent;
}

const current = new AsyncLocalStorage<AttemptScope>();

/** Runs `fn` as the attempt `scope` describes (see `currentAttemptScope`). */
export function withAttemptScope<T>(scope: AttemptScope, fn: () => Promise<T>): Promise<T> {
  return current.run(scope, fn);
}

/** The scope the worker's interceptor set for the attempt running here, if any. */
export function currentAttemptScope(): AttemptScope | undefined {
  return current.getStore();
}
