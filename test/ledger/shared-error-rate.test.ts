import { SharedErrorRateWindow } from '../../src/ledger/shared-error-rate';
import { SharedLimitStore, sharedLimitKey } from '../../src/ledger/shared-limits';
import { migratedDatabaseForFile } from '../helpers/database';
import { testDatabaseUrl } from '../helpers/env';

/**
 * The shared error window: a judgement before a call (no outcome) reads the row without locking
 * it unless the level moves, and a move of level is still made, and announced, by one worker.
 */

const database = migratedDatabaseForFile(testDatabaseUrl);
const OPTIONS = { windowMs: 60_000, warningRate: 0.1, criticalRate: 0.25, minCalls: 4 };

function windowOf(scope: string): SharedErrorRateWindow {
  return new SharedErrorRateWindow(new SharedLimitStore(database().pool), OPTIONS, scope);
}

const keyOf = (scope: string): string => sharedLimitKey(scope, 'error-rate', 'agent-calls');

async function rowOf(scope: string): Promise<{ level: string; samples: unknown[] } | null | undefined> {
  const { rows } = await database().pool.query<{ state: { level: string; samples: unknown[] } | null }>('SELECT state FROM shared_limits WHERE key = $1', [keyOf(scope)]);
  return rows[0]?.state;
}

/** Runs `fn` while another session holds the window's row locked, as a worker in its locked step does. */
async function whileLocked<T>(scope: string, fn: () => Promise<T>): Promise<T> {
  const holder = await database().pool.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM shared_limits WHERE key = $1 FOR UPDATE', [keyOf(scope)]);
    let timer: NodeJS.Timeout | undefined;
    const stuck = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('the judgement waited for the lock')), 30_000);
    });
    try {
      return await Promise.race([fn(), stuck]);
    } finally {
      clearTimeout(timer);
    }
  } finally {
    await holder.query('ROLLBACK');
    holder.release();
  }
}

test('a judgement that records nothing and moves nothing neither waits for the row nor writes it', async () => {
  const scope = 'read-only';
  const window = windowOf(scope);
  await window.judge({ ok: true });
  const before = await rowOf(scope);
  expect(before?.level).toBe('ok');
  const judged = await whileLocked(scope, () => window.judge());
  expect(judged).toMatchObject({ from: 'ok', to: 'ok', retryAfterMs: 0 });
  expect(await rowOf(scope)).toEqual(before);
});

test('a tripped window refuses from the read alone', async () => {
  const scope = 'tripped';
  const window = windowOf(scope);
  for (let i = 0; i < 4; i++) await window.judge({ ok: false });
  expect((await rowOf(scope))?.level).toBe('trip');
  const judged = await whileLocked(scope, () => window.judge());
  expect(judged.to).toBe('trip');
  expect(judged.from).toBe('trip');
  expect(judged.retryAfterMs).toBeGreaterThan(0);
});

test('a move of level seen by the read is made under the lock, by one of the workers that saw it', async () => {
  const scope = 'moves';
  // Tripped once, its failures now out of the window: the next judgement drops it to ok.
  const old = Date.now() - 10 * 60_000;
  const state = { samples: Array.from({ length: 4 }, (_, i) => ({ at: old + i, ok: false })), level: 'trip' };
  await database().pool.query('INSERT INTO shared_limits (key, state) VALUES ($1, $2)', [keyOf(scope), JSON.stringify(state)]);
  const judgements = await Promise.all([windowOf(scope).judge(), windowOf(scope).judge(), windowOf(scope).judge()]);
  expect(judgements.map((j) => j.to)).toEqual(['ok', 'ok', 'ok']);
  expect(judgements.filter((j) => j.from !== j.to)).toHaveLength(1);
  expect((await rowOf(scope))?.level).toBe('ok');
});
