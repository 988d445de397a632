/**
 * Layer-1 limits as pure checks: iteration caps, two-strike stagnation, budget, blast radius,
 * dispatch cooldown and elapsed time. Every input, including the current time, is passed in.
 *
 * Workflow-safe: pure, no Node built-ins, no clocks, no I/O. The workflow outbound interceptor
 * calls these before each stage activity; activities may call them too.
 */
import { compareUsd, fromMicros, toMicros } from '../shared/money';

/** ok: go on; warn: go on, but record it; trip: do not start the next step. */
export type Verdict = 'ok' | 'warn' | 'trip';

/** Why a check warned or tripped; the trip reasons match the ledger's event types where one exists. */
export type LimitReason =
  | 'MAX_ITERATIONS_EXCEEDED'
  | 'APPROACHING_ITERATION_LIMIT'
  | 'STAGNATION_DETECTED'
  | 'BUDGET_WARNING'
  | 'BUDGET_EXCEEDED'
  | 'BUDGET_NOT_CONFIGURED'
  | 'BLAST_RADIUS_WARNING'
  | 'BLAST_RADIUS_EXCEEDED'
  | 'COOLDOWN_ACTIVE'
  | 'TIME_WARNING'
  | 'TIME_LIMIT_EXCEEDED';

/** The result of every check. `reason` is set whenever the verdict is not `ok`. */
export interface LimitCheck {
  readonly verdict: Verdict;
  readonly reason?: LimitReason;
  /** One sentence for people: what was measured against what. */
  readonly detail: string;
  /** What a person could do about it (empty when there is nothing to do). */
  readonly suggestion: string;
  /** The measured value (the next attempt's number, the projected spend in USD, …). */
  readonly current: number;
  /** The limit it was measured against. */
  readonly threshold: number;
}

const VERDICT_RANK: Record<Verdict, number> = { ok: 0, warn: 1, trip: 2 };

/** The most severe of several checks; the first one wins a tie. */
export function worstOf(first: LimitCheck, ...rest: readonly LimitCheck[]): LimitCheck {
  return rest.reduce((worst, check) => (VERDICT_RANK[check.verdict] > VERDICT_RANK[worst.verdict] ? check : worst), first);
}

// ─── Iterations ────────────────────────────────────────────────────────────────────────────────

/**
 * Attempts allowed per stage; `default` covers any other stage. impl gets 5: enough to recover
 * from a bad first try with the test output in hand, few enough to bound spend. A document stage
 * or review gets 3, and so does the completeness gate: a third refusal says the task is unclear.
 */
export const DEFAULT_STAGE_ATTEMPT_CAPS: Readonly<Record<string, number>> = {
  triage: 3,
  lld: 3,
  spec: 3,
  impl: 5,
  review: 3,
  completeness: 3,
  default: 3,
};

/** Attempts allowed across all stages of one intent. */
export const DEFAULT_TOTAL_ATTEMPT_CAP = 20;

/** Input of `checkIterations`. Counts are attempts already started, before the next one. */
export interface IterationInput {
  readonly stage: string;
  /** Attempts of `stage` already started in this intent. */
  readonly stageAttempts: number;
  /** Attempts of all stages already started in this intent. */
  readonly totalAttempts: number;
  /** Per-stage caps; missing stages fall back to `caps.default`, then to the built-in defaults. */
  readonly caps?: Readonly<Record<string, number>>;
  readonly totalCap?: number;
  /** Warn when the next attempt reaches this fraction of a cap (default 0.8). */
  readonly warnAt?: number;
}

function capFor(stage: string, caps: Readonly<Record<string, number>> | undefined): number {
  const own = (table: Readonly<Record<string, number>> | undefined, key: string): number | undefined =>
    table && Object.prototype.hasOwnProperty.call(table, key) ? table[key] : undefined;
  return own(caps, stage) ?? own(caps, 'default') ?? own(DEFAULT_STAGE_ATTEMPT_CAPS, stage) ?? DEFAULT_STAGE_ATTEMPT_CAPS.default;
}

function attemptCheck(scope: string, next: number, cap: number, warnAt: number): LimitCheck {
  if (next > cap) {
    return {
      verdict: 'trip',
      reason: 'MAX_ITERATIONS_EXCEEDED',
      detail: `${scope}: attempt ${next} would exceed the cap of ${cap}`,
      suggestion: `Stop and have a person look: ${cap} attempts did not finish ${scope}. The task may be too large or the approach wrong; narrow the intent or raise the cap deliberately.`,
      current: next,
      threshold: cap,
    };
  }
  if (next >= cap * warnAt) {
    return {
      verdict: 'warn',
      reason: 'APPROACHING_ITERATION_LIMIT',
      detail: `${scope}: attempt ${next} of ${cap}`,
      suggestion: `${cap - next} attempt(s) left after this one in ${scope}.`,
      current: next,
      threshold: cap,
    };
  }
  return { verdict: 'ok', detail: `${scope}: attempt ${next} of ${cap}`, suggestion: '', current: next, threshold: cap };
}

/**
 * May the next attempt of `stage` start? Trips when that attempt would exceed the stage's cap or
 * the intent's total cap (with cap 5: attempts 1–5 pass, the 6th trips), warns from `warnAt` of
 * either cap. Returns the more severe of the two, the stage's on a tie.
 */
export function checkIterations(input: IterationInput): LimitCheck {
  const warnAt = input.warnAt ?? 0.8;
  const stageCap = capFor(input.stage, input.caps);
  const totalCap = input.totalCap ?? DEFAULT_TOTAL_ATTEMPT_CAP;
  return worstOf(
    attemptCheck(`stage ${input.stage}`, input.stageAttempts + 1, stageCap, warnAt),
    attemptCheck('intent (all stages)', input.totalAttempts + 1, totalCap, warnAt),
  );
}

// ─── Stagnation (two-strike rule) ──────────────────────────────────────────────────────────────

/**
 * What one verification run showed. Counts are undefined when the runner's output did not say
 * them: an unknown count is never taken for 0.
 */
export interface TestOutcome {
  readonly passed?: number;
  readonly failed?: number;
  readonly failingTests?: readonly string[];
  /** The test command succeeded (exit 0). When not given, a run with no failures and some passes is green. */
  readonly green?: boolean;
}

function countsKnown(outcome: TestOutcome): outcome is TestOutcome & { passed: number; failed: number } {
  return outcome.passed !== undefined && outcome.failed !== undefined;
}

function sameOutcome(a: TestOutcome, b: TestOutcome): boolean {
  if (!countsKnown(a) || !countsKnown(b)) return false;
  if (a.passed !== b.passed || a.failed !== b.failed) return false;
  if (!a.failingTests || !b.failingTests) return true;
  const left = new Set(a.failingTests);
  const right = new Set(b.failingTests);
  return left.size === right.size && [...left].every((name) => right.has(name));
}

function isGreen(outcome: TestOutcome): boolean {
  return outcome.green ?? (outcome.failed === 0 && (outcome.passed ?? 0) > 0);
}

/**
 * Two-strike rule: the same approach giving the same result twice will not change on a third
 * try, so stop and spend nothing more. Trips when the last `strikes` (default 2) verification
 * results of the impl loop are identical — same passing count, same failing count and, when
 * both name them, the same set of failing tests. Only known results compare: a run whose counts
 * could not be read is like no other. A green run (the command passed, or no failures and some
 * passes) is never stagnation. `history` is oldest first.
 */
export function checkStagnation(history: readonly TestOutcome[], strikes = 2): LimitCheck {
  const last = history[history.length - 1];
  let repeats = last && countsKnown(last) ? 1 : 0;
  for (let i = history.length - 2; i >= 0 && repeats > 0 && repeats < strikes && sameOutcome(history[i], last!); i--) repeats++;
  if (last && countsKnown(last) && !isGreen(last) && repeats >= strikes) {
    return {
      verdict: 'trip',
      reason: 'STAGNATION_DETECTED',
      detail: `the last ${repeats} test runs were identical (${last.passed} passed, ${last.failed} failed${last.failingTests?.length ? `: ${last.failingTests.slice(0, 5).join(', ')}` : ''})`,
      suggestion: 'Same approach, same result: stop and diagnose instead of retrying. Read the failing tests, then narrow the intent or give the agent new information.',
      current: repeats,
      threshold: strikes,
    };
  }
  const detail = last && !countsKnown(last) ? 'the last test run printed no counts Warden can read: nothing to compare' : `${repeats} identical result(s) in a row`;
  return { verdict: 'ok', detail, suggestion: '', current: repeats, threshold: strikes };
}

// ─── Completeness gate ─────────────────────────────────────────────────────────────────────────

/**
 * Has the completeness (anti-stub) gate refused the impl loop often enough to end it? Trips when
 * the refusals so far reach `cap` (default 3), before the next impl attempt is dispatched: an
 * agent told three times that its change is a stub or weakens the tests will not be told a fourth.
 */
export function checkCompleteness(refusals: number, cap: number = DEFAULT_STAGE_ATTEMPT_CAPS.completeness): LimitCheck {
  if (refusals >= cap) {
    return {
      verdict: 'trip',
      reason: 'MAX_ITERATIONS_EXCEEDED',
      detail: `completeness gate: ${refusals} refusal(s) (stubs or test tampering) reached the cap of ${cap}`,
      suggestion: `The gate refused ${refusals} impl attempts for stubs or changed tests. Read the findings in the ledger, then give the agent a narrower task or a stronger model; raise limits.attempts.completeness only deliberately.`,
      current: refusals,
      threshold: cap,
    };
  }
  return { verdict: 'ok', detail: `completeness gate: ${refusals} of ${cap} refusals`, suggestion: '', current: refusals, threshold: cap };
}

// ─── Budget ────────────────────────────────────────────────────────────────────────────────────

/** Input of `checkBudget`; amounts are exact decimal strings. */
export interface BudgetInput {
  /** Settled spend in this scope (stage, intent or day). */
  readonly spentUsd: string;
  /** Maximum cost of the call about to be made (see `maxCostOf`). */
  readonly nextCallMaxUsd: string;
  /** The limit; `null` means unlimited and must be chosen explicitly — there is no default. */
  readonly limitUsd: string | null;
  /** Warn once spend reaches this fraction of the limit (default 0.8). */
  readonly warnAt?: number;
}

/** `checkBudget`'s result, with the exact amounts next to the approximate numbers. */
export interface BudgetCheck extends LimitCheck {
  readonly spentUsd: string;
  /** spent + next call's maximum. */
  readonly projectedUsd: string;
  readonly limitUsd: string | null;
  /** limit − spent, or null when unlimited. */
  readonly remainingUsd: string | null;
}

/** `LimitCheck.threshold` of an unlimited budget: JSON-safe, unlike Infinity. */
export const UNLIMITED = Number.MAX_SAFE_INTEGER;

const PPM = 1_000_000;

/**
 * May a call whose cost is at most `nextCallMaxUsd` start? Trips when spent + that maximum would
 * exceed the limit, so settled spend can never pass it (reaching it exactly is allowed); warns
 * when spend already reached `warnAt` of the limit. An unlimited budget (`null`) is always ok;
 * a missing limit (`undefined` from untyped input) fails closed.
 */
export function checkBudget(input: BudgetInput): BudgetCheck {
  const spent = toMicros(input.spentUsd);
  const next = toMicros(input.nextCallMaxUsd);
  const projected = spent + next;
  const base = { spentUsd: fromMicros(spent), projectedUsd: fromMicros(projected) };
  const dollars = (micros: bigint): number => Number(micros) / PPM;

  if (input.limitUsd === null) {
    return {
      ...base,
      limitUsd: null,
      remainingUsd: null,
      verdict: 'ok',
      detail: `spent $${base.spentUsd}; budget explicitly unlimited`,
      suggestion: '',
      current: dollars(projected),
      threshold: UNLIMITED,
    };
  }
  if (input.limitUsd === undefined) {
    return {
      ...base,
      limitUsd: null,
      remainingUsd: null,
      verdict: 'trip',
      reason: 'BUDGET_NOT_CONFIGURED',
      detail: 'no budget limit was given; unlimited spend must be chosen explicitly',
      suggestion: 'Set a budget (for example $5.00), or pass null to run without one on purpose.',
      current: dollars(projected),
      threshold: 0,
    };
  }

  const limit = toMicros(input.limitUsd);
  const remaining = limit - spent;
  const exact = { ...base, limitUsd: fromMicros(limit), remainingUsd: fromMicros(remaining) };
  if (projected > limit) {
    return {
      ...exact,
      verdict: 'trip',
      reason: 'BUDGET_EXCEEDED',
      detail: `spent $${exact.spentUsd} + next call up to $${fromMicros(next)} = $${exact.projectedUsd} would exceed the $${exact.limitUsd} budget`,
      suggestion: `Only $${exact.remainingUsd} left. Raise the budget deliberately, use a cheaper model or smaller max_tokens, or stop here.`,
      current: dollars(projected),
      threshold: dollars(limit),
    };
  }
  const warnPpm = BigInt(Math.round((input.warnAt ?? 0.8) * PPM));
  if (limit > 0n && spent * BigInt(PPM) >= limit * warnPpm) {
    return {
      ...exact,
      verdict: 'warn',
      reason: 'BUDGET_WARNING',
      detail: `spent $${exact.spentUsd} of the $${exact.limitUsd} budget (${percent(spent, limit)})`,
      suggestion: `$${exact.remainingUsd} left; decide now whether this intent is worth more.`,
      current: dollars(spent),
      threshold: dollars(limit),
    };
  }
  return {
    ...exact,
    verdict: 'ok',
    detail: `spent $${exact.spentUsd} of $${exact.limitUsd}; next call up to $${fromMicros(next)}`,
    suggestion: '',
    current: dollars(projected),
    threshold: dollars(limit),
  };
}

function percent(part: bigint, whole: bigint): string {
  return `${(Number((part * 1000n) / whole) / 10).toFixed(1)}%`;
}

/** The shares of a budget at which its spend is announced, once each (a COST_WARNING per share). */
export const BUDGET_WARNING_SHARES: readonly number[] = [0.8, 0.9];

/** The shares of `shares` that `spentUsd` has reached of `limitUsd`; none when the budget is unlimited (null) or zero. */
export function budgetSharesReached(spentUsd: string, limitUsd: string | null, shares: readonly number[] = BUDGET_WARNING_SHARES): number[] {
  if (limitUsd === null) return [];
  const limit = toMicros(limitUsd);
  if (limit <= 0n) return [];
  const spent = toMicros(spentUsd) * BigInt(PPM);
  return shares.filter((share) => spent >= limit * BigInt(Math.round(share * PPM)));
}

/** Has spend reached the limit, so that no further paid call can fit? Never true when unlimited. */
export function isBudgetExhausted(spentUsd: string, limitUsd: string | null): boolean {
  return limitUsd !== null && compareUsd(spentUsd, limitUsd) >= 0;
}

// ─── Blast radius ──────────────────────────────────────────────────────────────────────────────

/** Size of a change. */
export interface ChangeSize {
  readonly files: number;
  readonly lines: number;
}

/**
 * Size above which no change passes without a person, whatever was predicted: more than 10 files
 * or 2000 lines is more than one careful review reads, and more than most single intents need.
 */
export const DEFAULT_BLAST_RADIUS_CAP: ChangeSize = { files: 10, lines: 2000 };

/** Input of `checkBlastRadius`. */
export interface BlastRadiusInput {
  readonly predicted: ChangeSize;
  readonly actual: ChangeSize;
  /** Allowed overrun of the prediction (1.5×: predictions are rough, but half again is a surprise). */
  readonly factor?: number;
  readonly hardCap?: ChangeSize;
  /**
   * The largest size a person approved at the blast-radius gate so far. It replaces the
   * prediction as the base of the overrun check, and raises the hard cap to itself: the change
   * may stay as large as what was approved, and each later attempt is still checked against both.
   */
  readonly approved?: ChangeSize;
}

/** The larger of two sizes, dimension by dimension. */
export function largerSize(a: ChangeSize, b: ChangeSize): ChangeSize {
  return { files: Math.max(a.files, b.files), lines: Math.max(a.lines, b.lines) };
}

/**
 * Did the change stay inside its predicted blast radius? Trips when files or lines exceed
 * `factor` × the prediction (exactly 1.5× passes) or the hard cap (exactly the cap passes);
 * warns when the prediction itself was exceeded. The worst dimension is reported. After an
 * approval, the approved size stands in for the prediction and for a lower hard cap.
 */
export function checkBlastRadius(input: BlastRadiusInput): LimitCheck {
  const factor = input.factor ?? 1.5;
  const cap = input.approved ? largerSize(input.hardCap ?? DEFAULT_BLAST_RADIUS_CAP, input.approved) : (input.hardCap ?? DEFAULT_BLAST_RADIUS_CAP);
  const base = input.approved ?? input.predicted;
  const baseName = input.approved ? 'approved' : 'predicted';
  const dims = ['files', 'lines'] as const;

  for (const dim of dims) {
    const actual = input.actual[dim];
    if (actual > cap[dim]) {
      return {
        verdict: 'trip',
        reason: 'BLAST_RADIUS_EXCEEDED',
        detail: `${actual} ${dim} changed, over the hard cap of ${cap[dim]}${input.approved ? ' (the size last approved)' : ''}`,
        suggestion: 'Split the intent into smaller ones; no single change this large passes without a person.',
        current: actual,
        threshold: cap[dim],
      };
    }
  }
  for (const dim of dims) {
    const actual = input.actual[dim];
    const allowed = base[dim] * factor;
    if (actual > allowed) {
      return {
        verdict: 'trip',
        reason: 'BLAST_RADIUS_EXCEEDED',
        detail: `${actual} ${dim} changed, over ${factor}× the ${base[dim]} ${baseName}`,
        suggestion: 'The change grew well beyond its plan: review why before it goes further, and re-plan if the scope really changed.',
        current: actual,
        threshold: allowed,
      };
    }
  }
  for (const dim of dims) {
    if (input.actual[dim] > base[dim]) {
      return {
        verdict: 'warn',
        reason: 'BLAST_RADIUS_WARNING',
        detail: `${input.actual[dim]} ${dim} changed, more than the ${base[dim]} ${baseName}`,
        suggestion: 'Within tolerance, but the prediction was low; reviewers should look at the extra changes.',
        current: input.actual[dim],
        threshold: base[dim] * factor,
      };
    }
  }
  return {
    verdict: 'ok',
    detail: `${input.actual.files} files / ${input.actual.lines} lines, within the ${base.files} / ${base.lines} ${baseName}`,
    suggestion: '',
    current: input.actual.lines,
    threshold: base.lines * factor,
  };
}

/**
 * Before any work: is the predicted change itself over the hard cap? Same boundaries as
 * `checkBlastRadius` (exactly at the cap passes).
 */
export function checkPredictedBlastRadius(predicted: ChangeSize, hardCap: ChangeSize = DEFAULT_BLAST_RADIUS_CAP): LimitCheck {
  for (const dim of ['files', 'lines'] as const) {
    if (predicted[dim] > hardCap[dim]) {
      return {
        verdict: 'trip',
        reason: 'BLAST_RADIUS_EXCEEDED',
        detail: `predicted ${predicted[dim]} ${dim}, over the hard cap of ${hardCap[dim]}`,
        suggestion: 'Split the intent before starting; the plan alone is larger than any single change may be.',
        current: predicted[dim],
        threshold: hardCap[dim],
      };
    }
  }
  return { verdict: 'ok', detail: `predicted ${predicted.files} files / ${predicted.lines} lines`, suggestion: '', current: predicted.lines, threshold: hardCap.lines };
}

// ─── Cooldown ──────────────────────────────────────────────────────────────────────────────────

/** Default pause between two dispatches of the same agent: 60 s caps a runaway loop at one call a minute. */
export const DEFAULT_COOLDOWN_MS = 60_000;

/** `checkCooldown`'s result; `waitMs` is how long until a dispatch is allowed (0 when it is). */
export interface CooldownCheck extends LimitCheck {
  readonly waitMs: number;
}

/**
 * May the agent be dispatched at `now`? Trips while less than `cooldownMs` has passed since
 * `lastDispatchAt` (exactly `cooldownMs` later passes). No previous dispatch, or a cooldown of
 * 0, always passes. A clock that went backwards never makes the wait longer than `cooldownMs`.
 */
export function checkCooldown(lastDispatchAt: number | undefined, now: number, cooldownMs: number = DEFAULT_COOLDOWN_MS): CooldownCheck {
  if (lastDispatchAt === undefined || cooldownMs <= 0) {
    return { verdict: 'ok', detail: 'no cooldown pending', suggestion: '', current: 0, threshold: Math.max(0, cooldownMs), waitMs: 0 };
  }
  const elapsed = now - lastDispatchAt;
  if (elapsed < cooldownMs) {
    const waitMs = Math.min(cooldownMs, cooldownMs - elapsed);
    return {
      verdict: 'trip',
      reason: 'COOLDOWN_ACTIVE',
      detail: `${Math.max(0, elapsed)} ms since the last dispatch, cooldown is ${cooldownMs} ms`,
      suggestion: `Wait ${waitMs} ms before dispatching this agent again.`,
      current: elapsed,
      threshold: cooldownMs,
      waitMs,
    };
  }
  return { verdict: 'ok', detail: `${elapsed} ms since the last dispatch`, suggestion: '', current: elapsed, threshold: cooldownMs, waitMs: 0 };
}

// ─── Time ──────────────────────────────────────────────────────────────────────────────────────

/**
 * Time limits per stage and for the whole intent, in ms: 30 min for each of triage, lld and spec;
 * 60 for implementation, its test runs included; 30 for review; 120 in all. Long enough for an
 * honest stage on a slow model, short enough that a stuck one is noticed within the working hour.
 * The default profile's `stageTimeLimits` and `totalTimeout` say the same.
 */
export const DEFAULT_TIME_LIMITS_MS: Readonly<Record<string, number>> = {
  triage: 30 * 60_000,
  lld: 30 * 60_000,
  spec: 30 * 60_000,
  impl: 60 * 60_000,
  review: 30 * 60_000,
  total: 120 * 60_000,
};

/**
 * Has `scope` (a stage, or the whole intent) run too long? Trips at `limitMs` elapsed (exactly
 * the limit trips), warns from `warnAt` (default 0.9) of it. `startedAt` and `now` come from
 * the workflow clock.
 */
export function checkTimeLimit(scope: string, startedAt: number, now: number, limitMs: number, warnAt = 0.9): LimitCheck {
  const elapsed = now - startedAt;
  if (elapsed >= limitMs) {
    return {
      verdict: 'trip',
      reason: 'TIME_LIMIT_EXCEEDED',
      detail: `${scope} has worked ${formatMs(elapsed)}, its limit is ${formatMs(limitMs)}`,
      suggestion: `Look at why ${scope} is slow (the agent's answers and test logs are in the lineage) before retrying; give it a longer limit only deliberately, or split the intent.`,
      current: elapsed,
      threshold: limitMs,
    };
  }
  if (elapsed >= limitMs * warnAt) {
    return {
      verdict: 'warn',
      reason: 'TIME_WARNING',
      detail: `${scope} has run ${elapsed} ms of ${limitMs} ms`,
      suggestion: `${limitMs - elapsed} ms left for ${scope}.`,
      current: elapsed,
      threshold: limitMs,
    };
  }
  return { verdict: 'ok', detail: `${scope} has run ${elapsed} ms of ${limitMs} ms`, suggestion: '', current: elapsed, threshold: limitMs };
}

/** `90 ms`, `12 min 5 s`, `2 h`: for people reading a limit. */
export function formatMs(ms: number): string {
  const seconds = Math.round(ms / 1000);
  if (seconds < 60) return ms < 1000 ? `${ms} ms` : `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return seconds % 60 ? `${minutes} min ${seconds % 60} s` : `${minutes} min`;
  return minutes % 60 ? `${Math.floor(minutes / 60)} h ${minutes % 60} min` : `${minutes / 60} h`;
}
