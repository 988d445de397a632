import { randomInt } from 'node:crypto';
import pg from 'pg';
import { ZodError } from 'zod';
import { Ledger } from '../../src/ledger/ledger';
import { booksDifferenceCents } from '../../src/ledger/budget-store';
import { LedgerError } from '../../src/ledger/ledger-error';
import type { FreshDatabase } from '../helpers/database';
import { describeOnBackends } from '../helpers/database';
import { countRows, micros, migratedLedger, usdOf } from './fixtures';

describeOnBackends('per-day budget on the %s PostgreSQL', (baseUrl) => {
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
      Promise.all(workers.map((worker, i) => worker.budget.reserve({ id: `race-${i}`, day, intentId: `intent-${i}`, amountUsd: '0.30', limitUsd: '5.00' }))),
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
    expect(await ledger.budget.daySpend(day)).toEqual({ settledUsd: '0.000000', reservedUsd: '4.800000' });

    // Settle each at a real cost at most what it reserved (whole millionths, up to $0.30).
    let expected = 0n;
    await withWorkers(16, (workers) =>
      Promise.all(
        granted.map((r, i) => {
          const actual = BigInt(randomInt(0, 300_001));
          expected += actual;
          return workers[i]!.budget.settle(r.id, usdOf(actual));
        }),
      ),
    );
    const settled = await ledger.budget.daySpend(day);
    expect(settled).toEqual({ settledUsd: usdOf(expected), reservedUsd: '0.000000' });
    expect(micros(settled.settledUsd)).toBeLessThanOrEqual(micros('5.00'));

    // What settling freed is up for grabs again, still atomically; settle the second round at full price.
    const second = await withWorkers(20, (workers) =>
      Promise.all(workers.map((worker, i) => worker.budget.reserve({ id: `race2-${i}`, day, intentId: `intent-${i}`, amountUsd: '0.30', limitUsd: '5.00' }))),
    );
    const room = micros('5.00') - expected;
    expect(second.filter((r) => r.granted)).toHaveLength(Math.min(20, Number(room / 300_000n)));
    for (const [i, r] of second.entries()) if (r.granted) await ledger.budget.settle(`race2-${i}`, '0.30');
    const final = await ledger.budget.daySpend(day);
    expect(micros(final.settledUsd)).toBeLessThanOrEqual(micros('5.00'));
    expect(micros(final.settledUsd)).toBeGreaterThan(micros('4.70'));
  });

  test('a retried reservation gets the same answer and is counted once, even when the retries race', async () => {
    const day = '2030-01-02';
    const request = { id: 'retry-1', day, intentId: 'intent-r', amountUsd: '1.25', limitUsd: '2.00' };
    const first = await ledger.budget.reserve(request);
    expect(first).toEqual({ granted: true, committedUsd: '0.000000', limitUsd: '2.000000', amountUsd: '1.250000' });
    expect(await ledger.budget.reserve(request)).toEqual(first);
    const racing = await withWorkers(5, (workers) => Promise.all(workers.map((w) => w.budget.reserve({ ...request, id: 'retry-2' }))));
    // retry-2 does not fit beside retry-1 (1.25 + 1.25 > 2.00); all five racers got the one answer.
    expect(new Set(racing.map((r) => JSON.stringify(r))).size).toBe(1);
    expect(racing[0]).toEqual({ granted: false, committedUsd: '1.250000', limitUsd: '2.000000', deniedBy: 'day', amountUsd: '1.250000' });
    expect(await ledger.budget.daySpend(day)).toEqual({ settledUsd: '0.000000', reservedUsd: '1.250000' });
    const rows = await db.pool.query(`SELECT count(*)::int AS n FROM budget_reservations WHERE day = $1`, [day]);
    expect(rows.rows[0].n).toBe(2);
    // The same id for a different call is a bug, not a retry.
    await expect(ledger.budget.reserve({ ...request, amountUsd: '0.50' })).rejects.toBeInstanceOf(LedgerError);
  });

  test('settling: at most the reserved amount, once; releasing frees an unsettled reservation', async () => {
    const day = '2030-01-03';
    const reserve = (id: string, amountUsd: string): ReturnType<Ledger['budget']['reserve']> =>
      ledger.budget.reserve({ id, day, intentId: 'intent-s', amountUsd, limitUsd: '1.00' });
    await reserve('s-1', '0.40');
    await expect(ledger.budget.settle('s-1', '0.400001')).rejects.toThrow(/only \$0.400000 was reserved/);
    await ledger.budget.settle('s-1', '0.123456');
    await ledger.budget.settle('s-1', '0.123456'); // a retry
    await expect(ledger.budget.settle('s-1', '0.2')).rejects.toThrow(/already settled at \$0.123456/);
    expect(await ledger.budget.release('s-1')).toBe(false);

    await reserve('s-2', '0.50');
    expect(await ledger.budget.daySpend(day)).toEqual({ settledUsd: '0.123456', reservedUsd: '0.500000' });
    expect(await ledger.budget.release('s-2')).toBe(true);
    expect(await ledger.budget.release('s-2')).toBe(false);
    await expect(ledger.budget.settle('s-2', '0.10')).rejects.toThrow(/was released/);
    expect(await ledger.budget.daySpend(day)).toEqual({ settledUsd: '0.123456', reservedUsd: '0.000000' });

    // A call dearer than the whole budget is denied on its own; a denial has nothing to settle or release.
    expect(await reserve('s-3', '1.000001')).toEqual({ granted: false, committedUsd: '0.123456', limitUsd: '1.000000', deniedBy: 'day', amountUsd: '1.000001' });
    await expect(ledger.budget.settle('s-3', '0')).rejects.toThrow(/was denied/);
    expect(await ledger.budget.release('s-3')).toBe(false);
    // Exactly at the limit fits.
    expect((await reserve('s-4', '0.876544')).granted).toBe(true);
    expect((await reserve('s-5', '0.000001')).granted).toBe(false);
    await expect(ledger.budget.settle('nope', '0.10')).rejects.toThrow(/no budget reservation nope/);
  });

  test('a settlement writes its call\'s cost row in the same transaction, once; the books then balance to the cent', async () => {
    const day = '2030-03-01';
    const intentId = 'books-intent';
    const call = { timestamp: new Date(), intentId, stage: 'impl', attempt: 1, agentId: 'a', modelId: 'm', inputTokens: 10, outputTokens: 5 };
    const activity = { workflowId: 'wf', runId: 'run', activityId: '7', attempt: 1 };
    for (const n of [1, 2, 3]) await ledger.budget.reserve({ id: `books-${n}`, day, intentId, amountUsd: '1.00', limitUsd: '100', activity });
    await ledger.budget.settle('books-1', '0.25', { call });
    await ledger.budget.settle('books-1', '0.25', { call }); // the retry of a settlement writes no second row
    // Two settlements racing (a re-executed attempt's retry): one settlement, one cost row.
    await Promise.all([ledger.budget.settle('books-2', '0.50', { call }), ledger.budget.settle('books-2', '0.50', { call })]);
    await ledger.budget.release('books-3');
    const { rows } = await db.pool.query(`SELECT reservation_id, usd::text AS usd FROM cost_events WHERE intent_id = $1 ORDER BY 1`, [intentId]);
    expect(rows).toEqual([
      { reservation_id: 'books-1', usd: '0.250000' },
      { reservation_id: 'books-2', usd: '0.500000' },
    ]);
    expect(await ledger.budget.books({ intentId })).toEqual([{ intentId, budgetUsd: '0.750000', costEventsUsd: '0.750000', openReservations: 0 }]);
    // The activity that reserved is on record, for the reconciliation after a crash.
    const { rows: made } = await db.pool.query(`SELECT workflow_id, run_id, activity_id, activity_attempt FROM budget_reservations WHERE id = 'books-1'`);
    expect(made).toEqual([{ workflow_id: 'wf', run_id: 'run', activity_id: '7', activity_attempt: 1 }]);
    // A cost row with no settlement behind it (or the other way round) is a difference the check names.
    await ledger.audit.recordCost({ id: '00000000-0000-4000-8000-00000000b00c', timestamp: new Date(), intentId, stage: 'impl', attempt: 1, agentId: 'a', modelId: 'm', inputTokens: 0, outputTokens: 0, usd: '0.01' });
    expect(await ledger.budget.books()).toEqual(expect.arrayContaining([{ intentId, budgetUsd: '0.750000', costEventsUsd: '0.760000', openReservations: 0 }]));
    expect(booksDifferenceCents(await ledger.budget.books({ intentId }))).toBe(1);
  });

  test("20 intents of one agent racing at its day budget: exactly 6 × $0.30 fit in $2.00, and its settled spend never exceeds it", async () => {
    const day = '2030-01-05';
    // Another agent's spend the same day counts for the day, not for this agent.
    await ledger.budget.reserve({ id: 'other-agent', day, intentId: 'intent-o', amountUsd: '3.00', limitUsd: '100', agentId: 'other', agentLimitUsd: '10' });
    const results = await withWorkers(20, (workers) =>
      Promise.all(
        workers.map((worker, i) =>
          worker.budget.reserve({ id: `agent-race-${i}`, day, intentId: `intent-a${i}`, amountUsd: '0.30', limitUsd: '100', agentId: 'racer', agentLimitUsd: '2.00' }),
        ),
      ),
    );
    const granted = results.filter((r) => r.granted);
    expect(granted).toHaveLength(6);
    for (const denied of results.filter((r) => !r.granted)) expect(denied).toEqual({ granted: false, committedUsd: '1.800000', limitUsd: '2.000000', deniedBy: 'agent', amountUsd: '0.300000' });
    // Every grant saw a distinct committed day total (the other agent's $3 plus 0…5 grants).
    expect(new Set(granted.map((r) => r.committedUsd)).size).toBe(6);
    for (const [i, r] of results.entries()) if (r.granted) await ledger.budget.settle(`agent-race-${i}`, '0.30');
    const agentTotal = await db.pool.query(
      `SELECT sum(s.actual_usd)::text AS usd FROM budget_reservations r JOIN budget_settlements s ON s.reservation_id = r.id WHERE r.day = $1 AND r.agent_id = 'racer'`,
      [day],
    );
    expect(agentTotal.rows[0].usd).toBe('1.800000');
    const rows = await db.pool.query(`SELECT count(*)::int AS n FROM budget_reservations WHERE day = $1 AND denied_by = 'agent'`, [day]);
    expect(rows.rows[0].n).toBe(14);
  });

  test("an intent's budget and its stage's budget: counted across days, all reservations of the intent, the refusing one named", async () => {
    const base = { intentId: 'intent-i', limitUsd: '100', intentLimitUsd: '1.00' };
    expect(await ledger.budget.reserve({ ...base, id: 'i-1', day: '2030-01-06', amountUsd: '0.40', stage: 'impl', stageLimitUsd: '0.50' })).toEqual({ granted: true, committedUsd: '0.000000', limitUsd: '100.000000', amountUsd: '0.400000' });
    await ledger.budget.settle('i-1', '0.35');
    // The next day, same intent: the stage has $0.15 left, the intent $0.65.
    expect(await ledger.budget.reserve({ ...base, id: 'i-2', day: '2030-01-07', amountUsd: '0.20', stage: 'impl', stageLimitUsd: '0.50' })).toEqual({ granted: false, committedUsd: '0.350000', limitUsd: '0.500000', deniedBy: 'stage', amountUsd: '0.200000' });
    expect((await ledger.budget.reserve({ ...base, id: 'i-3', day: '2030-01-07', amountUsd: '0.65', stage: 'review' })).granted).toBe(true);
    expect(await ledger.budget.reserve({ ...base, id: 'i-4', day: '2030-01-07', amountUsd: '0.000001', stage: 'review' })).toEqual({ granted: false, committedUsd: '1.000000', limitUsd: '1.000000', deniedBy: 'intent', amountUsd: '0.000001' });
    // Releasing frees it again; a denial is answered the same on a retry.
    await ledger.budget.release('i-3');
    expect((await ledger.budget.reserve({ ...base, id: 'i-5', day: '2030-01-07', amountUsd: '0.65', stage: 'review' })).granted).toBe(true);
    expect((await ledger.budget.reserve({ ...base, id: 'i-4', day: '2030-01-07', amountUsd: '0.000001', stage: 'review' })).deniedBy).toBe('intent');
    // The same id with another stage is not a retry.
    await expect(ledger.budget.reserve({ ...base, id: 'i-5', day: '2030-01-07', amountUsd: '0.65', stage: 'impl' })).rejects.toBeInstanceOf(LedgerError);
  });

  test('an overrun is settled at its real cost only when said so, and counts against every budget after it', async () => {
    const day = '2030-01-08';
    await ledger.budget.reserve({ id: 'o-1', day, intentId: 'intent-o1', amountUsd: '0.50', limitUsd: '1.00' });
    await expect(ledger.budget.settle('o-1', '0.90')).rejects.toThrow(/only \$0.500000 was reserved/);
    await ledger.budget.settle('o-1', '0.90', { overrun: true });
    await ledger.budget.settle('o-1', '0.90', { overrun: true }); // a retry
    expect(await ledger.budget.daySpend(day)).toEqual({ settledUsd: '0.900000', reservedUsd: '0.000000' });
    const marked = await db.pool.query(`SELECT overrun FROM budget_settlements WHERE reservation_id = 'o-1'`);
    expect(marked.rows[0].overrun).toBe(true);
    expect(await ledger.budget.reserve({ id: 'o-2', day, intentId: 'intent-o2', amountUsd: '0.50', limitUsd: '1.00' })).toEqual({ granted: false, committedUsd: '0.900000', limitUsd: '1.000000', deniedBy: 'day', amountUsd: '0.500000' });
  });

  test('a shrinkable request gets the largest amount every budget still allows, if that is at least its minimum', async () => {
    const base = { intentId: 'intent-shrink', limitUsd: '100', intentLimitUsd: '1.00', stage: 'impl', stageLimitUsd: '0.60' };
    await ledger.budget.reserve({ ...base, id: 'k-1', day: '2030-01-09', amountUsd: '0.45' });
    // $0.15 left in the stage, $0.55 in the intent: 0.40 does not fit; the 0.15 left does.
    const shrunk = await ledger.budget.reserve({ ...base, id: 'k-2', day: '2030-01-09', amountUsd: '0.40', minAmountUsd: '0.10' });
    expect(shrunk).toEqual({ granted: true, committedUsd: '0.450000', limitUsd: '100.000000', amountUsd: '0.150000' });
    // A retry of it is the same answer, not a clash.
    expect(await ledger.budget.reserve({ ...base, id: 'k-2', day: '2030-01-09', amountUsd: '0.40', minAmountUsd: '0.10' })).toEqual(shrunk);
    // Nothing left: below the minimum, denied as asked.
    expect(await ledger.budget.reserve({ ...base, id: 'k-3', day: '2030-01-09', amountUsd: '0.40', minAmountUsd: '0.01' })).toEqual({
      granted: false,
      committedUsd: '0.600000',
      limitUsd: '0.600000',
      deniedBy: 'stage',
      amountUsd: '0.400000',
    });
    // A request that fits is granted whole.
    expect((await ledger.budget.reserve({ ...base, id: 'k-4', day: '2030-01-09', amountUsd: '0.10', minAmountUsd: '0.01', stage: 'review', stageLimitUsd: undefined })).amountUsd).toBe('0.100000');
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
      { ...good, agentLimitUsd: '1.00' }, // an agent budget without the agent
      { ...good, stageLimitUsd: '1.00' }, // a stage budget without the stage
    ]) {
      await expect(ledger.budget.reserve(bad)).rejects.toBeInstanceOf(ZodError);
    }
    await expect(ledger.budget.settle('bad-1', '0.1234567')).rejects.toBeInstanceOf(ZodError);
    await expect(ledger.budget.daySpend('tomorrow')).rejects.toBeInstanceOf(ZodError);
    expect(await countRows(db.pool, 'budget_reservations')).toBe(before);
  });
});
