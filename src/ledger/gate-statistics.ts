import type pg from 'pg';
import { LADDER_DECIDER_PREFIX } from '../shared/ladder';

/** A stretch of time, each end optional: from `since` (included) to `until` (excluded). */
export interface LedgerPeriod {
  readonly since?: Date;
  readonly until?: Date;
}

/** Decisions that let the intent go on (with conditions or a person's edit, it is still an approval). */
const APPROVALS: readonly string[] = ['approve', 'approve-with-conditions', 'approve-with-edits'];

/**
 * What one group of gates (all of them, one gate kind, one approver, one day) came to. `decided`
 * counts the decisions that closed a gate by a person (or the forge): not the automation ladder's
 * passes (`autoPassed`), not timeouts (`timedOut`), not a defer (which keeps the gate open). The
 * rates and the times are of those decisions; a time runs from the gate's request to its decision.
 * `opened` and `escalated` are null for an approver: a gate is opened, and escalated, to no one in
 * particular.
 */
export interface GateFigures {
  readonly opened: number | null;
  readonly decided: number;
  readonly approved: number;
  readonly rejected: number;
  readonly changesRequested: number;
  readonly deferred: number;
  readonly autoPassed: number;
  readonly timedOut: number;
  readonly escalated: number | null;
  /** approved / decided, rounded to 4 decimals; null when nothing was decided. */
  readonly approvalRate: number | null;
  readonly rejectionRate: number | null;
  readonly requestChangesRate: number | null;
  /** Seconds from request to decision (to the millisecond), interpolated between the nearest ranks; null when nothing was decided. */
  readonly medianSecondsToDecision: number | null;
  readonly p90SecondsToDecision: number | null;
}

export interface GateStatistics {
  readonly since: string | null;
  readonly until: string | null;
  readonly total: GateFigures;
  /** Per gate kind (lld, spec, merge, a custom gate's id; `pause` for a pause that outlived its timeout). */
  readonly byGate: ReadonlyArray<{ readonly gate: string } & GateFigures>;
  /** Per decider as the ledger names them: a person, `forge`, `warden` (a timeout), `warden-ladder-L<n>`. */
  readonly byApprover: ReadonlyArray<{ readonly approver: string } & GateFigures>;
  /** Per UTC day: a request and an escalation count on the day they happened, a decision on the day it was made. */
  readonly byDay: ReadonlyArray<{ readonly day: string } & GateFigures>;
}

/** One thing that happened at a gate, as read from the ledger. */
interface GateFact {
  readonly kind: 'opened' | 'escalated' | 'decision';
  readonly gate: string;
  readonly day: string;
  readonly approver?: string;
  readonly decision?: string;
  readonly timedOut?: boolean;
  readonly seconds?: number;
}

/**
 * Gate statistics over a period: gates opened to a person (GATE_REQUESTED events), escalated
 * (GATE_ESCALATED events), and decided (gate_decisions rows), each counted by when it happened.
 * A gate requested in the period and decided after it counts as opened, not decided.
 */
export async function gateStatistics(pool: pg.Pool, period: LedgerPeriod = {}): Promise<GateStatistics> {
  const since = period.since ?? null;
  const until = period.until ?? null;
  const [events, decisions] = await Promise.all([
    pool.query<{ event_type: string; gate: string; day: string }>(
      `SELECT event_type, coalesce(metadata->>'gate', stage, '?') AS gate,
              to_char("timestamp" AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day
         FROM safety_events
        WHERE event_type IN ('GATE_REQUESTED', 'GATE_ESCALATED')
          AND ($1::timestamptz IS NULL OR "timestamp" >= $1) AND ($2::timestamptz IS NULL OR "timestamp" < $2)`,
      [since, until],
    ),
    pool.query<{ gate: string; decided_by: string; decision: string; timed_out: boolean; day: string; ms: string }>(
      `SELECT gate, decided_by, decision, timed_out,
              to_char(decided_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
              round(extract(epoch FROM decided_at - requested_at) * 1000)::text AS ms
         FROM gate_decisions
        WHERE ($1::timestamptz IS NULL OR decided_at >= $1) AND ($2::timestamptz IS NULL OR decided_at < $2)`,
      [since, until],
    ),
  ]);
  const facts: GateFact[] = [
    ...events.rows.map((row): GateFact => ({ kind: row.event_type === 'GATE_REQUESTED' ? 'opened' : 'escalated', gate: row.gate, day: row.day })),
    ...decisions.rows.map(
      (row): GateFact => ({ kind: 'decision', gate: row.gate, day: row.day, approver: row.decided_by, decision: row.decision, timedOut: row.timed_out, seconds: Number(row.ms) / 1000 }),
    ),
  ];
  const grouped = <K extends string>(key: K, of: (fact: GateFact) => string | undefined, perApprover = false): Array<Record<K, string> & GateFigures> => {
    const groups = new Map<string, GateFact[]>();
    for (const fact of facts) {
      const value = of(fact);
      if (value === undefined) continue;
      groups.set(value, [...(groups.get(value) ?? []), fact]);
    }
    return [...groups.keys()]
      .sort()
      .map((value) => ({ [key]: value, ...figuresOf(groups.get(value)!, perApprover) }) as Record<K, string> & GateFigures);
  };
  return {
    since: since?.toISOString() ?? null,
    until: until?.toISOString() ?? null,
    total: figuresOf(facts, false),
    byGate: grouped('gate', (fact) => fact.gate),
    byApprover: grouped('approver', (fact) => fact.approver, true),
    byDay: grouped('day', (fact) => fact.day),
  };
}

function figuresOf(facts: readonly GateFact[], perApprover: boolean): GateFigures {
  const decisions = facts.filter((fact) => fact.kind === 'decision');
  const ladder = (fact: GateFact): boolean => fact.approver!.startsWith(LADDER_DECIDER_PREFIX);
  const closing = decisions.filter((fact) => !fact.timedOut && fact.decision !== 'defer' && !ladder(fact));
  const count = (kinds: readonly string[]): number => closing.filter((fact) => kinds.includes(fact.decision!)).length;
  const rate = (n: number): number | null => (closing.length === 0 ? null : Math.round((n / closing.length) * 10_000) / 10_000);
  const approved = count(APPROVALS);
  const rejected = count(['reject']);
  const changesRequested = count(['request-changes']);
  const seconds = closing.map((fact) => fact.seconds!).sort((a, b) => a - b);
  return {
    opened: perApprover ? null : facts.filter((fact) => fact.kind === 'opened').length,
    decided: closing.length,
    approved,
    rejected,
    changesRequested,
    deferred: decisions.filter((fact) => fact.decision === 'defer').length,
    autoPassed: decisions.filter((fact) => !fact.timedOut && ladder(fact)).length,
    timedOut: decisions.filter((fact) => fact.timedOut).length,
    escalated: perApprover ? null : facts.filter((fact) => fact.kind === 'escalated').length,
    approvalRate: rate(approved),
    rejectionRate: rate(rejected),
    requestChangesRate: rate(changesRequested),
    medianSecondsToDecision: percentile(seconds, 0.5),
    p90SecondsToDecision: percentile(seconds, 0.9),
  };
}

/** The `p` quantile of ascending `sorted`, interpolated between the two nearest ranks (PostgreSQL's percentile_cont). */
export function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  const at = p * (sorted.length - 1);
  const low = Math.floor(at);
  const high = Math.ceil(at);
  const value = sorted[low]! + (sorted[high]! - sorted[low]!) * (at - low);
  return Math.round(value * 1000) / 1000;
}
