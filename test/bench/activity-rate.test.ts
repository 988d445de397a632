import Long from 'long';
import { activityStartTimes, highestInWindow } from '../../bench/chaos/activity-rate';

describe('the highest activity-start rate over a sliding second', () => {
  test('counts the starts inside the busiest window, wherever it begins', () => {
    expect(highestInWindow([], 1_000)).toBe(0);
    expect(highestInWindow([5], 1_000)).toBe(1);
    // Two seconds of two starts each, but three fall within one second across their boundary.
    expect(highestInWindow([0, 100, 1_500, 1_900], 1_000)).toBe(2);
    expect(highestInWindow([0, 600, 900, 1_300, 2_400], 1_000)).toBe(3);
    // A window is half-open: starts exactly a second apart are in different windows.
    expect(highestInWindow([0, 1_000, 2_000], 1_000)).toBe(1);
    // Order does not matter.
    expect(highestInWindow([1_300, 0, 900, 600], 1_000)).toBe(3);
  });

  test("reads the ActivityTaskStarted events' times, and nothing else", () => {
    const at = (ms: number) => ({ seconds: Long.fromNumber(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 });
    expect(
      activityStartTimes([
        { eventTime: at(1_000), activityTaskScheduledEventAttributes: {} },
        { eventTime: at(1_250), activityTaskStartedEventAttributes: {} },
        { eventTime: at(2_999), activityTaskStartedEventAttributes: {} },
        { eventTime: at(3_000), markerRecordedEventAttributes: {} },
      ]),
    ).toEqual([1_250, 2_999]);
  });
});
