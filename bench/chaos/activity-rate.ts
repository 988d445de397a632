import type { temporal } from '@temporalio/proto';

/**
 * The rate activities started at, from workflow histories, for comparing with
 * `worker.rateLimits.globalActivitiesPerSecond` (Temporal's limit of each task queue).
 */

/** An activity's start: its ActivityTaskStarted event's time (ms) and the task queue it was scheduled on. */
export interface ActivityStart {
  readonly at: number;
  readonly queue: string;
}

/**
 * Every activity start in one history. An activity retried is started once in its history (at its
 * last attempt); local activities have none.
 */
export function activityStarts(events: readonly temporal.api.history.v1.IHistoryEvent[]): ActivityStart[] {
  const queueOf = new Map<number, string>();
  const starts: ActivityStart[] = [];
  for (const event of events) {
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled) queueOf.set(Number(event.eventId), scheduled.taskQueue?.name ?? '');
    const started = event.activityTaskStartedEventAttributes;
    if (started && event.eventTime) {
      starts.push({ at: Number(event.eventTime.seconds ?? 0) * 1000 + Math.floor((event.eventTime.nanos ?? 0) / 1_000_000), queue: queueOf.get(Number(started.scheduledEventId)) ?? '' });
    }
  }
  return starts;
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

/** The highest rate over a sliding second: across all queues, and of each queue. */
export function highestRates(starts: readonly ActivityStart[]): { readonly all: number; readonly byQueue: Readonly<Record<string, number>> } {
  const queues = [...new Set(starts.map((s) => s.queue))].sort();
  return {
    all: highestInWindow(starts.map((s) => s.at), 1_000),
    byQueue: Object.fromEntries(queues.map((queue) => [queue, highestInWindow(starts.filter((s) => s.queue === queue).map((s) => s.at), 1_000)])),
  };
}
