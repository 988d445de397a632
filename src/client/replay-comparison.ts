/**
 * A replay side by side with its original, from the ledger rows of both: each stage's attempts
 * and the safety layers that fired in it (any row above `info`), which fire now that did not then
 * and the reverse, the gates, and how each ended: merged, or for the replay "would merge".
 */
import type pg from 'pg';
import { readIntentRecord } from '../ledger/intent-record';
import type { ReplayRun } from './replay-intent';

export interface StageComparison {
  readonly stage: string;
  readonly attempts: { readonly then: number; readonly now: number };
  /** Safety layers (event types) that fired in the stage, each run's, sorted. */
  readonly fired: { readonly then: readonly string[]; readonly now: readonly string[] };
  /** Fire now and did not then. */
  readonly added: readonly string[];
  /** Fired then and do not now. */
  readonly removed: readonly string[];
  /** True for a stage before the one the replay started from (`--from`): the original's, not run again. */
  readonly taken?: boolean;
}

export interface ReplayComparison {
  readonly intentId: string;
  readonly replayId: string;
  /** The stage the replay started from (`--from`), when not the whole intent. */
  readonly from?: string;
  readonly outcome: { readonly then: string; readonly now: string };
  /** Why the replay failed, when it did ("diverged at …" when the recording could not answer). */
  readonly error?: string;
  readonly stages: readonly StageComparison[];
  readonly gates: { readonly then: ReadonlyArray<{ gate: string; decision: string }>; readonly now: ReplayRun['gates'] };
  readonly merged: boolean;
  readonly wouldMerge: boolean;
  /** True when the replay ended otherwise than the original, a gate would open that did not, or a safety layer fired differently. */
  readonly changed: boolean;
}

/** Event types that are the pipeline's own steps, not a safety layer deciding. */
const PROGRESS = new Set(['STAGE_STARTED', 'GATE_REQUESTED', 'GATE_DECIDED', 'TESTS_PASSED']);

/** The comparison of `replay` with the intent it replayed. */
export async function compareReplay(pool: pg.Pool, originalId: string, replay: ReplayRun): Promise<ReplayComparison> {
  const [then, now] = await Promise.all([readIntentRecord(pool, originalId), readIntentRecord(pool, replay.intentId)]);
  const [firedThen, firedNow] = await Promise.all([firedByStage(pool, originalId), firedByStage(pool, replay.intentId)]);
  const order = ['triage', 'lld', 'spec', 'impl', 'review', 'merge'];
  const names = [...new Set([...Object.keys(then.attempts), ...Object.keys(now.attempts), ...firedThen.keys(), ...firedNow.keys()])].sort((a, b) => rank(order, a) - rank(order, b));
  const stages = names.map((stage): StageComparison => {
    const before = firedThen.get(stage) ?? [];
    if (replay.from && rank(order, stage) < rank(order, replay.from)) {
      const attempts = then.attempts[stage] ?? 0;
      return { stage, attempts: { then: attempts, now: attempts }, fired: { then: before, now: before }, added: [], removed: [], taken: true };
    }
    const after = firedNow.get(stage) ?? [];
    return {
      stage,
      attempts: { then: then.attempts[stage] ?? 0, now: now.attempts[stage] ?? 0 },
      fired: { then: before, now: after },
      added: after.filter((t) => !before.includes(t)),
      removed: before.filter((t) => !after.includes(t)),
    };
  });
  const outcomeThen = endingOf(then.ending?.type);
  const outcomeNow = replay.status;
  return {
    intentId: originalId,
    replayId: replay.intentId,
    ...(replay.from ? { from: replay.from } : {}),
    outcome: { then: outcomeThen, now: outcomeNow },
    ...(replay.error ? { error: replay.error } : {}),
    stages,
    gates: { then: then.decisions.map((d) => ({ gate: d.gate, decision: d.decision })), now: replay.gates },
    merged: outcomeThen === 'merged',
    wouldMerge: outcomeNow === 'merged',
    changed: outcomeThen !== outcomeNow || replay.gates.some((g) => g.wouldOpen) || stages.some((s) => s.added.length > 0 || s.removed.length > 0),
  };
}

/**
 * Findings made of time alone: a replay answers at once where the original waited on a model, so
 * its agents act faster and these differ by construction, not by a rule.
 */
const TIMING_PATTERNS = ['anomaly-rapid-actions', 'anomaly-latency-outlier', 'call-rapid-calls'];

/** Per stage, the event types above `info` that are not the pipeline's own steps (nor timing findings). */
async function firedByStage(pool: pg.Pool, intentId: string): Promise<Map<string, string[]>> {
  const { rows } = await pool.query<{ stage: string; types: string[] }>(
    `SELECT coalesce(stage, '-') AS stage, array_agg(DISTINCT event_type ORDER BY event_type) AS types
       FROM safety_events WHERE intent_id = $1 AND severity <> 'info' AND coalesce(metadata->>'pattern', '') <> ALL($2::text[]) GROUP BY 1`,
    [intentId, TIMING_PATTERNS],
  );
  // How an intent started and ended is its outcome, shown apart.
  return new Map(rows.map((r) => [r.stage, r.types.filter((t) => !PROGRESS.has(t) && !t.startsWith('INTENT_'))]));
}

function endingOf(type: string | undefined): string {
  return type ? type.replace(/^INTENT_/, '').toLowerCase() : 'unknown';
}

function rank(order: readonly string[], stage: string): number {
  const i = order.indexOf(stage);
  return i < 0 ? order.length : i;
}

/** The lines `warden replay` prints. */
export function formatComparison(c: ReplayComparison): string[] {
  const lines = [`replay ${c.replayId} of ${c.intentId}${c.from ? `, from ${c.from}` : ''}`, ''];
  const rows = [['stage', 'attempts then/now', 'fired then', 'fired now', 'change']];
  for (const s of c.stages) {
    const change = s.taken ? "the original's (not run again)" : [...s.added.map((t) => `+${t}`), ...s.removed.map((t) => `-${t}`)].join(' ') || 'same';
    rows.push([s.stage, `${s.attempts.then}/${s.attempts.now}`, s.fired.then.join(' ') || '-', s.fired.now.join(' ') || '-', change]);
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  for (const row of rows) lines.push(row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  '));
  lines.push('');
  lines.push(`gates then: ${c.gates.then.map((g) => `${g.gate} ${g.decision}`).join(', ') || 'none'}`);
  lines.push(`gates now:  ${c.gates.now.map((g) => `${g.gate} at ${g.stage} ${g.wouldOpen ? 'would open' : `${g.decision} (as then)`}`).join(', ') || 'none'}`);
  lines.push(`outcome then: ${c.outcome.then}${c.merged ? ' (merged)' : ''}`);
  lines.push(`outcome now:  ${c.outcome.now}${c.wouldMerge ? ' (would merge)' : ''}${c.error ? `: ${c.error}` : ''}`);
  lines.push(c.changed ? 'the replay differs from the original' : 'the replay matches the original');
  return lines;
}
