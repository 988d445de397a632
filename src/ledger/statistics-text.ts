import type { BreakerHistory } from './breaker-history';
import type { GateFigures, GateStatistics } from './gate-statistics';

const percent = (rate: number | null): string => (rate === null ? '-' : `${(rate * 100).toFixed(1)}%`);
const seconds = (value: number | null): string => (value === null ? '-' : formatSeconds(value));
const count = (value: number | null): string => (value === null ? '-' : String(value));

/** 95 → 1m35s; under a minute as seconds with up to 3 decimals. */
function formatSeconds(value: number): string {
  if (value < 60) return `${Number(value.toFixed(3))}s`;
  const whole = Math.round(value);
  const [h, m, s] = [Math.floor(whole / 3600), Math.floor((whole % 3600) / 60), whole % 60];
  return h > 0 ? `${h}h${String(m).padStart(2, '0')}m` : `${m}m${String(s).padStart(2, '0')}s`;
}

function periodLine(since: string | null, until: string | null): string {
  return `from ${since ?? 'the oldest row'} to ${until ?? 'now'}`;
}

const COLUMNS = ['opened', 'decided', 'approve', 'reject', 'changes', 'defer', 'auto', 'timeout', 'escal', 'median', 'p90'];

function row(name: string, f: GateFigures): string {
  const cells = [
    count(f.opened),
    String(f.decided),
    percent(f.approvalRate),
    percent(f.rejectionRate),
    percent(f.requestChangesRate),
    String(f.deferred),
    String(f.autoPassed),
    String(f.timedOut),
    count(f.escalated),
    seconds(f.medianSecondsToDecision),
    seconds(f.p90SecondsToDecision),
  ];
  return `${name.padEnd(24)} ${cells.map((cell, i) => cell.padStart(Math.max(7, COLUMNS[i]!.length))).join(' ')}`;
}

/** Gate statistics as tables: per gate kind, per approver, per day, and in all. */
export function formatGateStatistics(stats: GateStatistics): string[] {
  const header = (title: string): string => `${title.padEnd(24)} ${COLUMNS.map((c) => c.padStart(7)).join(' ')}`;
  return [
    `## Gate statistics ${periodLine(stats.since, stats.until)}`,
    '(decided: closed by a person or the forge; approve / reject / changes: shares of those; auto: passed by the automation ladder; median and p90: request to decision)',
    '',
    header('gate'),
    ...stats.byGate.map((g) => row(g.gate, g)),
    row('all gates', stats.total),
    '',
    header('approver'),
    ...stats.byApprover.map((a) => row(a.approver, a)),
    '',
    header('day (UTC)'),
    ...stats.byDay.map((d) => row(d.day, d)),
  ];
}

/** Breaker history: each circuit move in order, then rate-limit refusals per agent and model. */
export function formatBreakerHistory(history: BreakerHistory): string[] {
  return [
    `## Breaker history ${periodLine(history.since, history.until)}`,
    '',
    ...(history.changes.length === 0
      ? ['no circuit changed state']
      : history.changes.map((c) => `${c.at} ${c.endpoint}: ${c.from ?? '?'} -> ${c.to}${c.cause ? ` (${c.cause})` : ''}${c.intentId ? ` [${c.intentId}]` : ''}: ${c.reason}`)),
    '',
    '### Rate-limit refusals',
    ...(history.rateLimits.length === 0
      ? ['none']
      : history.rateLimits.map((r) => `${r.agentId ?? '-'} / ${r.modelId ?? '-'}: ${r.refusals} refusal(s), ${r.first} to ${r.last}`)),
  ];
}
