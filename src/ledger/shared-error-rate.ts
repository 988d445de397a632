import { ErrorRateBreaker, type ErrorRateOptions, type ErrorRateState } from '../safety/error-rate';
import { judgeWindow, type ErrorRateJudgement, type ErrorRateLevel, type ErrorRateWindow } from '../safety/error-rate-window';
import { sharedLimitKey, type SharedLimitStore } from './shared-limits';

/** The row: the window's samples and the level the last judgement left it at. */
interface SharedWindowState extends ErrorRateState {
  readonly level: ErrorRateLevel;
}

/**
 * The agent-call error window of every worker of a scope: one row, its samples and its level.
 * Each judgement that records an outcome or moves the level locks it, records and judges at the
 * database's time, and stores both, so a change of level is seen (and announced) by exactly one
 * worker: the one whose step made it.
 */
export class SharedErrorRateWindow implements ErrorRateWindow {
  private readonly key: string;

  constructor(
    private readonly store: SharedLimitStore,
    private readonly options: ErrorRateOptions,
    scope: string,
  ) {
    this.key = sharedLimitKey(scope, 'error-rate', 'agent-calls');
  }

  /** The row read without a lock: one round trip (shared with the turn's other reads), no wait behind the other workers' calls. */
  async look(): Promise<ErrorRateJudgement> {
    const { now, states } = await this.store.read([this.key]);
    const saved = states.get(this.key) as SharedWindowState | undefined;
    return judgeWindow(new ErrorRateBreaker(this.options, saved), saved?.level ?? 'ok', now);
  }

  async judge(outcome?: { readonly ok: boolean }): Promise<ErrorRateJudgement> {
    if (outcome === undefined) {
      // A judgement that records nothing changes the row only when it moves the level: look
      // first, and take the lock only to make a move the look saw coming. The locked step judges again.
      const judgement = await this.look();
      if (judgement.from === judgement.to) return judgement;
    }
    return this.store.update([this.key], (states, now) => {
      const saved = states.get(this.key) as SharedWindowState | undefined;
      const breaker = new ErrorRateBreaker(this.options, saved);
      const judgement = judgeWindow(breaker, saved?.level ?? 'ok', now, outcome);
      const changed = outcome !== undefined || judgement.from !== judgement.to;
      const state: SharedWindowState = { ...breaker.toJSON(), level: judgement.to };
      return { result: judgement, ...(changed ? { write: new Map([[this.key, state]]) } : {}) };
    });
  }
}
