import type { Context } from '@temporalio/activity';
import type { ActivityExecuteInput, ActivityInterceptorsFactory } from '@temporalio/worker';
import type { Logger } from 'pino';
import type { StageInput, StageResult } from '../../activities';
import type { WorkerSafetyConfig } from '../../config/schema';
import type { Ledger } from '../../ledger/ledger';
import type { SharedLimits } from '../../ledger/shared-limits';
import type { ActivityOutcome } from '../../ledger/types';
import { agentForCall, callsThroughGateway } from '../../shared/agent-routing';
import { ActivityAudit, type RunFacts } from './activity-audit';
import { agentEndpoint } from './agent-endpoint';
import { describeCall, type CallRef } from './call-ref';
import { failureTypeOf } from './failures';
import { patientlyWithLedger, type KillSwitchOptions } from './ledger-patience';
import { eventRecorder } from './safety-events';
import { BehaviourLayer } from './safety-layers/behaviour';
import { CascadeLayer } from './safety-layers/cascade';
import { CircuitLayer } from './safety-layers/circuit';
import { CostLayer } from './safety-layers/cost';
import { ErrorRateLayer } from './safety-layers/error-rate';
import { KillSwitchLayer } from './safety-layers/kill-switch';
import { RateLimitLayer } from './safety-layers/rate-limit';
import type { AgentCall, LayerWith } from './safety-layers/safety-layer';

export { DEFAULT_EMERGENCY_STOP_FILE, type KillSwitchOptions } from './ledger-patience';

/** The activity the safety layers act on; every other activity is only audited. */
export const AGENT_ACTIVITY = 'runAgentStage';

/** What the agent-safety interceptor needs from its worker. */
export interface AgentSafetyDeps {
  readonly ledger: Ledger;
  readonly config: WorkerSafetyConfig;
  readonly logger: Logger;
  readonly killSwitch: KillSwitchOptions;
  /**
   * Where the rate buckets, circuits and error window are shared with the other workers (a
   * worker always gives it); without it they are this process's own, in memory.
   */
  readonly sharedLimits?: SharedLimits;
}

/**
 * The worker's agent-safety layers, around every activity (one instance per worker process).
 * Each layer is a module of its own (see `safety-layers/`); this interceptor only decides when
 * each one acts, in the order `AgentSafety`'s lists say:
 *
 * - `runAgentStage`, before the agent runs: kill switches → non-retryable KILL_SWITCH; the
 *   error-rate breaker at critical → retryable ERROR_RATE_CRITICAL; the endpoint's circuit (waited
 *   for when briefly OPEN) → retryable CIRCUIT_OPEN; per-agent and per-model token buckets →
 *   retryable RATE_LIMITED. Retryable failures carry `nextRetryDelay` = the wait. The stop
 *   flag, the error window and the circuit are read together first (one round trip), then
 *   judged in that order.
 * - While it runs, before each paid call: its maximum cost is reserved against the day's, the
 *   agent's, the intent's and the stage's budgets in one ledger transaction → non-retryable
 *   BUDGET_EXCEEDED (day, agent) or SAFETY_HALT (intent, stage) when one would be passed. After
 *   each call the reservation is settled at its real cost, whether the attempt then succeeds or not.
 * - After it: the circuit and the error rate count the outcome (one shared step for both) and
 *   their changes are recorded, then behaviour findings; calls counted at their declared cap are
 *   a COST_WARNING, a call over its cap halts; a cascade of LOW…HIGH is recorded, CRITICAL is
 *   recorded and halts. The paid calls of an attempt whose result the workflow will not get go
 *   to cost_events from here.
 * - Every activity: one `activity_runs` row per attempt (start, end, duration, outcome, spend).
 *
 * Every decision is one SafetyEvent whose id derives from workflow id, run id, activity id,
 * attempt and event type, so a repeated write adds nothing. While the ledger is unreachable the
 * attempt waits for it (heartbeating) until shortly before its start-to-close timeout.
 */
export function agentSafetyInterceptor(deps: AgentSafetyDeps): ActivityInterceptorsFactory {
  const safety = new AgentSafety(deps);
  return (ctx: Context) => ({
    inbound: {
      execute: (input, next) => safety.execute(ctx, input, next),
    },
  });
}

class AgentSafety {
  private readonly audit: ActivityAudit;
  /** Before the call, in this order; the first to throw refuses it and nothing after it runs. */
  private readonly admission: readonly LayerWith<'admit'>[];
  /**
   * Around the call, outermost first: the circuit sees the call with its meter inside; the error
   * window counts the outcome in the same turn as the circuit does (one shared step for both).
   */
  private readonly wrappers: readonly LayerWith<'around'>[];
  /** When the call failed, in this order; a layer that throws replaces the failure and ends the list. */
  private readonly onFailure: readonly LayerWith<'failed'>[];
  /** When the call answered, in this order; a layer that throws fails the attempt and ends the list. */
  private readonly onAnswer: readonly LayerWith<'answered'>[];
  /** When the attempt ends, however it ended. */
  private readonly closing: readonly LayerWith<'close'>[];

  constructor(private readonly deps: AgentSafetyDeps) {
    const { config, logger, ledger } = deps;
    const killSwitch = new KillSwitchLayer(deps);
    const errorRate = new ErrorRateLayer(config.errorRate, logger, deps.sharedLimits);
    const circuit = new CircuitLayer(config.circuitBreaker, logger, deps.sharedLimits);
    const rateLimit = new RateLimitLayer(config.rateLimits, deps.sharedLimits);
    const cost = new CostLayer(deps);
    const behaviour = new BehaviourLayer(ledger, logger);
    const cascade = new CascadeLayer(logger);
    this.audit = new ActivityAudit(deps);
    // The cheap refusals first, and nothing reserved or taken before the circuit has admitted the call.
    this.admission = [killSwitch, errorRate, circuit, rateLimit, cost, behaviour];
    this.wrappers = [circuit, errorRate, cost];
    // A call the circuit refused is not the agent's behaviour; a stop mid-run is recorded as such.
    // The error window's move (counted by its wrapper) is announced before a layer can end the list.
    this.onFailure = [circuit, errorRate, behaviour, killSwitch];
    // What happened to the endpoint first, then the answer judged: its cost, then its content.
    this.onAnswer = [circuit, errorRate, behaviour, rateLimit, cost, cascade];
    this.closing = [cost];
  }

  async execute(ctx: Context, input: ActivityExecuteInput, next: (input: ActivityExecuteInput) => Promise<unknown>): Promise<unknown> {
    const ref = describeCall(ctx, input.args);
    const facts: RunFacts = {};
    let outcome: ActivityOutcome = 'completed';
    let failureType: string | undefined;
    // The layers around the call read and write the ledger (budgets, shared limits): a ledger
    // that answers slowly or not at all must not cost the attempt its heartbeat.
    const beat = ref.activityType === AGENT_ACTIVITY ? setInterval(() => ctx.heartbeat(), 1_000) : undefined;
    try {
      if (ref.activityType !== AGENT_ACTIVITY) return await next(input);
      return await this.guardAgentCall(ctx, ref, input, next, facts);
    } catch (error) {
      outcome = ctx.cancellationSignal.aborted ? 'cancelled' : 'failed';
      failureType = failureTypeOf(error);
      throw error;
    } finally {
      try {
        await this.audit.record(ctx, ref, { outcome, failureType }, facts);
      } finally {
        clearInterval(beat);
      }
    }
  }

  private async guardAgentCall(
    ctx: Context,
    ref: CallRef,
    input: ActivityExecuteInput,
    next: (input: ActivityExecuteInput) => Promise<unknown>,
    facts: RunFacts,
  ): Promise<StageResult> {
    const stageInput = input.args[0] as StageInput;
    const profile = agentForCall(stageInput.intent, stageInput);
    const agent = await agentEndpoint(profile);
    facts.agent = agent;
    const call: AgentCall = {
      ctx,
      ref,
      input: stageInput,
      agent,
      viaGateway: callsThroughGateway(profile),
      event: eventRecorder(this.deps, ctx, ref, agent),
      patiently: (what, fn) => patientlyWithLedger(ctx, this.deps.logger, ref.deadlineMs, what, fn),
      circuitChanges: [],
      facts,
    };

    // Every layer's reads first, together (one round trip); then the judgements, in order.
    for (const layer of this.admission) layer.look?.(call);
    for (const layer of this.admission) await layer.admit(call);

    let delivered = false;
    try {
      const run = this.wrappers.reduceRight<() => Promise<unknown>>((inner, layer) => () => layer.around(call, inner), () => next(input));
      let result: StageResult;
      try {
        result = (await run()) as StageResult;
      } catch (error) {
        for (const layer of this.onFailure) await layer.failed(call, error);
        throw error;
      }
      for (const layer of this.onAnswer) result = (await layer.answered(call, result)) ?? result;
      // A result the workflow will not see (the attempt was cancelled or timed out meanwhile) is not its to record.
      delivered = resultReachesWorkflow(ctx);
      return result;
    } finally {
      for (const layer of this.closing) await layer.close(call, delivered);
    }
  }
}

/**
 * Whether a result returned now reaches the workflow: not when the attempt timed out, was
 * cancelled or its run is gone (the server refuses the completion); a worker shutting down still
 * reports it.
 */
function resultReachesWorkflow(ctx: Context): boolean {
  if (!ctx.cancellationSignal.aborted) return true;
  const reason: unknown = ctx.cancellationSignal.reason;
  return reason instanceof Error && reason.message === 'WORKER_SHUTDOWN';
}
