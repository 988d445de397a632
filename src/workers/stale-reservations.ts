import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import { deterministicUuid } from '../ledger/event-id';
import type { Ledger } from '../ledger/ledger';
import type { OpenReservation } from '../ledger/types';

/**
 * Closing the budget reservations of calls whose worker died mid-call. A reservation names the
 * activity attempt that made it; once Temporal says that attempt no longer runs (its workflow
 * closed, the activity finished, or a later attempt took over), nothing will ever settle it: it
 * is released, with a COST_WARNING saying so, and stops holding budget. Nothing reported what
 * the call cost (the gateway that would have died with the worker), so nothing is counted for
 * it; the provider's usage page has the truth. A worker does this when it starts and every
 * minute after, and the ledger closes each reservation once however many workers try together.
 */

/** Reservations younger than this are left alone: their call may be settling right now. */
export const SETTLE_GRACE_MS = 15_000;
/** How often a running worker looks. */
export const RECONCILE_EVERY_MS = 60_000;
/**
 * A reservation that names no activity (made before they were recorded) and is still open after
 * this long is closed at its maximum: no model call is allowed to run this long.
 */
export const STALE_RESERVATION_MS = 60 * 60_000;

export type AttemptStillRuns = (activity: NonNullable<OpenReservation['activity']>) => Promise<boolean>;

/** Asks the Temporal server whether an activity attempt may still be running. */
export function attemptStillRunsOn(client: Client): AttemptStillRuns {
  return async ({ workflowId, runId, activityId, attempt }) => {
    let description;
    try {
      description = await client.workflow.getHandle(workflowId, runId).describe();
    } catch (error) {
      if ((error as Error).name === 'WorkflowNotFoundError') return false;
      throw error;
    }
    if (description.status.name !== 'RUNNING') return false;
    const pending = (description.raw.pendingActivities ?? []).find((a) => a.activityId === activityId);
    // Not pending: it finished. Pending at a later attempt: ours ended (timed out, failed).
    return pending !== undefined && (pending.attempt ?? 1) <= attempt;
  };
}

/**
 * Releases the reservations of attempts that no longer run, and closes reservations from before
 * activities were recorded once stale, each with a COST_WARNING. Never throws: a ledger or server
 * that is not there yet only delays it to the next round. Returns how many it closed.
 */
export async function reconcileReservations(ledger: Ledger, logger: Logger, stillRuns: AttemptStillRuns, now = Date.now()): Promise<number> {
  let closed = 0;
  try {
    closed += await closeLegacy(ledger, now);
    for (const reservation of await ledger.budget.openReservations(new Date(now - SETTLE_GRACE_MS))) {
      const activity = reservation.activity;
      if (!activity) continue;
      const running = await stillRuns(activity).catch(() => true); // unsure: leave it for the next round
      if (running || !(await ledger.budget.release(reservation.id))) continue;
      closed++;
      await ledger.audit.recordSafetyEvent({
        id: deterministicUuid('released-abandoned-reservation', reservation.id),
        timestamp: new Date(now),
        eventType: 'COST_WARNING',
        severity: 'medium',
        intentId: reservation.intentId,
        ...(reservation.stage ? { stage: reservation.stage } : {}),
        ...(reservation.agentId ? { agentId: reservation.agentId } : {}),
        reason: `a model call's reservation of $${reservation.amountUsd} was released: attempt ${activity.attempt} of activity ${activity.activityId} stopped before the call reported its cost (its worker stopped mid-call)`,
        suggestion: 'Nothing to do for the budgets. If the provider billed that call, its usage page has the cost; Warden counted none.',
        metadata: { reservationId: reservation.id, amountUsd: reservation.amountUsd, released: true, ...activity },
      });
    }
    if (closed > 0) logger.warn({ reservations: closed }, 'closed the budget reservations of calls whose worker stopped mid-call');
  } catch (error) {
    logger.warn({ err: error }, 'could not reconcile open budget reservations; the next round tries again');
  }
  return closed;
}

async function closeLegacy(ledger: Ledger, now: number): Promise<number> {
  const closed = await ledger.budget.reconcileStale(new Date(now - STALE_RESERVATION_MS));
  for (const reservation of closed) {
    await ledger.audit.recordSafetyEvent({
      id: deterministicUuid('reconciled-reservation', reservation.id),
      timestamp: new Date(now),
      eventType: 'COST_WARNING',
      severity: 'medium',
      intentId: reservation.intentId,
      reason: `a model call's reservation of $${reservation.amountUsd} was never settled (its worker stopped mid-call); it is counted at that maximum`,
      suggestion: 'Nothing to do: the spend is counted at its most. A model_calls row is missing for that call; the provider’s own usage page has its real cost.',
      metadata: { reservationId: reservation.id, amountUsd: reservation.amountUsd, reconciled: true },
    });
  }
  return closed.length;
}
