import type pg from 'pg';
import { inlined, type Statement } from './batched-transaction';

/** The most reads one round trip carries; more go in the next. */
const MOST_PER_TRIP = 50;

interface Queued {
  readonly statement: Statement;
  resolve(result: pg.QueryResult): void;
  reject(error: unknown): void;
}

/** Each pool's reads not yet sent. */
const queues = new WeakMap<pg.Pool, Queued[]>();

/**
 * Runs one read-only statement. Reads asked of the same pool in the same turn of the event loop
 * go to the server together, as one simple query of several statements (each its own snapshot,
 * as separate queries would have): an agent call's admission reads the stop flag, the error window
 * and its circuit in one round trip instead of three. A lone read goes at once, on its own. No
 * read is answered by a round trip that began before it was asked. When the shared round trip
 * fails, each read is sent again alone, so a read fails only for its own reasons.
 *
 * The statement must hold no `$` but its parameters' (see `inlined`).
 */
export function readInTurn<R extends pg.QueryResultRow = pg.QueryResultRow>(pool: pg.Pool, statement: Statement): Promise<pg.QueryResult<R>> {
  return new Promise((resolve, reject) => {
    let queue = queues.get(pool);
    if (!queue) {
      queue = [];
      queues.set(pool, queue);
    }
    queue.push({ statement, resolve: resolve as (result: pg.QueryResult) => void, reject });
    if (queue.length === 1) setImmediate(() => void sendTurn(pool));
  });
}

async function sendTurn(pool: pg.Pool): Promise<void> {
  const queued = queues.get(pool) ?? [];
  queues.delete(pool);
  for (let i = 0; i < queued.length; i += MOST_PER_TRIP) {
    const trip = queued.slice(i, i + MOST_PER_TRIP);
    if (trip.length === 1) {
      await sendAlone(pool, trip[0]!);
      continue;
    }
    let results: pg.QueryResult[];
    try {
      const answered: unknown = await pool.query(trip.map((q) => inlined(q.statement)).join(';\n'));
      results = answered as pg.QueryResult[];
    } catch {
      for (const read of trip) await sendAlone(pool, read);
      continue;
    }
    trip.forEach((read, n) => read.resolve(results[n]!));
  }
}

async function sendAlone(pool: pg.Pool, read: Queued): Promise<void> {
  try {
    read.resolve(await pool.query(read.statement.text, read.statement.values as unknown[] | undefined));
  } catch (error) {
    read.reject(error);
  }
}
