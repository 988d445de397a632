import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import type { StageResult } from '../../../activities';
import { activityLogger } from '../../../activities/log-context';
import type { WorkerSafetyConfig } from '../../../config/schema';
import { ErrorRateBreaker, type ErrorRateCheck } from '../../../safety/error-rate';
import { parseDuration } from '../../../shared/duration';
import { FailureType } from '../../../shared/errors';
import { countsAgainstEndpoint, MIN_RETRY_DELAY_MS } from '../failures';
import type { AgentCall, SafetyLayer } from './safety-layer';

/**
 * The error rate across this worker's agent calls. Every answer and every failure that says an
 * endpoint is unhealthy is counted; entering warning or critical is one ANOMALY_DETECTED event
 * each time, leaving critical one CIRCUIT_RESET. While it is critical, new agent calls fail fast
 * with a retryable ERROR_RATE_CRITICAL whose `nextRetryDelay` is the time until it drops.
 */
export class ErrorRateLayer implements SafetyLayer {
  private readonly breaker: ErrorRateBreaker;
  private readonly windowMs: number;
  private level: ErrorRateCheck['verdict'] = 'ok';

  constructor(
    config: WorkerSafetyConfig['errorRate'],
    private readonly logger: Logger,
  ) {
    this.windowMs = parseDuration(config.window);
    this.breaker = new ErrorRateBreaker({ windowMs: this.windowMs, warningRate: config.warning, criticalRate: config.critical, minCalls: config.minimumCalls });
  }

  async admit(call: AgentCall): Promise<void> {
    await this.judge(call);
    if (this.level !== 'trip') return;
    const waitMs = this.waitMs(Date.now());
    throw ApplicationFailure.create({
      type: FailureType.ErrorRateCritical,
      message: `agent-call error rate is critical (${this.breaker.check(Date.now()).detail}); retry in ${waitMs} ms`,
      nextRetryDelay: Math.max(MIN_RETRY_DELAY_MS, waitMs),
    });
  }

  async failed(call: AgentCall, error: unknown): Promise<void> {
    if (!countsAgainstEndpoint(error, call.ctx)) return;
    this.breaker.record(Date.now(), false);
    await this.judge(call);
  }

  async answered(call: AgentCall, _result: StageResult): Promise<void> {
    this.breaker.record(Date.now(), true);
    await this.judge(call);
  }

  /** Re-judges the error rate and records a change of level: warning and critical once each time they are entered. */
  private async judge(call: AgentCall): Promise<void> {
    const check = this.breaker.check(Date.now());
    const from = this.level;
    const to = check.verdict;
    if (from === to) return;
    this.level = to;
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

  /** How long until the error rate drops below critical with no new calls: when enough errors have left the window. */
  private waitMs(now: number): number {
    const exits = this.breaker
      .toJSON()
      .samples.map((s) => s.at + this.windowMs)
      .filter((t) => t > now)
      .sort((a, b) => a - b);
    const drop = exits.find((t) => this.breaker.check(t).verdict !== 'trip');
    return (drop ?? now + this.windowMs) - now;
  }
}
