/**
 * `warden replay --since DATE`: every intent recorded since then replayed, one after another,
 * against the config given, and sorted into what a team decides a proposed config from: the
 * intents it would now stop, those it would hold at a gate the original did not open, those that
 * pass as before, and those whose recording could not answer the replay.
 */
import type pg from 'pg';
import { REPLAY_ID_PREFIX } from '../shared/ids';
import { compareReplay, type ReplayComparison } from './replay-comparison';
import { replayIntent, type ReplayTarget } from './replay-intent';

/** How a replayed intent fares under the config given. */
export type ReplayVerdict = 'stopped' | 'gated' | 'pass' | 'diverged';

export interface PeriodEntry {
  readonly intentId: string;
  readonly verdict: ReplayVerdict;
  readonly outcome: ReplayComparison['outcome'];
  /** The gates that would open now, and the stages they open at. */
  readonly wouldOpen: ReadonlyArray<{ gate: string; stage: string }>;
  /** Why it was stopped or diverged. */
  readonly error?: string;
}

/**
 * A replay's verdict: `diverged` when the recording could not answer it (nothing can be said of
 * the config); `stopped` when the original merged and the replay would not; `gated` when it
 * would still merge but opened a gate the original did not; else `pass`. An original that did
 * not merge and still does not is `pass`: the config changes nothing for it.
 */
export function verdictOf(comparison: ReplayComparison): ReplayVerdict {
  if (comparison.error?.startsWith('diverged at ')) return 'diverged';
  if (comparison.merged && !comparison.wouldMerge) return 'stopped';
  if (comparison.gates.now.some((g) => g.wouldOpen)) return 'gated';
  return 'pass';
}

/** The intents recorded since `since` that can be replayed, oldest first (replays left out). */
export async function recordedSince(pool: pg.Pool, since: Date): Promise<string[]> {
  const { rows } = await pool.query<{ intent_id: string }>(
    `SELECT intent_id FROM intent_recordings WHERE recorded_at >= $1 AND context IS NOT NULL AND intent_id NOT LIKE $2 ORDER BY recorded_at, intent_id`,
    [since, `${REPLAY_ID_PREFIX}%`],
  );
  return rows.map((r) => r.intent_id);
}

/** Replays every intent recorded since `since`, one at a time; `onEach` hears of each as it ends. */
export async function replayPeriod(target: ReplayTarget, since: Date, onEach: (entry: PeriodEntry) => void = () => undefined): Promise<PeriodEntry[]> {
  const entries: PeriodEntry[] = [];
  for (const intentId of await recordedSince(target.pool, since)) {
    const comparison = await compareReplay(target.pool, intentId, await replayIntent(target, intentId));
    const entry: PeriodEntry = {
      intentId,
      verdict: verdictOf(comparison),
      outcome: comparison.outcome,
      wouldOpen: comparison.gates.now.filter((g) => g.wouldOpen).map((g) => ({ gate: g.gate, stage: g.stage })),
      ...(comparison.error ? { error: comparison.error } : {}),
    };
    entries.push(entry);
    onEach(entry);
  }
  return entries;
}

/** The table `warden replay --since` prints: one block per verdict, its intents by id. */
export function formatPeriod(entries: readonly PeriodEntry[], since: Date): string[] {
  const lines = [`${entries.length} intent(s) recorded since ${since.toISOString()}, replayed against the config given`, ''];
  const titles: Record<ReplayVerdict, string> = {
    stopped: 'would now be stopped (merged then, not now)',
    gated: 'would now wait at a gate the original did not open',
    pass: 'pass as before',
    diverged: 'could not be replayed (the recording has no answer for a request)',
  };
  for (const verdict of ['stopped', 'gated', 'pass', 'diverged'] as const) {
    const of = entries.filter((e) => e.verdict === verdict);
    lines.push(`${titles[verdict]}: ${of.length}`);
    for (const e of of) {
      const why = verdict === 'gated' ? e.wouldOpen.map((g) => `${g.gate} gate at ${g.stage}`).join(', ') : verdict === 'pass' ? e.outcome.now : (e.error ?? e.outcome.now);
      lines.push(`  ${e.intentId}  ${why}`);
    }
  }
  return lines;
}
