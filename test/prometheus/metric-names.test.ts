import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { createWardenMetrics } from '../../src/workers/metrics';
import { dashboardQueries, metricNames, type Panel } from '../helpers/dashboard-queries';
import { recordingMeter } from '../helpers/recording-meter';

/**
 * Grafana is not packaged here, so the dashboard is checked for what it can get wrong without
 * one: every metric its queries (and the alerting rules) name is one Warden's worker exports.
 * Whether Prometheus accepts each query is checked against a real one in alerts-fire.test.ts.
 */

const ROOT = path.resolve(__dirname, '../..');
const DASHBOARD = path.join(ROOT, 'deploy/grafana/warden.json');
const RULES = path.join(ROOT, 'deploy/prometheus/warden-alerts.yml');
/** Series Prometheus makes itself. */
const PROMETHEUS_OWN = new Set(['ALERTS', 'ALERTS_FOR_STATE', 'up']);

function exported(): Set<string> {
  const { meter, names } = recordingMeter();
  createWardenMetrics(meter);
  return names;
}

test('every metric the dashboard queries is one Warden exports (or Prometheus makes)', () => {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: Panel[]; templating: { list: Array<{ name: string; type: string }> } };
  const queries = dashboardQueries(dashboard);
  expect(queries.length).toBeGreaterThan(10);
  const known = exported();
  const unknown = queries.flatMap(({ panel, expr }) => metricNames(expr).filter((name) => !known.has(name) && !PROMETHEUS_OWN.has(name)).map((name) => `${panel}: ${name}`));
  expect(unknown).toEqual([]);
  // every metric Warden exports is on the dashboard somewhere
  const used = new Set(queries.flatMap(({ expr }) => metricNames(expr)));
  expect([...known].filter((name) => !used.has(name))).toEqual([]);
  // importable as it is: the Prometheus data source is chosen at import, not named here
  expect(dashboard.templating.list).toContainEqual(expect.objectContaining({ name: 'datasource', type: 'datasource' }));
  expect(JSON.stringify(dashboard.panels).match(/"uid":\s*"([^"]+)"/g)?.every((uid) => uid.includes('${datasource}'))).toBe(true);
});

test('every metric the alerting rules read is one Warden exports', () => {
  const rules = parse(readFileSync(RULES, 'utf8')) as { groups: Array<{ rules: Array<{ alert: string; expr: string }> }> };
  const names = new Set(rules.groups.flatMap((g) => g.rules.flatMap((r) => metricNames(r.expr))));
  expect(names.size).toBeGreaterThanOrEqual(5);
  const known = exported();
  expect([...names].filter((name) => !known.has(name))).toEqual([]);
});

test('a name is found in a query, but not in a label value or a function', () => {
  expect(metricNames('sum by (model) (increase(warden_spend_usd_micros{model="warden_x"}[1h])) / 1e6')).toEqual(['warden_spend_usd_micros']);
  expect(metricNames('count(ALERTS{alertname=~"Warden.*"}) or vector(0)')).toEqual(['ALERTS']);
});
