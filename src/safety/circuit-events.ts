import type { SafetyEventType, Severity } from '../shared/safety-events';
import type { CircuitStateChange } from './circuit-state';

/** The safety event one circuit transition is recorded as. */
export interface CircuitEvent {
  readonly type: SafetyEventType;
  readonly severity: Severity;
  readonly reason: string;
  readonly breakerId: string;
  /** Tells the transition apart from the attempt's other events (the event's id is derived from it). */
  readonly key: string;
  readonly metadata: { readonly from: string; readonly to: string; readonly cause: string; readonly at: string };
}

/**
 * Every move of a circuit is one row, so that its history can be read back per endpoint:
 * to OPEN a CIRCUIT_TRIPPED, to HALF_OPEN a CIRCUIT_HALF_OPEN, to CLOSED a CIRCUIT_RESET.
 */
export function circuitEventOf(change: CircuitStateChange): CircuitEvent {
  const type = change.to === 'OPEN' ? 'CIRCUIT_TRIPPED' : change.to === 'HALF_OPEN' ? 'CIRCUIT_HALF_OPEN' : 'CIRCUIT_RESET';
  const word = change.to === 'OPEN' ? 'opened' : change.to === 'HALF_OPEN' ? 'half-open' : 'closed';
  return {
    type,
    severity: change.to === 'OPEN' ? 'high' : 'info',
    reason: `circuit for ${change.endpoint} ${word}: ${change.detail}`,
    breakerId: change.endpoint,
    key: `${change.endpoint}:${change.from}->${change.to}`,
    metadata: { from: change.from, to: change.to, cause: change.reason, at: new Date(change.at).toISOString() },
  };
}
