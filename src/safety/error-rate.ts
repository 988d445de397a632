/**
 * Sliding-window error-rate breaker: warning at 10 % errors, trip at 25 %, over a time window, once
 * enough calls were seen.
 *
 * Workflow-safe: pure, no Node built-ins, no clocks (times are passed in), state is plain data.
 *
 * Our own code because the libraries that keep rolling error statistics own their clock: opossum's
 * rolling window turns over on an interval timer, and cockatiel's SamplingBreaker reads the system
 * clock and only answers "open or not", with no warning level.
 */
import type { LimitCheck } from './limits';

/** Configuration; every field has a default. */
export interface ErrorRateOptions {
  /** Length of the sliding window in ms (default 5 min). */
  readonly windowMs?: number;
  /** Error fraction that warns (default 0.10). */
  readonly warningRate?: number;
  /** Error fraction that trips (default 0.25). */
  readonly criticalRate?: number;
  /** Calls needed in the window before any verdict other than ok (default 10). */
  readonly minCalls?: number;
}

/**
 * Calls counted together: those of one slice of the window (`at` is the slice's start), or one
 * call of the newest slice (`at` is its own time, `calls` 1).
 */
export interface ErrorRateCount {
  readonly at: number;
  readonly calls: number;
  readonly errors: number;
}

/** Serialisable state: plain data, for a row of the shared limits or a test. */
export interface ErrorRateState {
  readonly counts: readonly ErrorRateCount[];
}

/** A state as earlier versions kept it, each call on its own: still read. */
export interface SampledErrorRateState {
  readonly samples: ReadonlyArray<{ readonly at: number; readonly ok: boolean }>;
}

/** `check`'s result: a `LimitCheck` (current/threshold are rates) plus the raw counts. */
export interface ErrorRateCheck extends Omit<LimitCheck, 'reason'> {
  readonly reason?: 'ERROR_RATE_WARNING' | 'ERROR_RATE_CRITICAL';
  readonly calls: number;
  readonly errors: number;
  readonly rate: number;
}

/**
 * Slices per window. The calls of one slice are counted together once a newer slice has calls,
 * so the state holds at most this many counts and the newest slice's calls, however many calls
 * the window saw: a shared window is read and written whole on every agent call.
 */
const SLICES = 60;

const PPM = 1_000_000;

/**
 * Records call outcomes with their time and judges the error rate over the last `windowMs`.
 * A call at time t counts at `now` when `now - windowMs < t <= now`, but for this: once a newer
 * slice of the window (a 60th) has calls, t is taken to be its slice's start, so a call may leave
 * the window up to a slice early. Rates are compared exactly (integer parts per million), so
 * 25 % of 20 calls trips at the 5th error, not the 6th.
 */
export class ErrorRateBreaker {
  private readonly windowMs: number;
  private readonly sliceMs: number;
  private readonly warningPpm: number;
  private readonly criticalPpm: number;
  private readonly minCalls: number;
  /** Oldest first. */
  private counts: ErrorRateCount[];

  constructor(options: ErrorRateOptions = {}, state?: ErrorRateState | SampledErrorRateState) {
    this.windowMs = options.windowMs ?? 5 * 60_000;
    this.sliceMs = Math.max(1, Math.ceil(this.windowMs / SLICES));
    this.warningPpm = Math.round((options.warningRate ?? 0.1) * PPM);
    this.criticalPpm = Math.round((options.criticalRate ?? 0.25) * PPM);
    this.minCalls = options.minCalls ?? 10;
    this.counts = [];
    if (state && 'samples' in state) for (const s of state.samples) this.record(s.at, s.ok);
    else if (state) this.counts = state.counts.map((c) => ({ ...c }));
  }

  /** Records one call that ended at `at`; `ok` false for an error. */
  record(at: number, ok: boolean): void {
    this.counts.push({ at, calls: 1, errors: ok ? 0 : 1 });
    this.counts.sort((a, b) => a.at - b.at);
    const newest = this.counts[this.counts.length - 1]!.at;
    const newestSlice = this.sliceOf(newest);
    // Out of every future window: gone. Older slices than the newest: one count each.
    const kept = new Map<number, { calls: number; errors: number }>();
    const recent: ErrorRateCount[] = [];
    for (const count of this.counts) {
      if (count.at <= newest - this.windowMs) continue;
      const slice = this.sliceOf(count.at);
      if (slice === newestSlice) {
        recent.push(count);
        continue;
      }
      const start = slice * this.sliceMs;
      const sum = kept.get(start) ?? { calls: 0, errors: 0 };
      sum.calls += count.calls;
      sum.errors += count.errors;
      kept.set(start, sum);
    }
    this.counts = [...[...kept].map(([start, sum]) => ({ at: start, ...sum })), ...recent];
  }

  /** The verdict at `at`: trip at ≥ criticalRate, warn at ≥ warningRate, ok below minCalls. */
  check(at: number): ErrorRateCheck {
    const inWindow = this.counts.filter((c) => c.at <= at && at - c.at < this.windowMs);
    const calls = inWindow.reduce((sum, c) => sum + c.calls, 0);
    const errors = inWindow.reduce((sum, c) => sum + c.errors, 0);
    const rate = calls === 0 ? 0 : errors / calls;
    const counts = { calls, errors, rate, current: rate };
    const window = `${errors}/${calls} calls failed in the last ${this.windowMs} ms`;
    const verdict = this.verdictOf(calls, errors);

    if (calls < this.minCalls) {
      return { ...counts, verdict: 'ok', detail: `${window}; fewer than ${this.minCalls} calls, no verdict yet`, suggestion: '', threshold: this.criticalPpm / PPM };
    }
    if (verdict === 'trip') {
      return {
        ...counts,
        verdict: 'trip',
        reason: 'ERROR_RATE_CRITICAL',
        detail: `${window} (${pct(rate)} ≥ ${pct(this.criticalPpm / PPM)})`,
        suggestion: 'Halt: most likely a broken dependency or a bad change, not bad luck. Look at the errors before resuming.',
        threshold: this.criticalPpm / PPM,
      };
    }
    if (verdict === 'warn') {
      return {
        ...counts,
        verdict: 'warn',
        reason: 'ERROR_RATE_WARNING',
        detail: `${window} (${pct(rate)} ≥ ${pct(this.warningPpm / PPM)})`,
        suggestion: 'Error rate above normal; watch it, and check the failing calls.',
        threshold: this.warningPpm / PPM,
      };
    }
    return { ...counts, verdict: 'ok', detail: window, suggestion: '', threshold: this.warningPpm / PPM };
  }

  /**
   * How long after `now` the verdict stops being a trip if no call is recorded meanwhile: when
   * enough counts have left the window (0 when it is not a trip now; a whole window if no exit
   * is enough).
   */
  untilBelowCritical(now: number): number {
    if (this.check(now).verdict !== 'trip') return 0;
    // The verdict changes only when a count leaves the window. Walk the exits in time order (the
    // counts are kept in it) with the window's sums kept up to date as counts enter and leave.
    const exits = this.counts.map((c) => c.at + this.windowMs).filter((t) => t > now);
    let entered = 0;
    let left = 0;
    let calls = 0;
    let errors = 0;
    for (const t of exits) {
      // In the window at t: t - windowMs < at <= t.
      for (; entered < this.counts.length && this.counts[entered]!.at <= t; entered++) {
        calls += this.counts[entered]!.calls;
        errors += this.counts[entered]!.errors;
      }
      for (; left < entered && this.counts[left]!.at <= t - this.windowMs; left++) {
        calls -= this.counts[left]!.calls;
        errors -= this.counts[left]!.errors;
      }
      if (this.verdictOf(calls, errors) !== 'trip') return t - now;
    }
    return this.windowMs;
  }

  /** The verdict for `errors` of `calls` in the window. */
  private verdictOf(calls: number, errors: number): ErrorRateCheck['verdict'] {
    if (calls < this.minCalls) return 'ok';
    if (errors * PPM >= calls * this.criticalPpm) return 'trip';
    if (errors * PPM >= calls * this.warningPpm) return 'warn';
    return 'ok';
  }

  /** Plain-data copy of the state. */
  toJSON(): ErrorRateState {
    return { counts: this.counts.map((c) => ({ ...c })) };
  }

  private sliceOf(at: number): number {
    return Math.floor(at / this.sliceMs);
  }
}

function pct(rate: number): string {
  return `${(rate * 100).toFixed(1)}%`;
}
