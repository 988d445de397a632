import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import type { StageResult } from '../../../activities';
import { activityLogger } from '../../../activities/log-context';
import type { WorkerSafetyConfig } from '../../../config/schema';
import type { SharedLimits } from '../../../ledger/shared-limits';
import { SharedErrorRateWindow } from '../../../ledger/shared-error-rate';
import { LocalErrorRateWindow, type ErrorRateJudgement, type ErrorRateWindow } from '../../../safety/error-rate-window';
import { parseDuration } from '../../../shared/duration';
import { FailureType } from '../../../shared/errors';
import { countsAgainstEndpoint, MIN_RETRY_DELAY_MS } from '../failures';
import { StartedWork, type AgentCall, type SafetyLayer } from './safety-layer';

/**
 * The error rate across this worker's agent calls (with `shared`: across every worker's, one
 * window in the ledger's database). Every answer and every failure that says an endpoint is
 * unhealthy is counted; entering warning or critical is one ANOMALY_DETECTED event each time,
 * leaving critical one CIRCUIT_RESET, recorded by the worker whose judgement made the change.
 * While it is critical, new agent calls fail fast with a retryable ERROR_RATE_CRITICAL whose
 * `nextRetryDelay` is the time until it drops.
 */
export class ErrorRateLayer implements SafetyLayer {
  private readonly window: ErrorRateWindow;
  /** Each running call's outcome, counted by `around` and announced by `answered` or `failed`. */
  private readonly counted = new StartedWork<ErrorRateJudgement>();
  private readonly looks = new StartedWork<ErrorRateJudgement>();

  constructor(
    config: WorkerSafetyConfig['errorRate'],
    private readonly logger: Logger,
    shared?: SharedLimits,
  ) {
    const options = { windowMs: parseDuration(config.window), warningRate: config.warning, criticalRate: config.critical, minCalls: config.minimumCalls };
    this.window = shared ? new SharedErrorRateWindow(shared.store, options, shared.scope) : new LocalErrorRateWindow(options);
  }

  look(call: AgentCall): void {
    this.looks.start(call, () => this.read(call));
  }

  async admit(call: AgentCall): Promise<void> {
    const seen = await (this.looks.take(call) ?? this.read(call));
    // Only a move of level takes the row's lock (and is judged again under it).
    const judged = seen.from === seen.to ? seen : await call.patiently('judge the error-rate window', () => this.window.judge());
    await this.announce(call, judged);
    if (judged.to !== 'trip') return;
    throw ApplicationFailure.create({
      type: FailureType.ErrorRateCritical,
      message: `agent-call error rate is critical (${judged.check.detail}); retry in ${judged.retryAfterMs} ms`,
      nextRetryDelay: Math.max(MIN_RETRY_DELAY_MS, judged.retryAfterMs),
    });
  }

  private read(call: AgentCall): Promise<ErrorRateJudgement> {
    return call.patiently('read the error-rate window', () => this.window.look());
  }

  /**
   * Counts the call's outcome the moment it is known, in the same turn as its circuit counts it
   * (the circuit's wrapper is outside this one), so the two shared steps go in one transaction
   * (see SharedLimitStore.update). An answer counts as healthy whatever the layers after it
   * make of its content; a failure counts only when it says the endpoint is unhealthy.
   */
  async around(call: AgentCall, run: () => Promise<unknown>): Promise<unknown> {
    let result: unknown;
    try {
      result = await run();
    } catch (error) {
      if (countsAgainstEndpoint(error, call.ctx)) this.count(call, { ok: false });
      throw error;
    }
    this.count(call, { ok: true });
    return result;
  }

  async failed(call: AgentCall): Promise<void> {
    await this.announceCounted(call);
  }

  async answered(call: AgentCall, _result: StageResult): Promise<void> {
    await this.announceCounted(call);
  }

  /** Counts the outcome: its step goes now, its judgement is announced by `answered` or `failed`. */
  private count(call: AgentCall, outcome: { ok: boolean }): void {
    this.counted.start(call, () => call.patiently(outcome.ok ? 'count an answered call' : 'count a failed call', () => this.window.judge(outcome)));
  }

  private async announceCounted(call: AgentCall): Promise<void> {
    const counted = this.counted.take(call);
    if (counted !== undefined) await this.announce(call, await counted);
  }

  /** Records a change of level this judgement made: warning and critical once each time they are entered. */
  private async announce(call: AgentCall, judged: ErrorRateJudgement): Promise<void> {
    const { check, from, to } = judged;
    if (from === to) return;
    const key = `error-rate:${from}->${to}`;
    const metadata = { calls: check.calls, errors: check.errors, rate: check.rate, from, to };
    const log = activityLogger(this.logger);
    if (to === 'trip') {
      log.error({ errorRate: metadata }, 'agent-call error rate is critical: new agent calls fail fast');
      await call.event('ANOMALY_DETECTED', 'critical', `error rate critical: ${check.detail}; new agent calls fail fast until it drops`, {
        breakerId: 'error-rate',
        key,
        suggestion: check.suggestion,
        metadata: { ...metadata, pattern: 'ERROR_RATE_CRITICAL' },
      });
    } else if (from === 'trip') {
      log.info({ errorRate: metadata }, 'agent-call error rate is below critical again');
      await call.event('CIRCUIT_RESET', 'info', `error rate no longer critical: ${check.detail}`, { breakerId: 'error-rate', key, metadata });
    } else if (to === 'warn') {
      log.warn({ errorRate: metadata }, 'agent-call error rate above warning');
      await call.event('ANOMALY_DETECTED', 'medium', `error rate warning: ${check.detail}`, {
        breakerId: 'error-rate',
        key,
        suggestion: check.suggestion,
        metadata: { ...metadata, pattern: 'ERROR_RATE_WARNING' },
      });
    }
  }
}
