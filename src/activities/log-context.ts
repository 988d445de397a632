import { AsyncLocalStorage } from 'node:async_hooks';
import type { Logger } from 'pino';

const current = new AsyncLocalStorage<Logger>();

/** Runs `fn` with `logger` as the logger of the activity it belongs to. */
export function withActivityLogger<T>(logger: Logger, fn: () => Promise<T>): Promise<T> {
  return current.run(logger, fn);
}

/**
 * The logger bound to the running activity (intent id, stage, attempt, activity type), or
 * `fallback` outside one. Bound by the worker's activity-context interceptor.
 */
export function activityLogger(fallback: Logger): Logger {
  return current.getStore() ?? fallback;
}
