import type pg from 'pg';
import { inBatchedTransaction } from './batched-transaction';
import { readInTurn } from './read-turn';

/**
 * The state of limits that every worker shares (rate buckets, circuits, error windows): one
 * `shared_limits` row per limit key, holding the plain-data state of a pure class from
 * src/safety. Callers restore the class from the state, apply one step at the time this store
 * gives them, and hand the new state back; this module is the only one that knows the SQL.
 *
 * Times are the database's (`clock_timestamp()`), never a worker's: workers whose clocks disagree
 * still refill the same bucket and cool down the same circuit at the same moment.
 */

/** A store and the scope its rows belong to: what a gateway or a worker needs to share its limits. */
export interface SharedLimits {
  readonly store: SharedLimitStore;
  readonly scope: string;
}

/** What `apply` returns: its answer, and the new states of the keys it changed (others are left as they are). */
export interface SharedStep<R> {
  readonly result: R;
  readonly write?: ReadonlyMap<string, unknown>;
}

/**
 * A row's key: the limit's kind and name within a scope. The scope is the fleet that shares the
 * limit (Warden uses the task queue: the workers that serve it together); kinds keep a bucket, a
 * circuit and a window of the same name apart.
 */
export function sharedLimitKey(scope: string, kind: 'rate' | 'circuit' | 'error-rate', name: string): string {
  return JSON.stringify([scope, kind, name]);
}

/** The database's time in whole ms since the epoch, as a number. */
const NOW_MS = 'floor(extract(epoch FROM clock_timestamp()) * 1000)::float8';

export class SharedLimitStore {
  constructor(private readonly pool: pg.Pool) {}

  /** The states of `keys` (absent: never written) and the database's time, without locking anything. */
  async read(keys: readonly string[]): Promise<{ readonly now: number; readonly states: ReadonlyMap<string, unknown> }> {
    // Read in the turn's round trip (see readInTurn): an agent call's admission reads its circuit,
    // the error window and the stop flag together.
    const { rows } = await readInTurn<{ now: number; states: Record<string, unknown> }>(this.pool, {
      text: `SELECT ${NOW_MS} AS now,
                    (SELECT coalesce(jsonb_object_agg(key, state), '{}'::jsonb) FROM shared_limits
                      WHERE key IN (SELECT jsonb_array_elements_text($1::jsonb)) AND state IS NOT NULL) AS states`,
      values: [JSON.stringify(keys)],
    });
    const row = rows[0]!;
    return { now: row.now, states: new Map(Object.entries(row.states)) };
  }

  /** Steps asked for in this turn of the event loop, not yet sent: they go together (see `update`). */
  private queued: Array<QueuedStep<unknown>> = [];

  /**
   * One atomic step on the rows of `keys`: in one transaction, locks them (creating the missing
   * ones), hands their states and the database's time to `apply`, writes what it returns, commits.
   * Two workers stepping on the same key take turns; keys are locked in sorted order, so steps on
   * overlapping sets of keys cannot deadlock. `apply` runs once and must not do I/O.
   *
   * Steps asked for in the same turn of the event loop (an agent call's outcome counted in its
   * circuit and in the error window, say) go in one transaction: the union of their keys locked,
   * each `apply` in the order asked, each seeing the states the ones before it left. That is what
   * the same steps one after the other with nobody between would do, in two round trips instead
   * of two each. An `apply` that throws fails its own step only; if the shared transaction fails,
   * each of its steps is tried again on its own, so a step fails only for its own reasons.
   */
  update<R>(keys: readonly string[], apply: (states: ReadonlyMap<string, unknown>, now: number) => SharedStep<R>): Promise<R> {
    const sorted = [...new Set(keys)].sort();
    if (sorted.length === 0) return Promise.reject(new RangeError('a shared step needs at least one key'));
    return new Promise<R>((resolve, reject) => {
      this.queued.push({ keys: sorted, apply, resolve, reject } as QueuedStep<unknown>);
      if (this.queued.length === 1) setImmediate(() => void this.sendQueued());
    });
  }

  private async sendQueued(): Promise<void> {
    const steps = this.queued;
    this.queued = [];
    let outcomes: Array<StepOutcome<unknown>>;
    try {
      outcomes = await this.stepTogether(steps);
    } catch (error) {
      if (steps.length === 1) {
        steps[0]!.reject(error);
        return;
      }
      for (const step of steps) {
        try {
          settle(step, (await this.stepTogether([step]))[0]!);
        } catch (alone) {
          step.reject(alone);
        }
      }
      return;
    }
    steps.forEach((step, i) => settle(step, outcomes[i]!));
  }

  private stepTogether(steps: ReadonlyArray<QueuedStep<unknown>>): Promise<Array<StepOutcome<unknown>>> {
    const sorted = [...new Set(steps.flatMap((s) => s.keys))].sort();
    // A limit's state is not a ledger record: losing its last instants to a database crash lets
    // a few calls too many through once, while waiting for the WAL flush at every step would
    // double what a call pays. BEGIN goes with the lock and COMMIT with the write: two round trips.
    return inBatchedTransaction(
      this.pool,
      async (tx) => {
        // The no-op DO UPDATE is what locks an existing row; the time is read once every lock is held.
        const [locked] = await tx.open([
          {
            text: `INSERT INTO shared_limits (key)
                     SELECT key FROM jsonb_array_elements_text($1::jsonb) WITH ORDINALITY AS k(key, n) ORDER BY n
                   ON CONFLICT (key) DO UPDATE SET state = shared_limits.state
                   RETURNING key, state, ${NOW_MS} AS now`,
            values: [JSON.stringify(sorted)],
          },
        ]);
        const rows = locked!.rows as Array<{ key: string; state: unknown; now: number }>;
        const now = Math.max(...rows.map((r) => r.now));
        const states = new Map(rows.filter((r) => r.state !== null).map((r) => [r.key, r.state]));
        const written = new Map<string, unknown>();
        const outcomes = steps.map((step): StepOutcome<unknown> => {
          try {
            const { result, write } = step.apply(new Map(step.keys.flatMap((k) => (states.has(k) ? [[k, states.get(k)]] : []))), now);
            for (const [key, state] of write ?? []) {
              states.set(key, state);
              written.set(key, state);
            }
            return { ok: true, result };
          } catch (error) {
            return { ok: false, error };
          }
        });
        await tx.commit(
          written.size > 0
            ? [
                {
                  text: `UPDATE shared_limits AS s SET state = v.state, updated_at = clock_timestamp()
                           FROM jsonb_each($1::jsonb) AS v(key, state) WHERE s.key = v.key`,
                  values: [JSON.stringify(Object.fromEntries(written))],
                },
              ]
            : [],
        );
        return outcomes;
      },
      { synchronousCommit: false },
    );
  }
}

interface QueuedStep<R> {
  readonly keys: readonly string[];
  readonly apply: (states: ReadonlyMap<string, unknown>, now: number) => SharedStep<R>;
  resolve(result: R): void;
  reject(error: unknown): void;
}

type StepOutcome<R> = { readonly ok: true; readonly result: R } | { readonly ok: false; readonly error: unknown };

function settle<R>(step: QueuedStep<R>, outcome: StepOutcome<R>): void {
  if (outcome.ok) step.resolve(outcome.result);
  else step.reject(outcome.error);
}
