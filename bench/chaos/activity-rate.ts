import type { temporal } from '@temporalio/proto';

/**
 * The rate activities started at, from workflow histories: each ActivityTaskStarted event's time
 * (an activity retried is started once in its history, at its last attempt; local activities
 * have none), for comparing with `worker.rateLimits.globalActivitiesPerSecond`.
 */
export function activityStartTimes(events: readonly temporal.api.history.v1.IHistoryEvent[]): number[] {
  return events.flatMap((event) =>
    event.activityTaskStartedEventAttributes && event.eventTime ? [Number(event.eventTime.seconds ?? 0) * 1000 + Math.floor((event.eventTime.nanos ?? 0) / 1_000_000)] : [],
  );
}

/** The most of `times` (ms) inside any window `windowMs` long: the highest rate over a sliding window. */
export function highestInWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let best = 0;
  let first = 0;
  for (let last = 0; last < sorted.length; last++) {
    while (sorted[last]! - sorted[first]! >= windowMs) first++;
    best = Math.max(best, last - first + 1);
  }
  return best;
}
