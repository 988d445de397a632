import type pg from 'pg';
import { compareUsd } from '../shared/money';
import { LADDER_DECIDER_PREFIX } from '../shared/ladder';
import { SEVERITIES, type SafetyEventType, type Severity } from '../shared/safety-events';
import { DaySchema, UsdSchema, type DailyReport } from './types';

/** Safety events the daily report counts as anomalies. */
const ANOMALY_EVENT_TYPES = [
  'ANOMALY_DETECTED',
  'CASCADE_DETECTED',
  'STAGNATION_DETECTED',
  'SANDBOX_ESCAPE_ATTEMPTED',
  'ESCAPE_ATTEMPTED',
  'SECRET_IN_CHANGE',
  'MODE_VIOLATION',
] as const satisfies readonly SafetyEventType[];

/** Safety events that end an intent. */
const INTENT_ENDINGS = ['INTENT_MERGED', 'INTENT_REJECTED', 'INTENT_FAILED', 'INTENT_CANCELLED'] as const satisfies readonly SafetyEventType[];

/** The daily report's health rule, in words. */
const HEALTH_RULE =
  'RED if an anomaly is critical, an emergency stop was set, or spend went over the day budget (0 = no limit); ' +
  'YELLOW if an anomaly is high, a gate timed out, a state snapshot is missing, or spend reached 80% of the day budget; GREEN otherwise';

/**
 * The daily health report for a UTC day, one section per safety layer:
 * - limits: iterations = agent calls (cost events); spend = their sum; the day budget, if given
 *   (`0` = no limit, as the worker treats `worker.dayBudgetUsd`).
 * - thresholds: auto-executed = gates the automation ladder passed (decided_by `warden-ladder-L<n>`);
 *   escalated = gates handed to a person (GATE_REQUESTED); timed out = GATE_ESCALATED events;
 *   average confidence = mean of the day's RISK_ASSESSED confidences.
 * - history: commits = STAGE_COMPLETED + INTENT_MERGED events (Warden commits per stage); ROLLBACK
 *   events; snapshots = whether each intent that ended that day, having finished a stage, recorded
 *   where its lineage was kept (what the ledger holds; the disk is not looked at).
 * - humanOverride: GLOBAL_STOP_SET events; INTENT_STOPPED + OVERRIDE events + gates decided by a
 *   person (not the ladder, not a timeout); decision queue = gates requested by the end of the day
 *   and neither decided nor ended with their intent by then.
 * - anomalies: ANOMALY_EVENT_TYPES events by severity; patterns = metadata.pattern, else the type.
 * Health follows HEALTH_RULE; `rule` states it and what tripped it.
 */
export async function dailyReport(pool: pg.Pool, opts: { date: string; dayBudgetUsd?: string }): Promise<DailyReport> {
  const date = DaySchema.parse(opts.date);
  const budget = UsdSchema.optional().parse(opts.dayBudgetUsd);
  const unlimited = budget !== undefined && compareUsd(budget, '0') === 0;
  const limit = budget !== undefined && !unlimited ? budget : null;
  const day = `"timestamp" >= ($1::date)::timestamp AT TIME ZONE 'UTC' AND "timestamp" < ($1::date + 1)::timestamp AT TIME ZONE 'UTC'`;
  const decidedInDay = day.replaceAll('"timestamp"', 'decided_at');
  const endOfDay = `($1::date + 1)::timestamp AT TIME ZONE 'UTC'`;

  const [spend, events, patterns, gates, queue, confidence, endings] = await Promise.all([
    pool.query<{ calls: number; spend: string; remaining: string | null; pct: string | null; over: boolean | null; near: boolean | null }>(
      `WITH s AS (SELECT count(*)::int AS calls, round(coalesce(sum(usd), 0), 6) AS spend FROM cost_events WHERE ${day})
       SELECT calls, spend::text AS spend,
              round($2::numeric - spend, 6)::text AS remaining,
              round(($2::numeric - spend) * 100 / $2::numeric, 1)::text AS pct,
              spend > $2::numeric AS over, spend > 0 AND spend >= $2::numeric * 0.8 AS near
         FROM s`,
      [date, limit],
    ),
    pool.query<{ event_type: SafetyEventType; severity: Severity; n: number }>(
      `SELECT event_type, severity, count(*)::int AS n FROM safety_events WHERE ${day} GROUP BY 1, 2`,
      [date],
    ),
    pool.query<{ pattern: string }>(
      `SELECT pattern FROM (
         SELECT DISTINCT coalesce(metadata->>'pattern', event_type) AS pattern FROM safety_events
          WHERE ${day} AND event_type = ANY($2::text[])
       ) AS p ORDER BY pattern COLLATE "C"`,
      [date, [...ANOMALY_EVENT_TYPES]],
    ),
    // The gate keeper writes `warden-ladder-L<n>` for the ladder's passes and flags timeouts;
    // every other decider is a person.
    pool.query<{ auto: number; human: number }>(
      `SELECT count(*) FILTER (WHERE NOT timed_out AND left(decided_by, length($2)) = $2)::int AS auto,
              count(*) FILTER (WHERE NOT timed_out AND left(decided_by, length($2)) <> $2)::int AS human
         FROM gate_decisions WHERE ${decidedInDay}`,
      [date, LADDER_DECIDER_PREFIX],
    ),
    pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM safety_events q
        WHERE q.event_type = 'GATE_REQUESTED' AND q."timestamp" < ${endOfDay}
          AND NOT EXISTS (SELECT 1 FROM gate_decisions d
                           WHERE d.intent_id = q.intent_id AND d.gate = coalesce(q.metadata->>'gate', q.stage)
                             AND d.decided_at >= q."timestamp" AND d.decided_at < ${endOfDay})
          AND NOT EXISTS (SELECT 1 FROM safety_events e
                           WHERE e.intent_id = q.intent_id
                             AND e.event_type IN ('INTENT_MERGED', 'INTENT_REJECTED', 'INTENT_FAILED', 'INTENT_CANCELLED', 'INTENT_STOPPED')
                             AND e."timestamp" >= q."timestamp" AND e."timestamp" < ${endOfDay})`,
      [date],
    ),
    pool.query<{ n: number; pct: string | null }>(
      `SELECT count(*)::int AS n, round(avg((metadata->>'confidence')::numeric) * 100, 1)::text AS pct
         FROM safety_events
        WHERE ${day} AND event_type = 'RISK_ASSESSED' AND jsonb_typeof(metadata->'confidence') = 'number'`,
      [date],
    ),
    // The last ending of each intent that day (a resumed intent may end more than once).
    pool.query<{ intent_id: string; kept: boolean; worked: boolean }>(
      `SELECT DISTINCT ON (e.intent_id) e.intent_id,
              coalesce(e.metadata->>'lineagePath', '') <> '' AS kept,
              EXISTS (SELECT 1 FROM safety_events s WHERE s.intent_id = e.intent_id AND s.event_type = 'STAGE_COMPLETED') AS worked
         FROM safety_events e
        WHERE ${day} AND e.event_type = ANY($2::text[]) AND e.intent_id IS NOT NULL
        ORDER BY e.intent_id, e."timestamp" DESC`,
      [date, [...INTENT_ENDINGS]],
    ),
  ]);

  const count = (...types: SafetyEventType[]): number =>
    events.rows.filter((row) => types.includes(row.event_type)).reduce((sum, row) => sum + row.n, 0);
  const bySeverity = Object.fromEntries(SEVERITIES.map((s) => [s, 0])) as Record<Severity, number>;
  for (const row of events.rows) {
    if ((ANOMALY_EVENT_TYPES as readonly string[]).includes(row.event_type)) bySeverity[row.severity] += row.n;
  }
  const s = spend.rows[0]!;
  const g = gates.rows[0]!;
  const c = confidence.rows[0]!;
  const missing = endings.rows.filter((row) => row.worked && !row.kept).map((row) => row.intent_id);
  const layers: DailyReport['layers'] = {
    limits: {
      iterations: s.calls,
      spendUsd: s.spend,
      ...(unlimited && { budgetUsd: budget, unlimited: true as const }),
      ...(limit !== null && { budgetUsd: limit, remainingUsd: s.remaining!, remainingPct: Number(s.pct) }),
    },
    thresholds: {
      autoExecuted: g.auto,
      escalated: count('GATE_REQUESTED'),
      timedOut: count('GATE_ESCALATED'),
      averageConfidencePct: c.pct === null ? null : Number(c.pct),
      assessments: c.n,
    },
    history: {
      commits: count('STAGE_COMPLETED', 'INTENT_MERGED'),
      rollbacks: count('ROLLBACK'),
      snapshots: {
        status: missing.length ? 'MISSING' : 'OK',
        ended: endings.rows.length,
        kept: endings.rows.filter((row) => row.kept).length,
        missing,
      },
    },
    humanOverride: {
      emergencyStops: count('GLOBAL_STOP_SET'),
      manualInterventions: count('INTENT_STOPPED', 'OVERRIDE') + g.human,
      decisionQueue: queue.rows[0]!.n,
    },
    anomalies: {
      total: Object.values(bySeverity).reduce((a, b) => a + b, 0),
      bySeverity,
      patterns: patterns.rows.map((row) => row.pattern),
    },
  };

  const red: string[] = [];
  const yellow: string[] = [];
  if (bySeverity.critical) red.push(`${bySeverity.critical} critical anomaly(ies)`);
  if (layers.humanOverride.emergencyStops) red.push(`${layers.humanOverride.emergencyStops} emergency stop(s)`);
  if (s.over) red.push(`spend $${s.spend} is over the $${limit} budget`);
  if (bySeverity.high) yellow.push(`${bySeverity.high} high anomaly(ies)`);
  if (layers.thresholds.timedOut) yellow.push(`${layers.thresholds.timedOut} gate timeout(s)`);
  if (missing.length) yellow.push(`no state snapshot (lineage) kept for ${missing.join(', ')}`);
  if (s.near && !s.over) yellow.push(`spend $${s.spend} is at least 80% of the $${limit} budget`);
  const health = red.length ? 'RED' : yellow.length ? 'YELLOW' : 'GREEN';
  const why = red.length ? red : yellow;
  return {
    date,
    layers,
    health,
    rule: `${HEALTH_RULE}. ${health}: ${why.length ? why.join('; ') : 'none of these happened'}.`,
  };
}
