import { randomInt } from 'node:crypto';
import pg from 'pg';
import { ZodError } from 'zod';
import { Ledger, LedgerError } from '../../src/ledger/ledger';
import type { FreshDatabase } from '../helpers/database';
import { testBackends } from '../helpers/database';
import { countRows, micros, migratedLedger, usdOf } from './fixtures';

describe.each(testBackends())('per-day budget on the %s PostgreSQL', (_backend, baseUrl) => {
  let db: FreshDatabase;
  let ledger: Ledger;
  beforeAll(async () => {
    ({ db, ledger } = await migratedLedger(baseUrl));
  });
  afterAll(async () => {
    await db?.drop();
  });

  /** `n` Ledgers on pools of one connection each: `n` independent sessions, like `n` workers. */
  async function withWorkers<T>(n: number, fn: (workers: Ledger[]) => Promise<T>): Promise<T> {
    const pools = Array.from({ length: n }, () => new pg.Pool({ connectionString: db.url, max: 1 }));
    try {
      // Connect them all first, so the race is between reservations rather than connection setup.
      await Promise.all(pools.map((pool) => pool.query('SELECT 1')));
      return await fn(pools.map((pool) => new Ledger(pool)));
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
    }
  }

  test('20 intents racing at the limit: exactly 16 × $0.30 fit in $5.00, and settled spend never exceeds it', async () => {
    const day = '2030-01-01';
    const results = await withWorkers(20, (workers) =>
      Promise.all(workers.map((worker, i) => worker.reserveBudget({ id: `race-${i}`, day, intentId: `intent-${i}`, amountUsd: '0.30', limitUsd: '5.00' }))),
    );
    const granted = results.map((r, i) => ({ ...r, id: `race-${i}` })).filter((r) => r.granted);
    expect(granted).toHaveLength(16);
    for (const denied of results.filter((r) => !r.granted)) {
      expect(denied.committedUsd).toBe('4.800000');
      expect(denied.limitUsd).toBe('5.000000');
    }
    // Every grant saw a distinct committed total: 0.00, 0.30, …, 4.50.
    expect(granted.map((r) => r.committedUsd).sort((a, b) => Number(micros(a) - micros(b)))).toEqual(
      Array.from({ length: 16 }, (_, i) => usdOf(BigInt(i) * 300_000n)),
    );
    expect(await ledger.daySpend(day)).toEqual({ settledUsd: '0.000000', reservedUsd: '4.800000' });

    // Settle each at a real cost at most what it reserved (whole millionths, up to $0.30).
    let expected = 0n;
    await withWorkers(16, (workers) =>
      Promise.all(
        granted.map((r, i) => {
          const actual = BigInt(randomInt(0, 300_001));
          expected += actual;
          return workers[i]!.settleReservation(r.id, usdOf(actual));
        }),
      ),
    );
    const settled = await ledger.daySpend(day);
    expect(settled).toEqual({ settledUsd: usdOf(expected), reservedUsd: '0.000000' });
    expect(micros(settled.settledUsd)).toBeLessThanOrEqual(micros('5.00'));

    // What settling freed is up for grabs again, still atomically; settle the second round at full price.
    const second = await withWorkers(20, (workers) =>
      Promise.all(workers.map((worker, i) => worker.reserveBudget({ id: `race2-${i}`, day, intentId: `intent-${i}`, amountUsd: '0.30', limitUsd: '5.00' }))),
    );
    const room = micros('5.00') - expected;
    expect(second.filter((r) => r.granted)).toHaveLength(Math.min(20, Number(room / 300_000n)));
    for (const [i, r] of second.entries()) if (r.granted) await ledger.settleReservation(`race2-${i}`, '0.30');
    const final = await ledger.daySpend(day);
    expect(micros(final.settledUsd)).toBeLessThanOrEqual(micros('5.00'));
    expect(micros(final.settledUsd)).toBeGreaterThan(micros('4.70'));
  });

  test('a retried reservation gets the same answer and is counted once, even when the retries race', async () => {
    const day = '2030-01-02';
    const request = { id: 'retry-1', day, intentId: 'intent-r', amountUsd: '1.25', limitUsd: '2.00' };
    const first = await ledger.reserveBudget(request);
    expect(first).toEqual({ granted: true, committedUsd: '0.000000', limitUsd: '2.000000' });
    expect(await ledger.reserveBudget(request)).toEqual(first);
    const racing = await withWorkers(5, (workers) => Promise.all(workers.map((w) => w.reserveBudget({ ...request, id: 'retry-2' }))));
    // retry-2 does not fit beside retry-1 (1.25 + 1.25 > 2.00); all five racers got the one answer.
    expect(new Set(racing.map((r) => JSON.stringify(r))).size).toBe(1);
    expect(racing[0]).toEqual({ granted: false, committedUsd: '1.250000', limitUsd: '2.000000' });
    expect(await ledger.daySpend(day)).toEqual({ settledUsd: '0.000000', reservedUsd: '1.250000' });
    const rows = await db.pool.query(`SELECT count(*)::int AS n FROM budget_reservations WHERE day = $1`, [day]);
    expect(rows.rows[0].n).toBe(2);
    // The same id for a different call is a bug, not a retry.
    await expect(ledger.reserveBudget({ ...request, amountUsd: '0.50' })).rejects.toBeInstanceOf(LedgerError);
  });

  test('settling: at most the reserved amount, once; releasing frees an unsettled reservation', async () => {
    const day = '2030-01-03';
    const reserve = (id: string, amountUsd: string): ReturnType<Ledger['reserveBudget']> =>
      ledger.reserveBudget({ id, day, intentId: 'intent-s', amountUsd, limitUsd: '1.00' });
    await reserve('s-1', '0.40');
    await expect(ledger.settleReservation('s-1', '0.400001')).rejects.toThrow(/only \$0.400000 was reserved/);
    await ledger.settleReservation('s-1', '0.123456');
    await ledger.settleReservation('s-1', '0.123456'); // a retry
    await expect(ledger.settleReservation('s-1', '0.2')).rejects.toThrow(/already settled at \$0.123456/);
    expect(await ledger.releaseReservation('s-1')).toBe(false);

    await reserve('s-2', '0.50');
    expect(await ledger.daySpend(day)).toEqual({ settledUsd: '0.123456', reservedUsd: '0.500000' });
    expect(await ledger.releaseReservation('s-2')).toBe(true);
    expect(await ledger.releaseReservation('s-2')).toBe(false);
    await expect(ledger.settleReservation('s-2', '0.10')).rejects.toThrow(/was released/);
    expect(await ledger.daySpend(day)).toEqual({ settledUsd: '0.123456', reservedUsd: '0.000000' });

    // A call dearer than the whole budget is denied on its own; a denial has nothing to settle or release.
    expect(await reserve('s-3', '1.000001')).toEqual({ granted: false, committedUsd: '0.123456', limitUsd: '1.000000' });
    await expect(ledger.settleReservation('s-3', '0')).rejects.toThrow(/was denied/);
    expect(await ledger.releaseReservation('s-3')).toBe(false);
    // Exactly at the limit fits.
    expect((await reserve('s-4', '0.876544')).granted).toBe(true);
    expect((await reserve('s-5', '0.000001')).granted).toBe(false);
    await expect(ledger.settleReservation('nope', '0.10')).rejects.toThrow(/no budget reservation nope/);
  });

  test('a bad reservation request is a zod error and reserves nothing', async () => {
    const before = await countRows(db.pool, 'budget_reservations');
    const good = { id: 'bad-1', day: '2030-01-04', intentId: 'intent-b', amountUsd: '0.10', limitUsd: '1.00' };
    for (const bad of [
      { ...good, day: '2030-02-30' },
      { ...good, day: '04/01/2030' },
      { ...good, amountUsd: '-0.10' },
      { ...good, amountUsd: 0.1 as never },
      { ...good, limitUsd: '1e3' },
      { ...good, id: '' },
    ]) {
      await expect(ledger.reserveBudget(bad)).rejects.toBeInstanceOf(ZodError);
    }
    await expect(ledger.settleReservation('bad-1', '0.1234567')).rejects.toBeInstanceOf(ZodError);
    await expect(ledger.daySpend('tomorrow')).rejects.toBeInstanceOf(ZodError);
    expect(await countRows(db.pool, 'budget_reservations')).toBe(before);
  });
});
