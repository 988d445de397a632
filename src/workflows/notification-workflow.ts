import { ActivityFailure, ApplicationFailure, proxyActivities, TimeoutFailure } from '@temporalio/workflow';
import type { WardenActivities } from '../activities';
import type { Delivery } from '../activities/notifications/delivery';

export interface NotificationInput {
  /** One per channel that takes the event; they are tried side by side. */
  readonly deliveries: readonly Delivery[];
  /** Attempts per delivery before it becomes a dead letter, and the wait before the first retry (doubling after). */
  readonly attempts: number;
  readonly firstRetryMs: number;
}

export interface NotificationResult {
  readonly delivered: number;
  readonly undelivered: number;
}

// Recording a dead letter is an idempotent write: it may be retried until it lands.
const { recordUndelivered } = proxyActivities<WardenActivities>({ startToCloseTimeout: '1m', retry: { maximumAttempts: 10 } });

/**
 * Tells every channel of one ledger event, each on its own: a channel that fails or hangs
 * neither delays the others nor the intent (the intent never waits for this workflow; the
 * dispatcher started it from the ledger). After its last attempt, a delivery is a dead letter.
 */
export async function notificationWorkflow(input: NotificationInput): Promise<NotificationResult> {
  const { deliverNotification } = proxyActivities<WardenActivities>({
    // The activity gives up on a silent endpoint after 10 s; this bounds it if that fails too.
    startToCloseTimeout: '30s',
    retry: { maximumAttempts: input.attempts, initialInterval: input.firstRetryMs, backoffCoefficient: 2, nonRetryableErrorTypes: ['NotificationRefused'] },
  });
  const outcomes = await Promise.all(
    input.deliveries.map(async (delivery) => {
      try {
        await deliverNotification(delivery);
        return true;
      } catch (error) {
        await recordUndelivered({ delivery, attempts: attemptsOf(error, input.attempts), error: causeOf(error) });
        return false;
      }
    }),
  );
  return { delivered: outcomes.filter(Boolean).length, undelivered: outcomes.filter((ok) => !ok).length };
}

/** What made the last attempt fail, as the activity said it. */
function causeOf(error: unknown): string {
  let cause: unknown = error;
  while (cause instanceof ActivityFailure && cause.cause) cause = cause.cause;
  if (cause instanceof TimeoutFailure) return `no answer within the attempt's timeout (${cause.timeoutType})`;
  return cause instanceof Error ? cause.message : String(cause);
}

/** The attempt that failed last, as the activity numbered it (a timed-out attempt could not say: then all of them). */
function attemptsOf(error: unknown, attempts: number): number {
  const cause = error instanceof ActivityFailure ? error.cause : undefined;
  const attempt = cause instanceof ApplicationFailure ? cause.details?.[0] : undefined;
  return typeof attempt === 'number' ? attempt : attempts;
}
