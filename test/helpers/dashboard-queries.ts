/** Reading the Grafana dashboard's queries (deploy/grafana/warden.json) and the metrics they name. */

export interface Panel {
  readonly title: string;
  readonly targets?: ReadonlyArray<{ readonly expr: string }>;
  readonly panels?: readonly Panel[];
}

/** Every query of the dashboard, rows' panels included. */
export function dashboardQueries(dashboard: { panels: readonly Panel[] }): Array<{ panel: string; expr: string }> {
  const walk = (panels: readonly Panel[]): Array<{ panel: string; expr: string }> =>
    panels.flatMap((p) => [...(p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })), ...walk(p.panels ?? [])]);
  return walk(dashboard.panels);
}

/** The metric names a PromQL expression reads (label values and function names are not metric names). */
export function metricNames(expr: string): string[] {
  const withoutStrings = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  return [...withoutStrings.matchAll(/\b(warden_[a-z0-9_]+|temporal_[a-z0-9_]+|ALERTS\w*|up)\b(?!\s*\()/g)].map((m) => m[1]!);
}
