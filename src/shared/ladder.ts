import { agentIdOf } from './agent-routing';
import type { GateKind } from './gates';
import { GATES } from './gates';
import type { RiskClass } from './risk';

/**
 * The automation ladder: how much an agent profile may do without a person, earned run by run.
 * Levels and requirements are the seed's (004 §7); the metrics live in the ledger's
 * `ladder_metrics` (one appended snapshot per run), so this module stays pure.
 */
export type LadderLevel = 0 | 1 | 2 | 3 | 4;

export interface LevelRequirements {
  readonly minRuns: number;
  readonly maxFalsePositiveRate: number;
  readonly maxMissedCriticalBugs: number;
  readonly minApprovalRate?: number;
}

export interface LevelDefinition {
  readonly level: LadderLevel;
  readonly name: string;
  /** What passes without a person at this level. */
  readonly autoPasses: string;
  readonly requirements: LevelRequirements;
}

export const LADDER: readonly LevelDefinition[] = [
  { level: 0, name: 'Manual', autoPasses: 'nothing', requirements: { minRuns: 0, maxFalsePositiveRate: 1, maxMissedCriticalBugs: Infinity } },
  { level: 1, name: 'AI Suggests', autoPasses: 'nothing', requirements: { minRuns: 10, maxFalsePositiveRate: 0.5, maxMissedCriticalBugs: 5 } },
  {
    level: 2,
    name: 'AI Acts',
    autoPasses: 'review gates (LLD approval) of LOW-risk intents',
    requirements: { minRuns: 50, maxFalsePositiveRate: 0.2, maxMissedCriticalBugs: 1, minApprovalRate: 0.8 },
  },
  {
    level: 3,
    name: 'AI Autonomous',
    autoPasses: 'LOW-risk review gates and merges',
    requirements: { minRuns: 200, maxFalsePositiveRate: 0.05, maxMissedCriticalBugs: 0, minApprovalRate: 0.9 },
  },
  {
    level: 4,
    name: 'Full Autonomy',
    autoPasses: 'every gate of a LOW-risk intent except the human-only ones',
    requirements: { minRuns: 500, maxFalsePositiveRate: 0.02, maxMissedCriticalBugs: 0, minApprovalRate: 0.95 },
  },
];

export interface LadderMetrics {
  readonly totalRuns: number;
  readonly successfulRuns: number;
  /** Runs a person rejected although review approved them (the agent was wrong to be sure). */
  readonly falsePositives: number;
  /** Critical findings that review missed and a person or a later check caught. */
  readonly missedCriticalBugs: number;
  /** Exponential moving average (α = 0.1) of human approvals. */
  readonly approvalRate: number;
  /** Failed runs in a row, per repository: a success there starts its count again. */
  readonly failureStreaks?: Readonly<Record<string, number>>;
}

export const EMPTY_METRICS: LadderMetrics = { totalRuns: 0, successfulRuns: 0, falsePositives: 0, missedCriticalBugs: 0, approvalRate: 0 };

/**
 * Failed intents in a row of one profile on one repository that drop its level a step. One
 * failure can be the task or the weather (a flaky test, an outage); three in a row on the same
 * repository say the profile cannot be trusted there at its level.
 */
export const FAILURES_BEFORE_DROP = 3;
const APPROVAL_ALPHA = 0.1;

/** How one finished intent counts. */
export interface LadderRun {
  readonly success: boolean;
  /** Whether a person approved it, when a person decided at all. */
  readonly humanApproved?: boolean;
  readonly falsePositive?: boolean;
  readonly missedCriticalBugs?: number;
  /** The repository the intent ran on: failures are counted in a row per repository. */
  readonly repo?: string;
  /** What its code was seen trying in the sandbox (ESCAPE_ATTEMPTED, ANSWER_REDACTED rows): any drops the level. */
  readonly escapeAttempts?: number;
}

export function applyRun(metrics: LadderMetrics, run: LadderRun): LadderMetrics {
  const streaks = { ...(metrics.failureStreaks ?? {}) };
  if (run.repo !== undefined) {
    // A run rejected by a person drops the level at once (see nextLevel); only plain failures build a streak.
    if (run.success) delete streaks[run.repo];
    else if (run.humanApproved !== false) streaks[run.repo] = (streaks[run.repo] ?? 0) + 1;
  }
  return {
    ...(Object.keys(streaks).length > 0 ? { failureStreaks: streaks } : {}),
    totalRuns: metrics.totalRuns + 1,
    successfulRuns: metrics.successfulRuns + (run.success ? 1 : 0),
    falsePositives: metrics.falsePositives + (run.falsePositive ? 1 : 0),
    missedCriticalBugs: metrics.missedCriticalBugs + (run.missedCriticalBugs ?? 0),
    approvalRate:
      run.humanApproved === undefined ? metrics.approvalRate : APPROVAL_ALPHA * (run.humanApproved ? 1 : 0) + (1 - APPROVAL_ALPHA) * metrics.approvalRate,
  };
}

export function falsePositiveRate(metrics: LadderMetrics): number {
  return metrics.totalRuns === 0 ? 0 : metrics.falsePositives / metrics.totalRuns;
}

/** What `level`'s requirements still need from `metrics`; empty when they hold. */
export function unmetRequirements(level: LadderLevel, metrics: LadderMetrics): string[] {
  const r = LADDER[level]!.requirements;
  const unmet: string[] = [];
  if (metrics.totalRuns < r.minRuns) unmet.push(`runs ${metrics.totalRuns} < ${r.minRuns}`);
  const fp = falsePositiveRate(metrics);
  if (fp > r.maxFalsePositiveRate) unmet.push(`false-positive rate ${fp.toFixed(3)} > ${r.maxFalsePositiveRate}`);
  if (metrics.missedCriticalBugs > r.maxMissedCriticalBugs) unmet.push(`missed critical bugs ${metrics.missedCriticalBugs} > ${r.maxMissedCriticalBugs}`);
  if (r.minApprovalRate !== undefined && metrics.approvalRate < r.minApprovalRate) {
    unmet.push(`approval rate ${metrics.approvalRate.toFixed(3)} < ${r.minApprovalRate}`);
  }
  return unmet;
}

/** The repository whose failures in a row (counted in `metrics`, after the run) now call for a drop, if any. */
export function failingRepo(metrics: LadderMetrics, run: LadderRun): string | undefined {
  if (run.success || run.repo === undefined) return undefined;
  return (metrics.failureStreaks?.[run.repo] ?? 0) >= FAILURES_BEFORE_DROP ? run.repo : undefined;
}

/**
 * The level after a run (`metrics` already count it): one step down when a person rejected it,
 * when its code was seen trying what the sandbox stopped (escape attempts, whatever the outcome), or when it is the `FAILURES_BEFORE_DROP`th failure in a row on its repository (a run without a
 * repository drops at once); else one step up when the next level's requirements hold and
 * level-up is allowed. A pinned level never moves.
 */
export function nextLevel(current: LadderLevel, metrics: LadderMetrics, run: LadderRun, options: { allowLevelUp: boolean; pinned: boolean }): LadderLevel {
  if (options.pinned) return current;
  const drop = run.humanApproved === false || (run.escapeAttempts ?? 0) > 0 || (!run.success && (run.repo === undefined || failingRepo(metrics, run) !== undefined));
  if (drop) return Math.max(0, current - 1) as LadderLevel;
  if (!run.success) return current;
  if (!options.allowLevelUp || current === 4) return current;
  const up = (current + 1) as LadderLevel;
  return unmetRequirements(up, metrics).length === 0 ? up : current;
}

/** The gates a level lets pass on their own (for a LOW-risk intent whose checks all hold). */
function levelAutoPasses(level: LadderLevel, gate: GateKind): boolean {
  if (GATES[gate].humanOnly) return false;
  if (level >= 4) return true;
  if (level === 3) return gate === 'lld' || gate === 'spec' || gate === 'merge';
  if (level === 2) return gate === 'lld' || gate === 'spec';
  return false;
}

/** How `decided_by` of a gate the automation ladder passed begins; the level follows (`warden-ladder-L3`). */
export const LADDER_DECIDER_PREFIX = 'warden-ladder-L';

/** The `decided_by` the gate keeper writes when the ladder at `level` passes a gate. */
export function ladderDecider(level: LadderLevel): string {
  return `${LADDER_DECIDER_PREFIX}${level}`;
}

/**
 * Whether the gate passes without a person: the level allows it, the intent is LOW risk, and
 * every check that vouches for the agent holds (`refusals` lists those that do not: a failed
 * confidence gate, a review BLOCK, judge scores below the rule…). Returns why not, or undefined.
 */
export function autoPassRefusal(input: { level: LadderLevel; gate: GateKind; risk: RiskClass; refusals: readonly string[] }): string | undefined {
  if (GATES[input.gate].humanOnly) return `the ${input.gate} gate always needs a person`;
  if (!levelAutoPasses(input.level, input.gate)) return `level L${input.level} does not auto-pass the ${input.gate} gate`;
  if (input.risk !== 'LOW') return `risk is ${input.risk}, not LOW`;
  if (input.refusals.length > 0) return input.refusals.join('; ');
  return undefined;
}

/** The ledger scope of an agent profile's ladder. */
export function ladderScope(agent: { readonly kind: string; readonly name?: string }): string {
  return `agent:${agentIdOf(agent)}`;
}
