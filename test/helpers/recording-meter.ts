import type { MetricMeter, MetricTags } from '@temporalio/common';

/**
 * A MetricMeter that keeps the latest value of each series and the name of each metric created,
 * for unit tests of what Warden's metrics record. The real meter serves the same names at
 * /metrics (test/workers/telemetry.test.ts, test/prometheus/alerts-fire.test.ts).
 */
export interface RecordingMeter {
  readonly meter: MetricMeter;
  /** Every metric name created on the meter. */
  readonly names: Set<string>;
  value(name: string, tags?: MetricTags): number | undefined;
}

export function recordingMeter(): RecordingMeter {
  const series = new Map<string, number>();
  const names = new Set<string>();
  const key = (name: string, tags: MetricTags = {}): string => `${name}${JSON.stringify(Object.entries(tags).sort())}`;
  const metric = (name: string, kind: string) => {
    names.add(name);
    return {
      name,
      kind,
      valueType: 'int' as const,
      unit: '',
      description: '',
      add: (value: number, tags?: MetricTags) => series.set(key(name, tags), (series.get(key(name, tags)) ?? 0) + value),
      set: (value: number, tags?: MetricTags) => series.set(key(name, tags), value),
      record: (value: number, tags?: MetricTags) => series.set(key(name, tags), value),
      withTags: () => {
        throw new Error('not used');
      },
    };
  };
  const meter = {
    createCounter: (name: string) => metric(name, 'counter'),
    createUpDownCounter: (name: string) => metric(name, 'up_down_counter'),
    createGauge: (name: string) => metric(name, 'gauge'),
    createHistogram: (name: string) => metric(name, 'histogram'),
    withTags: () => meter,
  } as unknown as MetricMeter;
  return { meter, names, value: (name, tags) => series.get(key(name, tags)) };
}
