import { AsyncLocalStorage } from 'node:async_hooks';
import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import type { StageResult } from '../../../activities';
import { activityLogger } from '../../../activities/log-context';
import type { WorkerSafetyConfig } from '../../../config/schema';
import { SharedCircuitBreakers } from '../../../ledger/shared-circuits';
import type { SharedLimits } from '../../../ledger/shared-limits';
import { circuitEventOf } from '../../../safety/circuit-events';
import { circuitOptionsOf, CircuitBreakerRegistry, CircuitOpenError, type CircuitBreakerOptions, type CircuitBreakers, type CircuitState } from '../../../safety/circuit-breaker';
import { FailureType } from '../../../shared/errors';
import { countsAgainstEndpoint, MIN_RETRY_DELAY_MS, stoppedUnanswered } from '../failures';
import { StartedWork, type AgentCall, type SafetyLayer } from './safety-layer';

/** The longest wait for an endpoint's circuit inside one attempt (the default cool-down is 30 s). */
const MAX_CIRCUIT_WAIT_IN_ATTEMPT_MS = 60_000;

/**
 * One circuit per endpoint (kind, base URL, model). Before the call a circuit that admits nothing
 * is waited for within the attempt when the wait is short, otherwise the attempt fails with a
 * retryable CIRCUIT_OPEN whose `nextRetryDelay` is the wait. The call runs through the circuit;
 * each move to OPEN is a CIRCUIT_TRIPPED event, to HALF_OPEN a CIRCUIT_HALF_OPEN, to CLOSED a CIRCUIT_RESET. An agent
 * whose calls go through the model gateway is left to the gateway's circuits, call by call.
 * With `shared`, the circuits are every worker's (rows of the ledger's database): one opened by
 * any worker is open for all; its transitions are recorded by the worker that made them.
 */
export class CircuitLayer implements SafetyLayer {
  private readonly breakers: CircuitBreakers;
  /** The attempt whose call is running through a circuit: where its changes and its cancellation are. */
  private readonly running = new AsyncLocalStorage<AgentCall>();
  private readonly looks = new StartedWork<{ state: CircuitState; retryAfterMs: number }>();

  constructor(
    private readonly config: WorkerSafetyConfig['circuitBreaker'],
    private readonly logger: Logger,
    shared?: SharedLimits,
  ) {
    const options: CircuitBreakerOptions = {
      ...circuitOptionsOf(config),
      isFailure: (error) => countsAgainstEndpoint(error, this.running.getStore()?.ctx),
      isUnanswered: (error) => stoppedUnanswered(error, this.running.getStore()?.ctx),
      onStateChange: (change) => {
        const call = this.running.getStore();
        if (call) call.circuitChanges.push(change);
        else logger.warn({ circuit: change }, 'circuit changed outside an activity; not recorded');
      },
    };
    this.breakers = shared
      ? new SharedCircuitBreakers(shared.store, {
          ...options,
          scope: shared.scope,
          onRecordError: (error, endpoint) => activityLogger(logger).error({ err: error, endpoint }, 'could not record the agent call in its shared circuit'),
        })
      : new CircuitBreakerRegistry(options);
  }

  /** Reads the endpoint's circuit (unless a fresh CLOSED read is at hand) for `admit`. */
  look(call: AgentCall): void {
    if (!call.viaGateway) this.looks.start(call, () => this.read(call));
  }

  /**
   * Waits, heartbeating, while the endpoint's circuit admits no call, as long as the wait is
   * short (the cool-down, a probe interval) and fits in this attempt: a refused call would cost
   * the intent one of its few retry attempts, and a short outage would fail it within a minute.
   * A longer wait fails the attempt with CIRCUIT_OPEN and `nextRetryDelay` = the time until the
   * circuit admits a probe, so the next attempt comes no earlier than that.
   */
  async admit(call: AgentCall): Promise<void> {
    if (call.viaGateway) return;
    const { endpoint } = call.agent;
    let logged = false;
    for (let first = true; ; first = false) {
      const { state, retryAfterMs: waitMs } = await (first ? (this.looks.take(call) ?? this.read(call)) : this.read(call));
      if (state === 'CLOSED' || waitMs <= 0) return;
      if (waitMs > MAX_CIRCUIT_WAIT_IN_ATTEMPT_MS || Date.now() + waitMs > call.ref.deadlineMs || call.ctx.cancellationSignal.aborted) {
        throw circuitOpenFailure(new CircuitOpenError(endpoint, waitMs, state));
      }
      if (!logged) activityLogger(this.logger).info({ endpoint, circuit: state, waitMs }, 'circuit not admitting calls: waiting for it in this attempt');
      logged = true;
      call.ctx.heartbeat();
      await call.ctx.sleep(Math.min(waitMs, 2_000));
    }
  }

  private read(call: AgentCall): Promise<{ state: CircuitState; retryAfterMs: number }> {
    return call.patiently("read the endpoint's circuit", () => this.breakers.status(call.agent.endpoint));
  }

  around(call: AgentCall, run: () => Promise<unknown>): Promise<unknown> {
    if (call.viaGateway) return run();
    return this.running.run(call, () => this.breakers.execute(call.agent.endpoint, run));
  }

  /** Records the circuit's changes; a call the circuit refused fails the attempt with CIRCUIT_OPEN. */
  async failed(call: AgentCall, error: unknown): Promise<void> {
    await this.recordChanges(call);
    if (error instanceof CircuitOpenError) throw circuitOpenFailure(error);
  }

  async answered(call: AgentCall, _result: StageResult): Promise<void> {
    await this.recordChanges(call);
  }

  /** Records each move of the circuit the call made (see circuitEventOf). */
  private async recordChanges(call: AgentCall): Promise<void> {
    const log = activityLogger(this.logger);
    for (const change of call.circuitChanges) {
      const { type, severity, reason, breakerId, key, metadata } = circuitEventOf(change);
      if (change.to === 'OPEN') log.error({ circuit: metadata, endpoint: change.endpoint }, 'circuit opened');
      else log.info({ circuit: metadata, endpoint: change.endpoint }, change.to === 'CLOSED' ? 'circuit closed' : 'circuit half-open: probing');
      const suggestion =
        change.to === 'OPEN'
          ? `Calls to ${change.endpoint} fail fast until the cool-down (${this.config.halfOpenAfter}) ends and probes succeed; check the endpoint (or the agent's setup) meanwhile.`
          : undefined;
      await call.event(type, severity, reason, { breakerId, key, metadata, ...(suggestion ? { suggestion } : {}) });
    }
  }
}

function circuitOpenFailure(error: CircuitOpenError): ApplicationFailure {
  const waitMs = Math.max(MIN_RETRY_DELAY_MS, error.retryAfterMs);
  return ApplicationFailure.create({
    type: FailureType.CircuitOpen,
    message: `circuit for ${error.endpoint} is ${error.state}; retry in ${waitMs} ms`,
    nextRetryDelay: waitMs,
    details: [{ endpoint: error.endpoint, state: error.state, retryAfterMs: waitMs }],
  });
}
