import Long from 'long';
import { activityStarts, highestInWindow, highestRates } from '../../bench/chaos/activity-rate';

describe('the highest activity-start rate over a sliding second', () => {
  test('counts the starts inside the busiest window, wherever it begins', () => {
    expect(highestInWindow([], 1_000)).toBe(0);
    expect(highestInWindow([5], 1_000)).toBe(1);
    // Two seconds of two starts each, and never three within one second.
    expect(highestInWindow([0, 100, 1_500, 1_900], 1_000)).toBe(2);
    // Three within one second across a whole second's boundary.
    expect(highestInWindow([0, 600, 900, 1_300, 2_400], 1_000)).toBe(3);
    // A window is half-open: starts exactly a second apart are in different windows.
    expect(highestInWindow([0, 1_000, 2_000], 1_000)).toBe(1);
    // Order does not matter.
    expect(highestInWindow([1_300, 0, 900, 600], 1_000)).toBe(3);
  });

  test("reads the ActivityTaskStarted events' times and their activities' task queues, and nothing else", () => {
    const at = (ms: number) => ({ seconds: Long.fromNumber(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 });
    const starts = activityStarts([
      { eventId: Long.fromNumber(5), eventTime: at(1_000), activityTaskScheduledEventAttributes: { taskQueue: { name: 'warden' } } },
      { eventId: Long.fromNumber(6), eventTime: at(1_100), activityTaskScheduledEventAttributes: { taskQueue: { name: 'warden@a' } } },
      { eventId: Long.fromNumber(7), eventTime: at(1_250), activityTaskStartedEventAttributes: { scheduledEventId: Long.fromNumber(6) } },
      { eventId: Long.fromNumber(8), eventTime: at(2_999), activityTaskStartedEventAttributes: { scheduledEventId: Long.fromNumber(5) } },
      { eventId: Long.fromNumber(9), eventTime: at(3_000), markerRecordedEventAttributes: {} },
    ]);
    expect(starts).toEqual([
      { at: 1_250, queue: 'warden@a' },
      { at: 2_999, queue: 'warden' },
    ]);
  });

  test('of all queues together and of each', () => {
    const rates = highestRates([
      { at: 0, queue: 'warden' },
      { at: 100, queue: 'warden@a' },
      { at: 200, queue: 'warden@a' },
      { at: 5_000, queue: 'warden' },
    ]);
    expect(rates).toEqual({ all: 3, byQueue: { warden: 1, 'warden@a': 2 } });
  });
});
