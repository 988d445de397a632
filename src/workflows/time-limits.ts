import { CancellationScope, condition } from '@temporalio/workflow';

/**
 * Working time, measured with workflow timers. It does not run while the intent waits for a
 * person (a gate or a pause): a limit bounds what the agents and tests do on their own, and a
 * gate has its own timeout. Date.now() is the workflow's clock, so this replays identically.
 */
export class WorkClock {
  constructor(private readonly held: () => boolean) {}

  /** Resolves once `ms` of working time has passed; cancelled with its scope. */
  async elapse(ms: number): Promise<void> {
    let remaining = ms;
    while (remaining > 0) {
      if (this.held()) {
        await condition(() => !this.held());
        continue;
      }
      const start = Date.now();
      // True when a hold began first: stop counting until it ends.
      await condition(() => this.held(), remaining);
      remaining -= Date.now() - start;
    }
  }
}

/** What `withTimeLimit` throws instead of the cancellation once the limit has passed. */
export type TimeLimitFailure = () => Error;

/**
 * Runs `body` in a scope of its own, against a workflow timer of `limitMs` working time: when the
 * timer fires first, the scope is cancelled (its running activity is cancelled, and waited for)
 * and `expired()` is thrown in place of what the body ended with. A cancellation from outside
 * (the intent's stop or its total limit) passes through unchanged.
 */
export function withTimeLimit<T>(clock: WorkClock, limitMs: number, expired: TimeLimitFailure, body: () => Promise<T>): Promise<T> {
  return withWatch(() => clock.elapse(limitMs), expired, body);
}

/**
 * Runs `body` in a scope of its own beside `watch`: when the watch resolves first, the body's
 * scope is cancelled and `expired()` is thrown in place of what the body ended with. The watch is
 * cancelled once the body ends.
 */
export async function withWatch<T>(watch: () => Promise<void>, expired: TimeLimitFailure, body: () => Promise<T>): Promise<T> {
  const bodyScope = new CancellationScope();
  const watchScope = new CancellationScope();
  let fired = false;
  watchScope.run(watch).then(
    () => {
      fired = true;
      bodyScope.cancel();
    },
    () => undefined, // cancelled: the body ended first, or the whole intent is being cancelled
  );
  let result: T;
  try {
    result = await bodyScope.run(body);
  } catch (error) {
    // Whatever the cancelled body ended with (a cancellation, or a failure on its way out), the
    // watch is why it ended.
    if (fired) throw expired();
    throw error;
  } finally {
    watchScope.cancel();
  }
  // The body may also end well once its scope was cancelled (an activity that finished as the
  // cancellation reached it): the limit has passed all the same.
  if (fired) throw expired();
  return result;
}
