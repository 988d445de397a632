/**
 * The error-rate window the agent-safety layer judges calls by, with its level (ok, warn, trip):
 * this process's (LocalErrorRateWindow, at `Date.now()`) or one every worker shares at the
 * database's clock (src/ledger/shared-error-rate.ts). Both apply ErrorRateBreaker's arithmetic.
 *
 * NOT workflow-safe: reads `Date.now()`.
 */
import { ErrorRateBreaker, type ErrorRateCheck, type ErrorRateOptions } from './error-rate';

export type ErrorRateLevel = ErrorRateCheck['verdict'];

/** One judgement: the window's check, the level before and after it, and the wait while it trips. */
export interface ErrorRateJudgement {
  readonly check: ErrorRateCheck;
  /** The level before this judgement; `from !== to` is a change this caller made, and announces. */
  readonly from: ErrorRateLevel;
  readonly to: ErrorRateLevel;
  /** While `to` is a trip: how long until it drops with no new calls; otherwise 0. */
  readonly retryAfterMs: number;
}

export interface ErrorRateWindow {
  /** Records a call's outcome (when given: `ok` false for an error), then judges the window. */
  judge(outcome?: { readonly ok: boolean }): Promise<ErrorRateJudgement>;
  /**
   * The judgement the window would make now, recording and moving nothing: `from !== to` says a
   * `judge()` would move the level (and that caller would announce it).
   */
  look(): Promise<ErrorRateJudgement>;
}

/** Judges `breaker` at `now` after recording `outcome`, moving the level from `from`: the step both windows take. */
export function judgeWindow(breaker: ErrorRateBreaker, from: ErrorRateLevel, now: number, outcome?: { readonly ok: boolean }): ErrorRateJudgement {
  if (outcome) breaker.record(now, outcome.ok);
  const check = breaker.check(now);
  return { check, from, to: check.verdict, retryAfterMs: check.verdict === 'trip' ? breaker.untilBelowCritical(now) : 0 };
}

/** One process's window. */
export class LocalErrorRateWindow implements ErrorRateWindow {
  private readonly breaker: ErrorRateBreaker;
  private level: ErrorRateLevel = 'ok';

  constructor(options: ErrorRateOptions) {
    this.breaker = new ErrorRateBreaker(options);
  }

  async judge(outcome?: { readonly ok: boolean }): Promise<ErrorRateJudgement> {
    const judgement = judgeWindow(this.breaker, this.level, Date.now(), outcome);
    this.level = judgement.to;
    return judgement;
  }

  async look(): Promise<ErrorRateJudgement> {
    return judgeWindow(this.breaker, this.level, Date.now());
  }
}
