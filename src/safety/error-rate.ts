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
  /** Samples kept at most, oldest dropped first, so memory stays bounded (default 10 000). */
  readonly maxSamples?: number;
}

/** One recorded call. */
export interface ErrorRateSample {
  readonly at: number;
  readonly ok: boolean;
}

/** Serialisable state: keep it in workflow state or pass it to `continueAsNew`. */
export interface ErrorRateState {
  readonly samples: readonly ErrorRateSample[];
}

/** `check`'s result: a `LimitCheck` (current/threshold are rates) plus the raw counts. */
export interface ErrorRateCheck extends Omit<LimitCheck, 'reason'> {
  readonly reason?: 'ERROR_RATE_WARNING' | 'ERROR_RATE_CRITICAL';
  readonly calls: number;
  readonly errors: number;
  readonly rate: number;
}

const PPM = 1_000_000;

/**
 * Records call outcomes with their time and judges the error rate over the last `windowMs`.
 * A call at time t counts at `now` when `now - windowMs < t <= now`. Rates are compared exactly
 * (integer parts per million), so 25 % of 20 calls trips at the 5th error, not the 6th.
 */
export class ErrorRateBreaker {
  private readonly windowMs: number;
  private readonly warningPpm: number;
  private readonly criticalPpm: number;
  private readonly minCalls: number;
  private readonly maxSamples: number;
  private samples: ErrorRateSample[];

  constructor(options: ErrorRateOptions = {}, state?: ErrorRateState) {
    this.windowMs = options.windowMs ?? 5 * 60_000;
    this.warningPpm = Math.round((options.warningRate ?? 0.1) * PPM);
    this.criticalPpm = Math.round((options.criticalRate ?? 0.25) * PPM);
    this.minCalls = options.minCalls ?? 10;
    this.maxSamples = options.maxSamples ?? 10_000;
    this.samples = state ? state.samples.map((s) => ({ at: s.at, ok: s.ok })) : [];
  }

  /** Records one call that ended at `at`; `ok` false for an error. */
  record(at: number, ok: boolean): void {
    this.samples.push({ at, ok });
    // Out-of-order records are kept; pruning only drops what is out of every future window.
    const newest = this.samples.reduce((max, s) => Math.max(max, s.at), at);
    this.prune(newest);
    if (this.samples.length > this.maxSamples) this.samples.splice(0, this.samples.length - this.maxSamples);
  }

  /** The verdict at `at`: trip at ≥ criticalRate, warn at ≥ warningRate, ok below minCalls. */
  check(at: number): ErrorRateCheck {
    const inWindow = this.samples.filter((s) => s.at <= at && at - s.at < this.windowMs);
    const calls = inWindow.length;
    const errors = inWindow.filter((s) => !s.ok).length;
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
   * enough samples have left the window (0 when it is not a trip now; a whole window if no exit
   * is enough).
   */
  untilBelowCritical(now: number): number {
    if (this.check(now).verdict !== 'trip') return 0;
    // The verdict changes only when a sample leaves the window. Walk the exits in time order
    // with the window's counts kept up to date as samples enter and leave it: one sort, where a
    // whole check per exit took 1.3 s of CPU at 10,000 samples.
    const byTime = [...this.samples].sort((a, b) => a.at - b.at);
    const exits = byTime.map((s) => s.at + this.windowMs).filter((t) => t > now);
    let entered = 0;
    let left = 0;
    let calls = 0;
    let errors = 0;
    for (const t of exits) {
      // In the window at t: t - windowMs < at <= t.
      for (; entered < byTime.length && byTime[entered]!.at <= t; entered++) {
        calls += 1;
        if (!byTime[entered]!.ok) errors += 1;
      }
      for (; left < entered && byTime[left]!.at <= t - this.windowMs; left++) {
        calls -= 1;
        if (!byTime[left]!.ok) errors -= 1;
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

  /** Plain-data copy of the state, for workflow state or `continueAsNew`. */
  toJSON(): ErrorRateState {
    return { samples: this.samples.map((s) => ({ at: s.at, ok: s.ok })) };
  }

  private prune(now: number): void {
    const horizon = now - this.windowMs;
    if (this.samples.length && this.samples.some((s) => s.at <= horizon)) {
      this.samples = this.samples.filter((s) => s.at > horizon);
    }
  }
}

function pct(rate: number): string {
  return `${(rate * 100).toFixed(1)}%`;
}
