/**
 * A worker that dies mid-call leaves its call's budget reservation open. Once Temporal says the
 * attempt that made it no longer runs, a worker releases it, once, with a COST_WARNING on the
 * intent; a reservation of an attempt still running, or one made a moment ago, is left alone.
 * Reservations from before attempts were recorded are closed at their maximum once stale, with
 * a cost row at that amount, so the books still balance.
 */
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { reconcileReservations, STALE_RESERVATION_MS, type AttemptStillRuns } from '../../src/workers/stale-reservations';
import { createTestWorld, waitFor, type TestWorld } from '../helpers/env';

const logger = pino({ level: 'silent' });
let world: TestWorld;

beforeAll(async () => {
  world = await createTestWorld('stale-reservations');
});
afterAll(async () => {
  await world?.close();
});

async function openReservation(id: string, intentId: string, ageMs: number, activity?: { workflowId: string; activityId: string; attempt: number }): Promise<void> {
  await world.pool.query(
    `INSERT INTO budget_reservations (id, day, intent_id, amount_usd, limit_usd, granted, committed_usd, created_at, workflow_id, run_id, activity_id, activity_attempt)
     VALUES ($1, now()::date, $2, 0.42, 100, true, 0, now() - make_interval(secs => $3), $4, $5, $6, $7)`,
    [id, intentId, ageMs / 1000, activity?.workflowId ?? null, activity ? randomUUID() : null, activity?.activityId ?? null, activity?.attempt ?? null],
  );
}

async function settlementOf(id: string): Promise<{ kind: string; actual: string } | undefined> {
  const { rows } = await world.pool.query<{ kind: string; actual: string }>('SELECT kind, actual_usd::text AS actual FROM budget_settlements WHERE reservation_id = $1', [id]);
  return rows[0];
}

async function warnings(intentId: string): Promise<Array<{ reservation: string }>> {
  const { rows } = await world.pool.query<{ reservation: string }>(
    `SELECT metadata->>'reservationId' AS reservation FROM safety_events WHERE intent_id = $1 AND event_type = 'COST_WARNING' ORDER BY 1`,
    [intentId],
  );
  return rows;
}

test('releases the reservations of attempts that no longer run, once; leaves running and young ones', async () => {
  const over: AttemptStillRuns = async ({ activityId }) => activityId === 'still-running';
  await openReservation('gone-1', 'intent-gone', 60_000, { workflowId: 'wf-gone', activityId: 'ended', attempt: 1 });
  await openReservation('running-1', 'intent-gone', 60_000, { workflowId: 'wf-gone', activityId: 'still-running', attempt: 2 });
  await openReservation('young-1', 'intent-gone', 2_000, { workflowId: 'wf-gone', activityId: 'ended', attempt: 1 });

  expect(await reconcileReservations(world.ledger, logger, over)).toBe(1);
  expect(await settlementOf('gone-1')).toEqual({ kind: 'released', actual: '0.000000' });
  expect(await settlementOf('running-1')).toBeUndefined();
  expect(await settlementOf('young-1')).toBeUndefined();
  expect(await warnings('intent-gone')).toEqual([{ reservation: 'gone-1' }]);
  // Released: no longer held against the day, and nothing counted as spent.
  const books = await world.ledger.budget.books({ intentId: 'intent-gone' });
  expect(books).toEqual([{ intentId: 'intent-gone', budgetUsd: '0.000000', costEventsUsd: '0.000000', openReservations: 2 }]);
  // A second worker finds nothing more; a server it cannot ask leaves everything for the next round.
  expect(await reconcileReservations(world.ledger, logger, over)).toBe(0);
  expect(await reconcileReservations(world.ledger, logger, () => Promise.reject(new Error('unreachable')))).toBe(0);
});

test('reservations from before attempts were recorded: closed at their maximum once stale, with a cost row, so the books balance', async () => {
  await openReservation('stale-1', 'intent-stale', STALE_RESERVATION_MS + 60_000);
  await openReservation('legacy-young', 'intent-stale', 5_000);
  await openReservation('stale-settled', 'intent-stale', STALE_RESERVATION_MS + 60_000);
  await world.ledger.budget.settle('stale-settled', '0.10');

  expect(await reconcileReservations(world.ledger, logger, async () => true)).toBe(1);
  expect(await settlementOf('stale-1')).toEqual({ kind: 'reconciled', actual: '0.420000' });
  expect(await settlementOf('legacy-young')).toBeUndefined();
  expect(await warnings('intent-stale')).toEqual([{ reservation: 'stale-1' }]);
  const { rows } = await world.pool.query(`SELECT usd::text AS usd FROM cost_events WHERE reservation_id = 'stale-1'`);
  expect(rows).toEqual([{ usd: '0.420000' }]);
  expect(await reconcileReservations(world.ledger, logger, async () => true)).toBe(0);
});

test('a worker releases them when it starts, asking its Temporal server', async () => {
  // Its workflow never existed on this server: the attempt is certainly not running.
  await openReservation('abandoned-at-start', 'intent-restart', 60_000, { workflowId: `wf-nowhere-${Date.now()}`, activityId: '1', attempt: 1 });
  const worker = await world.worker({ logger });
  const running = worker.run();
  try {
    await waitFor(async () => (await settlementOf('abandoned-at-start')) ?? undefined, 120_000, 'the reservation to be released');
    expect(await settlementOf('abandoned-at-start')).toEqual({ kind: 'released', actual: '0.000000' });
  } finally {
    worker.shutdown();
    await running;
  }
});
