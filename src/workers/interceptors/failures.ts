import type { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { NOT_ENDPOINT_FAILURES } from '../../safety/circuit-breaker';
import { FailureType } from '../../shared/errors';

/** Temporal reads a zero nextRetryDelay as "use the retry policy"; never ask for less than this. */
export const MIN_RETRY_DELAY_MS = 1_000;

/**
 * Whether a failed agent call says its endpoint is unhealthy: not a cancellation, nor one of our
 * own refusals of an answer. Both the endpoint's circuit and the error-rate breaker count only these.
 */
export function countsAgainstEndpoint(error: unknown, ctx: Context | undefined): boolean {
  if (stoppedUnanswered(error, ctx)) return false;
  if (error instanceof ApplicationFailure && error.type && NOT_ENDPOINT_FAILURES.has(error.type)) return false;
  return true;
}

/**
 * Whether an agent call was stopped before its endpoint could answer: cancelled, or ended by the
 * kill switch. Its endpoint's circuit counts it neither way.
 */
export function stoppedUnanswered(error: unknown, ctx: Context | undefined): boolean {
  if (ctx?.cancellationSignal.aborted) return true;
  if (error instanceof CancelledFailure || (error instanceof Error && error.name === 'AbortError')) return true;
  return error instanceof ApplicationFailure && error.type === FailureType.KillSwitch;
}

/** The failure type an attempt's audit row and the layers name a thrown error by. */
export function failureTypeOf(error: unknown): string {
  if (error instanceof ApplicationFailure) return error.type ?? 'ApplicationFailure';
  if (error instanceof CancelledFailure) return 'CANCELLED';
  return (error instanceof Error ? error.name : typeof error).slice(0, 200);
}

/** An error's message for a log line or an event's reason. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
