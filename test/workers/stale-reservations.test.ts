/**
 * A worker that dies mid-call leaves its call's budget reservation open. The next worker to
 * start closes every such reservation at its maximum (the call may have been billed), once, with
 * a COST_WARNING on the intent; a reservation of a call still running elsewhere is left alone.
 */
import pino from 'pino';
import { reconcileStaleReservations, STALE_RESERVATION_MS } from '../../src/workers/stale-reservations';
import { createTestWorld, waitFor, type TestWorld } from '../helpers/env';

const logger = pino({ level: 'silent' });
let world: TestWorld;

beforeAll(async () => {
  world = await createTestWorld('stale-reservations');
});
afterAll(async () => {
  await world?.close();
});

async function openReservation(id: string, intentId: string, ageMs: number): Promise<void> {
  await world.pool.query(
    `INSERT INTO budget_reservations (id, day, intent_id, amount_usd, limit_usd, granted, committed_usd, created_at)
     VALUES ($1, now()::date, $2, 0.42, 100, true, 0, now() - make_interval(secs => $3))`,
    [id, intentId, ageMs / 1000],
  );
}

async function settlementOf(id: string): Promise<{ kind: string; actual: string } | undefined> {
  const { rows } = await world.pool.query<{ kind: string; actual: string }>('SELECT kind, actual_usd::text AS actual FROM budget_settlements WHERE reservation_id = $1', [id]);
  return rows[0];
}

test('closes the stale reservations at their maximum, once, and leaves the ones of calls still running', async () => {
  await openReservation('stale-1', 'intent-stale', STALE_RESERVATION_MS + 60_000);
  await openReservation('young-1', 'intent-stale', 5_000);
  await openReservation('stale-settled', 'intent-stale', STALE_RESERVATION_MS + 60_000);
  await world.ledger.settleReservation('stale-settled', '0.10');

  expect(await reconcileStaleReservations(world.ledger, logger)).toBe(1);
  expect(await settlementOf('stale-1')).toEqual({ kind: 'reconciled', actual: '0.420000' });
  expect(await settlementOf('young-1')).toBeUndefined();
  expect(await settlementOf('stale-settled')).toEqual({ kind: 'settled', actual: '0.100000' });
  const { rows } = await world.pool.query(`SELECT severity, metadata->>'reservationId' AS reservation FROM safety_events WHERE intent_id = 'intent-stale' AND event_type = 'COST_WARNING'`);
  expect(rows).toEqual([{ severity: 'medium', reservation: 'stale-1' }]);
  // Counted as spent, no longer as reserved.
  const day = new Date().toISOString().slice(0, 10);
  const spend = await world.ledger.daySpend(day);
  expect(spend.reservedUsd).toBe('0.420000'); // young-1 only
  // A second worker starting finds nothing more to do.
  expect(await reconcileStaleReservations(world.ledger, logger)).toBe(0);
});

test('a worker closes them when it starts', async () => {
  await openReservation('stale-at-start', 'intent-restart', STALE_RESERVATION_MS + 60_000);
  const worker = await world.worker({ logger });
  const running = worker.run();
  await waitFor(async () => (await settlementOf('stale-at-start')) ?? undefined, 10_000, 'the reservation to be closed');
  expect(await settlementOf('stale-at-start')).toEqual({ kind: 'reconciled', actual: '0.420000' });
  worker.shutdown();
  await running;
});
