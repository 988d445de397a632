import pg from 'pg';
import { countRoundTrips } from '../../bench/round-trips';
import { inBatchedTransaction, inlined, type Literal } from '../../src/ledger/batched-transaction';
import { readInTurn } from '../../src/ledger/read-turn';
import { Ledger } from '../../src/ledger/ledger';
import { sharedLimitKey, SharedLimitStore } from '../../src/ledger/shared-limits';
import type { FreshDatabase } from '../helpers/database';
import { describeOnBackends } from '../helpers/database';
import { migratedLedger } from './fixtures';

/*
 * The ledger work around every paid call, counted in round trips on a real PostgreSQL: the
 * reservation before it, the settlement after it, and each step on a shared limit (rate bucket,
 * circuit, error window) the safety layers take. Each is one transaction; BEGIN travels with its
 * first statements and COMMIT with its last.
 */
describeOnBackends('ledger round trips on the %s PostgreSQL', (baseUrl) => {
  let db: FreshDatabase;
  let pool: pg.Pool;
  let ledger: Ledger;
  let roundTrips: () => number;
  beforeAll(async () => {
    ({ db } = await migratedLedger(baseUrl));
    // A pool of its own, counted from its first client on.
    pool = new pg.Pool({ connectionString: db.url, max: 2 });
    roundTrips = countRoundTrips(pool);
    ledger = new Ledger(pool);
  });
  afterAll(async () => {
    await pool?.end();
    await db?.drop();
  });

  async function counted<T>(fn: () => Promise<T>): Promise<{ result: T; trips: number }> {
    const before = roundTrips();
    const result = await fn();
    return { result, trips: roundTrips() - before };
  }

  const reservation = (id: string) => ({
    id,
    day: '2031-02-03',
    intentId: `intent-${id}`,
    amountUsd: '0.50',
    limitUsd: '10.00',
    agentId: 'agent-a',
    agentLimitUsd: '5.00',
    intentLimitUsd: '2.00',
    stage: 'impl',
    stageLimitUsd: '1.00',
    activity: { workflowId: `wf-${id}`, runId: 'run-1', activityId: '7', attempt: 1 },
  });

  test('a reservation is two round trips, granted, denied or repeated', async () => {
    const granted = await counted(() => ledger.budget.reserve(reservation('r-1')));
    expect(granted.result).toMatchObject({ granted: true, amountUsd: '0.500000' });
    expect(granted.trips).toBe(2);

    const repeated = await counted(() => ledger.budget.reserve(reservation('r-1')));
    expect(repeated.result).toEqual(granted.result);
    expect(repeated.trips).toBe(2);

    const denied = await counted(() => ledger.budget.reserve({ ...reservation('r-2'), intentId: 'intent-r-1', amountUsd: '0.60' }));
    expect(denied.result).toMatchObject({ granted: false, deniedBy: 'stage', committedUsd: '0.500000', limitUsd: '1.000000' });
    expect(denied.trips).toBe(2);
  });

  test('a settlement with its cost row and the spend it leaves is three round trips; a repeat is two and writes nothing', async () => {
    await ledger.budget.reserve(reservation('s-1'));
    const call = { timestamp: new Date(), intentId: 'intent-s-1', stage: 'impl', attempt: 1, agentId: 'agent-a', modelId: 'model-a', inputTokens: 10, outputTokens: 5 };
    // The budgets' spend, read for the warnings near a limit, comes with the settlement's COMMIT.
    const spendOf = { day: '2031-02-03', agentId: 'agent-a', intentId: 'intent-s-1', stage: 'impl' };
    const settled = await counted(() => ledger.budget.settle('s-1', '0.25', { call, spendOf }));
    expect(settled).toEqual({ result: { day: expect.any(String), agent: expect.any(String), intent: '0.250000', stage: '0.250000' }, trips: 3 });
    const repeat = await counted(() => ledger.budget.settle('s-1', '0.25', { call }));
    expect(repeat).toEqual({ result: undefined, trips: 2 });
    const books = await ledger.budget.books({ intentId: 'intent-s-1' });
    expect(books).toEqual([{ intentId: 'intent-s-1', budgetUsd: '0.250000', costEventsUsd: '0.250000', openReservations: 0 }]);
    // A different amount is refused, and the refusal leaves the settlement as it was.
    await expect(ledger.budget.settle('s-1', '0.30', { call })).rejects.toThrow('already settled at $0.250000');
    // More than was reserved is refused unless the call could not be bounded (an overrun).
    await ledger.budget.reserve(reservation('s-2'));
    await expect(ledger.budget.settle('s-2', '0.70')).rejects.toThrow('only $0.500000 was reserved');
    expect((await pool.query(`SELECT count(*)::int AS n FROM budget_settlements WHERE reservation_id = 's-2'`)).rows[0].n).toBe(0);
    await ledger.budget.settle('s-2', '0.70', { overrun: true });
    expect((await pool.query(`SELECT overrun, actual_usd::text AS usd FROM budget_settlements WHERE reservation_id = 's-2'`)).rows).toEqual([{ overrun: true, usd: '0.700000' }]);
  });

  test('a step on shared limits is two round trips, with a write or without', async () => {
    const store = new SharedLimitStore(pool);
    const keys = [sharedLimitKey('queue', 'rate', "agent 'o\\brien'"), sharedLimitKey('queue', 'circuit', 'endpoint')];
    const written = await counted(() => store.update(keys, (states) => ({ result: states.size, write: new Map([[keys[0]!, { tokens: 3, note: "it's \\ fine" }]]) })));
    expect(written).toEqual({ result: 0, trips: 2 });
    const readOnly = await counted(() => store.update(keys, (states) => ({ result: Object.fromEntries(states) })));
    expect(readOnly).toEqual({ result: { [keys[0]!]: { tokens: 3, note: "it's \\ fine" } }, trips: 2 });
  });

  test('steps asked for in the same turn share one transaction, in order, and a step that throws fails alone', async () => {
    const store = new SharedLimitStore(pool);
    const [a, b, c] = ['a', 'b', 'c'].map((name) => sharedLimitKey('turn', 'rate', name)) as [string, string, string];
    const count = (key: string) => (states: ReadonlyMap<string, unknown>) => {
      const n = ((states.get(key) as { n?: number } | undefined)?.n ?? 0) + 1;
      return { result: n, write: new Map([[key, { n }]]) };
    };
    const together = await counted(() =>
      Promise.all([
        store.update([a], count(a)),
        store.update([b, a], count(a)),
        store.update([c], () => {
          throw new Error('no such step');
        }).catch((error: unknown) => (error as Error).message),
        store.update([b], count(b)),
      ]),
    );
    // The second saw the first's write: the same as one after the other.
    expect(together).toEqual({ result: [1, 2, 'no such step', 1], trips: 2 });
    const states = await store.read([a, b, c]);
    expect(Object.fromEntries(states.states)).toEqual({ [a]: { n: 2 }, [b]: { n: 1 } });

    // A step in a later turn goes in a transaction of its own.
    const later = await counted(async () => [await store.update([a], count(a)), await store.update([a], count(a))]);
    expect(later).toEqual({ result: [3, 4], trips: 4 });
  });

  test('when the shared transaction fails, each of its steps is tried on its own', async () => {
    const store = new SharedLimitStore(pool);
    const key = sharedLimitKey('turn', 'rate', 'retried');
    // A state PostgreSQL cannot store as jsonb fails the whole transaction's write; the other step then goes alone.
    const [bad, good] = await Promise.allSettled([
      store.update([key], () => ({ result: 'bad', write: new Map([[key, { text: 'nul \u0000 inside' }]]) })),
      store.update([sharedLimitKey('turn', 'rate', 'fine')], () => ({ result: 'good', write: new Map([[sharedLimitKey('turn', 'rate', 'fine'), { n: 1 }]]) })),
    ]);
    expect(bad.status).toBe('rejected');
    expect(good).toEqual({ status: 'fulfilled', value: 'good' });
    expect((await store.read([sharedLimitKey('turn', 'rate', 'fine')])).states.get(sharedLimitKey('turn', 'rate', 'fine'))).toEqual({ n: 1 });
  });

  test('reads asked in the same turn share a round trip, each with its own result; a read that fails fails alone', async () => {
    const read = (text: string, values?: Literal[]) => readInTurn<{ v: unknown }>(pool, { text, values });
    const together = await counted(() =>
      Promise.all([
        read('SELECT $1::int + 1 AS v', [41]),
        read("SELECT $1::text AS v", ["it's"]),
        read('SELECT * FROM no_such_table').catch((error: unknown) => (error as Error).message),
        read('SELECT $1::jsonb AS v', [JSON.stringify({ a: [1, 'b'] })]),
      ]),
    );
    // One round trip for the four; it fails on the missing table, so the four go again one by one.
    expect(together.result.map((r) => (typeof r === 'string' ? r : r.rows[0]!.v))).toEqual([42, "it's", 'relation "no_such_table" does not exist', { a: [1, 'b'] }]);
    expect(together.trips).toBe(5);
    const fine = await counted(() => Promise.all([read('SELECT 1 AS v'), read('SELECT 2 AS v'), read('SELECT 3 AS v')]));
    expect(fine.result.map((r) => r.rows[0]!.v)).toEqual([1, 2, 3]);
    expect(fine.trips).toBe(1);
    // Reads in later turns go on their own.
    const apart = await counted(async () => [await read('SELECT 1 AS v'), await read('SELECT 2 AS v')]);
    expect(apart.trips).toBe(2);
  });

  test('activity runs recorded at the same time share a round trip; each says whether it was new', async () => {
    const run = (activityId: string) => ({
      workflowId: 'wf-runs', runId: 'run-1', activityId, attempt: 1, activityType: 'runTests', taskQueue: 'q',
      startedAt: new Date('2031-02-03T04:05:06.007Z'), endedAt: new Date('2031-02-03T04:05:07.500Z'), outcome: 'completed' as const,
    });
    const recorded = await counted(() =>
      Promise.all([
        ledger.activityRuns.record(run('1')),
        ledger.activityRuns.record(run('2')),
        ledger.activityRuns.record({ ...run('3'), stage: 'impl', spendUsd: '0.012', agentId: "o'brien" }),
        ledger.activityRuns.record(run('2')),
      ]),
    );
    // The first goes alone at once; the three made meanwhile go together.
    expect(recorded).toEqual({ result: [true, true, true, false], trips: 2 });
    const rows = await ledger.activityRuns.ofWorkflow('wf-runs');
    expect(rows.map((r) => [r.activityId, r.durationMs, r.spendUsd, r.agentId, r.startedAt.toISOString()])).toEqual([
      ['1', 1493, undefined, undefined, '2031-02-03T04:05:06.007Z'],
      ['2', 1493, undefined, undefined, '2031-02-03T04:05:06.007Z'],
      ['3', 1493, '0.012000', "o'brien", '2031-02-03T04:05:06.007Z'],
    ]);
    expect(await ledger.activityRuns.record(run('1'))).toBe(false);
  });

  test('stop-flag reads made at the same time share a round trip, and each sees the flag as it was when it asked', async () => {
    const reads = await counted(() => Promise.all([ledger.globalStop.current(), ledger.globalStop.current(), ledger.globalStop.current()]));
    expect(reads).toEqual({ result: [{ stopped: false }, { stopped: false }, { stopped: false }], trips: 2 });
    await ledger.globalStop.set('tester', 'checking the reads');
    expect(await ledger.globalStop.current()).toMatchObject({ stopped: true, by: 'tester' });
    await ledger.globalStop.clear('tester', 'done');
    expect(await ledger.globalStop.current()).toMatchObject({ stopped: false });
  });

  test('a batched transaction commits all of its statements or none', async () => {
    await pool.query('CREATE TABLE batch_probe (id int PRIMARY KEY, note text)');
    // The commit's own statement fails: what the opening statements wrote is rolled back.
    await expect(
      inBatchedTransaction(pool, async (tx) => {
        await tx.open([{ text: 'INSERT INTO batch_probe VALUES ($1, $2)', values: [1, 'first'] }]);
        await tx.commit([{ text: 'INSERT INTO batch_probe VALUES ($1, $2)', values: [1, 'again'] }]);
      }),
    ).rejects.toThrow('duplicate key');
    // A throw between the batches rolls back too; the pool's clients stay usable.
    await expect(
      inBatchedTransaction(pool, async (tx) => {
        await tx.open([{ text: 'INSERT INTO batch_probe VALUES ($1, $2)', values: [2, 'second'] }]);
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    expect((await pool.query('SELECT count(*)::int AS n FROM batch_probe')).rows[0].n).toBe(0);
    // Returning without a commit commits.
    await inBatchedTransaction(pool, async (tx) => {
      await tx.open([{ text: 'INSERT INTO batch_probe VALUES ($1, $2)', values: [3, 'third'] }]);
    });
    expect((await pool.query('SELECT id, note FROM batch_probe')).rows).toEqual([{ id: 3, note: 'third' }]);
  });

  test('inlined parameters reach the server as the values they were', async () => {
    const values = ["o'brien \\ E'x' $1 ;", 12.5, true, null, new Date('2031-02-03T04:05:06.789Z'), undefined];
    const text = 'SELECT $1::text AS s, $2::numeric::text AS n, $3::boolean AS b, $4::text AS nothing, $5::timestamptz AS at, $6::int AS missing';
    const { rows } = await pool.query(inlined({ text, values }));
    expect(rows).toEqual([{ s: values[0], n: '12.5', b: true, nothing: null, at: values[4], missing: null }]);
    expect(() => inlined({ text: 'SELECT $2', values: [1] })).toThrow('refers to $2');
  });
});
