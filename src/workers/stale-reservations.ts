import type { Logger } from 'pino';
import { deterministicUuid } from '../ledger/event-id';
import type { Ledger } from '../ledger/ledger';

/**
 * A reservation still open after this long belongs to a call whose worker died before it could
 * settle: no model call is allowed to run this long (the longest default timeout is 30 min).
 */
export const STALE_RESERVATION_MS = 60 * 60_000;

/**
 * Closes the reservations of calls whose worker died mid-call, at their maximum (each may have
 * been billed), each with a COST_WARNING on its intent. A worker does it when it starts; the
 * ledger closes each reservation once however many workers start together. Never throws: a
 * ledger that is not there yet only delays it to the next start.
 */
export async function reconcileStaleReservations(ledger: Ledger, logger: Logger, now = Date.now()): Promise<number> {
  try {
    const closed = await ledger.reconcileStaleReservations(new Date(now - STALE_RESERVATION_MS));
    for (const reservation of closed) {
      await ledger.recordSafetyEvent({
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
    if (closed.length > 0) logger.warn({ reservations: closed.length }, 'closed the reservations of calls whose worker stopped mid-call, at their maximum');
    return closed.length;
  } catch (error) {
    logger.warn({ err: error }, 'could not reconcile stale budget reservations; the next worker start tries again');
    return 0;
  }
}
