import { AsyncLocalStorage } from 'node:async_hooks';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { ActivityExecuteInput, ActivityInterceptorsFactory } from '@temporalio/worker';
import type { Logger } from 'pino';
import type { StageInput, StageResult } from '../../activities';
import { activityLogger } from '../../activities/log-context';
import { SpendMeter, withSpendMeter, type BudgetBook, type OpenCall } from '../../activities/agents';
import type { IntentLimitsConfig, WorkerSafetyConfig } from '../../config/schema';
import { deterministicUuid } from '../../ledger/event-id';
import type { Ledger } from '../../ledger/ledger';
import { killSwitchOn, ledgerDeadlineOf, patientlyWithLedger } from './ledger-patience';
import type { ActivityOutcome, SafetyEventInput } from '../../ledger/types';
import type { SafetyEventType, Severity } from '../../shared/safety-events';
import { CircuitBreakerRegistry, CircuitOpenError, NOT_ENDPOINT_FAILURES, endpointKey, type CircuitStateChange } from '../../safety/circuit-breaker';
import { BehaviourWatch, recentAgentRuns } from '../../safety/behaviour-watch';
import type { Finding } from '../../safety/behaviour-monitor';
import { ErrorRateBreaker, type ErrorRateCheck } from '../../safety/error-rate';
import { addUsd, compareUsd, normalizeUsd, ZERO_USD } from '../../shared/money';
import { RateLimiter } from '../../safety/token-bucket';
import { parseDuration } from '../../shared/duration';
import { FailureType } from '../../shared/errors';
import { agentForStage, agentIdOf } from '../../shared/agent-routing';
import type { AgentProfile } from '../../shared/intent';
import { baseUrlOf } from '../../activities/agents/model-http';

/** The activity the safety layers act on; every other activity is only audited. */
export const AGENT_ACTIVITY = 'runAgentStage';

/** Where the emergency stop file lives when the worker is not told otherwise. */
export const DEFAULT_EMERGENCY_STOP_FILE = path.join('.warden', 'EMERGENCY_STOP');

/** The kill switches a worker obeys besides the ledger's global stop flag. */
export interface KillSwitchOptions {
  /** False when WARDEN_ENABLED=false: the worker starts no agent work at all. */
  readonly enabled: boolean;
  /** While this file exists, the worker starts no agent work. */
  readonly emergencyStopFile: string;
}

export interface AgentSafetyDeps {
  readonly ledger: Ledger;
  readonly config: WorkerSafetyConfig;
  readonly logger: Logger;
  readonly killSwitch: KillSwitchOptions;
}

/** Which agent, model and endpoint an agent call goes to. */
export interface AgentEndpoint {
  /** As cost events name it: the agent profile's kind. */
  readonly agentId: string;
  readonly modelId: string;
  /** The circuit breaker's key. */
  readonly endpoint: string;
}

/** The largest amount the ledger stores: the "limit" of an unlimited day budget. */
const UNLIMITED_USD = '99999999.999999';
/** Temporal reads a zero nextRetryDelay as "use the retry policy"; never ask for less than this. */
const MIN_RETRY_DELAY_MS = 1_000;
/** The longest wait for an endpoint's circuit inside one attempt (the default cool-down is 30 s). */
const MAX_CIRCUIT_WAIT_IN_ATTEMPT_MS = 60_000;

const CASCADE_SEVERITY = { LOW: 'low', MEDIUM: 'medium', HIGH: 'high', CRITICAL: 'critical' } as const satisfies Record<string, Severity>;
const CASCADE_SUGGESTION = {
  LOW: 'Nothing to do now; a pattern of these from one agent is worth a look.',
  MEDIUM: "Read the stage's artifact before approving the next gate.",
  HIGH: 'A human must decide the next gate: do not auto-approve it. Read the artifact and check the work stays within the intent.',
  CRITICAL: 'The intent was halted. Read the artifact, then rewind or restart the intent with a narrower prompt.',
} as const;

/** One activity attempt, as the ledger's keys and the logs name it. */
interface CallRef {
  readonly workflowId: string;
  readonly runId: string;
  readonly activityId: string;
  readonly attempt: number;
  readonly activityType: string;
  readonly taskQueue: string;
  readonly intentId?: string;
  readonly stage?: string;
  /** `Date.now()` when the attempt reached this interceptor. */
  readonly startedMs: number;
  /** When to stop waiting for an unreachable ledger. */
  readonly deadlineMs: number;
}

/** What the audit row of an agent call learns while the call runs. */
interface RunFacts {
  agent?: AgentEndpoint;
  spendUsd?: string;
}

/** The activity a circuit transition happened in (see `CircuitBreakerRegistry`'s onStateChange). */
interface CallScope {
  readonly ctx: Context;
  readonly transitions: CircuitStateChange[];
}

type EventDetails = {
  readonly suggestion?: string;
  readonly breakerId?: string;
  readonly costSnapshot?: CostSnapshot;
  readonly metadata?: Record<string, unknown>;
  /** Tells apart two events of one type in one attempt (e.g. two breakers resetting). */
  readonly key?: string;
};
type CostSnapshot = NonNullable<SafetyEventInput['costSnapshot']>;

/**
 * The worker's agent-safety layers, around every activity (one instance per worker process):
 *
 * - `runAgentStage` only, before the agent runs, in this order: kill switches (WARDEN_ENABLED,
 *   the emergency stop file, the ledger's global stop flag) → non-retryable KILL_SWITCH; the
 *   error-rate breaker at critical → retryable ERROR_RATE_CRITICAL; the endpoint's circuit OPEN →
 *   retryable CIRCUIT_OPEN; per-agent and per-model token buckets → retryable RATE_LIMITED.
 *   Retryable failures carry `nextRetryDelay` = the wait.
 * - While it runs, before each paid call: its maximum cost is reserved against the day's, the
 *   agent's, the intent's and the stage's budgets in one ledger transaction → non-retryable
 *   BUDGET_EXCEEDED (day, agent) or SAFETY_HALT (intent, stage) when one would be passed. After
 *   each call the reservation is settled at its real cost, whether the attempt then succeeds or not.
 * - After it: calls counted at their declared cap (no usage reported) are a COST_WARNING, a call
 *   over its declared cap halts; a cascade of LOW…HIGH is recorded, CRITICAL is recorded and
 *   halts (SAFETY_HALTs without details: their event is already written). The paid calls of an
 *   attempt whose result the workflow will not get go to cost_events from here.
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

/**
 * The SafetyEvent id of a decision taken in one activity attempt: a version-8 UUID made from a
 * sha256 of its inputs, so the same decision always gets the same id.
 */
export function safetyEventId(
  call: { readonly workflowId: string; readonly runId: string; readonly activityId: string; readonly attempt: number },
  eventType: SafetyEventType,
  key = '',
): string {
  return deterministicUuid(call.workflowId, call.runId, call.activityId, call.attempt, eventType, key);
}

/**
 * The agent, model and endpoint of a profile. A scripted agent's model is its script's `model`
 * (each script is an endpoint of its own); a command agent's endpoint is its program.
 */
export async function agentEndpoint(agent: AgentProfile): Promise<AgentEndpoint> {
  // A named profile is an agent of its own: its own rate limits and day budget.
  const agentId = agentIdOf(agent);
  const declared = (agent as { model?: unknown }).model;
  if (typeof declared === 'string' && declared) {
    const baseUrl = agent.kind === 'anthropic' || agent.kind === 'openai' ? baseUrlOf(agent) : undefined;
    return { agentId, modelId: declared, endpoint: endpointKey({ kind: agent.kind, baseUrl, model: declared }) };
  }
  if (agent.kind === 'scripted') {
    const model = await readScriptModel(agent.scriptPath);
    return { agentId, modelId: model, endpoint: `scripted/${model}` };
  }
  if (agent.kind === 'command') {
    const program = path.basename(agent.command.trim().split(/\s+/)[0] ?? 'command');
    return { agentId, modelId: agent.kind, endpoint: `command/${program}` };
  }
  return { agentId, modelId: agent.kind, endpoint: agent.kind };
}

async function readScriptModel(scriptPath: string): Promise<string> {
  try {
    const model = (JSON.parse(await readFile(scriptPath, 'utf8')) as { model?: unknown }).model;
    return typeof model === 'string' && model ? model : 'scripted';
  } catch {
    // The agent itself reports a bad script, as a non-retryable failure.
    return 'scripted';
  }
}

class AgentSafety {
  private readonly scope = new AsyncLocalStorage<CallScope>();
  private readonly breakers: CircuitBreakerRegistry;
  private readonly errorRate: ErrorRateBreaker;
  private errorRateLevel: ErrorRateCheck['verdict'] = 'ok';
  private readonly limiter: RateLimiter;
  /** Tokens used by past calls, charged to the buckets at the next call of the same agent and model. */
  private readonly tokenDebt = new Map<string, number>();
  private readonly tokenCapacity: number;
  private readonly stopFile: string;
  /** The behaviour monitor over every agent call of this worker; baselines seeded from the ledger. */
  private readonly behaviour: BehaviourWatch;

  constructor(private readonly deps: AgentSafetyDeps) {
    this.behaviour = new BehaviourWatch(() => recentAgentRuns(deps.ledger.pool));
    const { circuitBreaker, errorRate, rateLimits } = deps.config;
    this.breakers = new CircuitBreakerRegistry({
      errorRateThreshold: circuitBreaker.failureRate,
      minimumCalls: circuitBreaker.minimumCalls,
      consecutiveFailures: circuitBreaker.consecutiveFailures,
      windowMs: Math.max(1_000, parseDuration(circuitBreaker.window)),
      coolDownMs: parseDuration(circuitBreaker.halfOpenAfter),
      probes: circuitBreaker.probes,
      probeIntervalMs: parseDuration(circuitBreaker.probeInterval),
      isFailure: (error) => this.countsAgainstEndpoint(error, this.scope.getStore()?.ctx),
      onStateChange: (change) => {
        const scope = this.scope.getStore();
        if (scope) scope.transitions.push(change);
        else deps.logger.warn({ circuit: change }, 'circuit changed outside an activity; not recorded');
      },
    });
    this.errorRate = new ErrorRateBreaker({
      windowMs: parseDuration(errorRate.window),
      warningRate: errorRate.warning,
      criticalRate: errorRate.critical,
      minCalls: errorRate.minimumCalls,
    });
    this.limiter = new RateLimiter({ agents: { '*': rateLimits.perAgent }, models: { '*': rateLimits.perModel } });
    this.tokenCapacity = Math.min(rateLimits.perAgent.tokensPerMinute, rateLimits.perModel.tokensPerMinute);
    this.stopFile = path.resolve(deps.killSwitch.emergencyStopFile);
  }

  async execute(ctx: Context, input: ActivityExecuteInput, next: (input: ActivityExecuteInput) => Promise<unknown>): Promise<unknown> {
    const call = describeCall(ctx, input.args);
    const facts: RunFacts = {};
    let outcome: ActivityOutcome = 'completed';
    let failureType: string | undefined;
    try {
      if (call.activityType !== AGENT_ACTIVITY) return await next(input);
      return await this.guardAgentCall(ctx, call, input, next, facts);
    } catch (error) {
      outcome = ctx.cancellationSignal.aborted ? 'cancelled' : 'failed';
      failureType = failureTypeOf(error);
      throw error;
    } finally {
      await this.audit(ctx, call, outcome, failureType, facts);
    }
  }

  private async guardAgentCall(
    ctx: Context,
    call: CallRef,
    input: ActivityExecuteInput,
    next: (input: ActivityExecuteInput) => Promise<unknown>,
    facts: RunFacts,
  ): Promise<StageResult> {
    const stageInput = input.args[0] as StageInput;
    const agent = await agentEndpoint(agentForStage(stageInput.intent, stageInput.stage));
    facts.agent = agent;
    const log = activityLogger(this.deps.logger);
    const event = (type: SafetyEventType, severity: Severity, reason: string, details: EventDetails = {}) =>
      this.recordEvent(ctx, call, agent, type, severity, reason, details);

    // 1. Kill switches: a stopped system starts no new agent work.
    const stop = await killSwitchOn(this.deps.killSwitch.enabled, this.stopFile, () => this.patiently(ctx, call, 'read the global stop flag', () => this.deps.ledger.globalStop()));
    if (stop) {
      log.warn({ killSwitch: stop.source, reason: stop.reason }, 'kill switch is on: refusing to start agent work');
      const eventId = await event('INTENT_STOPPED', 'high', `kill switch (${stop.source}): ${stop.reason}; the ${call.stage ?? 'agent'} call was not started`, {
        suggestion: stop.suggestion,
        metadata: { killSwitch: stop.source },
      });
      throw ApplicationFailure.create({
        type: FailureType.KillSwitch,
        message: `kill switch (${stop.source}): ${stop.reason}`,
        nonRetryable: true,
        details: [{ eventId, source: stop.source }],
      });
    }

    // 2. Error rate across this worker's agent calls: critical means no new calls until it drops.
    await this.judgeErrorRate(ctx, call, agent);
    if (this.errorRateLevel === 'trip') {
      const waitMs = this.errorRateWaitMs(Date.now());
      throw ApplicationFailure.create({
        type: FailureType.ErrorRateCritical,
        message: `agent-call error rate is critical (${this.errorRate.check(Date.now()).detail}); retry in ${waitMs} ms`,
        nextRetryDelay: Math.max(MIN_RETRY_DELAY_MS, waitMs),
      });
    }

    // 3. The endpoint's circuit, before anything is reserved or taken.
    await this.waitForCircuit(ctx, call, agent.endpoint);

    // 4. Token buckets per agent and per model.
    const debtKey = JSON.stringify([agent.agentId, agent.modelId]);
    const owed = Math.min(this.tokenDebt.get(debtKey) ?? 0, this.tokenCapacity);
    const admitted = this.limiter.take({ agent: agent.agentId, model: agent.modelId, tokens: owed, at: Date.now() });
    if (!admitted.ok) {
      const waitMs = Math.max(MIN_RETRY_DELAY_MS, admitted.retryAfterMs);
      const which = admitted.refusals.map((r) => `${r.scope} ${r.key} ${r.limit}/min`).join(', ');
      await event('RATE_LIMIT_BLOCK', 'low', `rate limit: ${which} exhausted; the ${call.stage ?? 'agent'} call waits ${waitMs} ms`, {
        suggestion: 'Nothing to do: the call is retried when the bucket has refilled. Raise worker.rateLimits if this is routine.',
        metadata: { retryAfterMs: waitMs, refusals: admitted.refusals },
      });
      throw ApplicationFailure.create({
        type: FailureType.RateLimited,
        message: `rate limited (${which}); retry in ${waitMs} ms`,
        nextRetryDelay: waitMs,
        details: [{ retryAfterMs: waitMs, refusals: admitted.refusals }],
      });
    }
    this.tokenDebt.set(debtKey, (this.tokenDebt.get(debtKey) ?? 0) - owed);

    // 5. Budgets: every paid call the agent makes reserves its maximum against the day's, the
    // agent's, the intent's and the stage's budgets in one ledger transaction (see `budgetBook`).
    const meter = new SpendMeter({ pricing: this.deps.config.pricing, declaredCapUsd: maxCallOf(stageInput), book: this.budgetBook(ctx, call, agent, stageInput, event) });

    // 6. The call, through the endpoint's circuit.
    await this.behaviour.ready((error) => log.warn({ error: messageOf(error) }, 'could not read past agent runs; behaviour baselines start empty'));
    const scope: CallScope = { ctx, transitions: [] };
    let result: StageResult;
    let delivered = false;
    try {
      try {
        result = (await this.scope.run(scope, () => this.breakers.execute(agent.endpoint, () => withSpendMeter(meter, () => next(input))))) as StageResult;
      } catch (error) {
        await this.writeTransitions(ctx, call, agent, scope.transitions);
        if (!(error instanceof CircuitOpenError) && !ctx.cancellationSignal.aborted) {
          await this.watchBehaviour(call, agent, stageInput, scope.transitions, undefined, event);
        }
        if (error instanceof CircuitOpenError) throw circuitOpenFailure(error);
        if (failureTypeOf(error) === FailureType.KillSwitch) {
          log.warn({ killSwitch: 'global_stop' }, 'kill switch is on: stopped the running agent');
          await event('INTENT_STOPPED', 'high', `${messageOf(error)} (${call.stage ?? 'agent'} stage)`, {
            suggestion: 'Once it is safe: warden unlock --reason TEXT, then resume the intent.',
            metadata: { killSwitch: 'global_stop', midRun: true },
          });
        }
        if (this.countsAgainstEndpoint(error, ctx)) {
          this.errorRate.record(Date.now(), false);
          await this.judgeErrorRate(ctx, call, agent);
        }
        throw error;
      }
      await this.writeTransitions(ctx, call, agent, scope.transitions);
      await this.watchBehaviour(call, agent, stageInput, scope.transitions, result, event);
      const anomalies = this.behaviour.deliver(call.intentId ?? call.workflowId);
      if (anomalies.length > 0) result = { ...result, safety: { ...result.safety, anomalies } };
      this.errorRate.record(Date.now(), true);
      await this.judgeErrorRate(ctx, call, agent);
      this.tokenDebt.set(debtKey, (this.tokenDebt.get(debtKey) ?? 0) + result.inputTokens + result.outputTokens);

      // 7. What the calls cost was counted as they were made; say what was not metered or overran.
      await this.judgeSpend(meter, stageInput, event);
      const costUsd = normalizeUsd(result.costUsd);

      // 8. Cascade: record LOW and up; CRITICAL halts.
      const cascade = result.safety?.cascade;
      if (cascade && cascade.level !== 'NONE') {
        const severity = CASCADE_SEVERITY[cascade.level];
        const reason = `${call.stage ?? 'agent'} output reads as a ${cascade.level} cascade (score ${cascade.score.toFixed(2)}): ${cascade.patterns.slice(0, 3).join(' | ')}`;
        const eventId = await event('CASCADE_DETECTED', severity, reason.slice(0, 1000), {
          suggestion: CASCADE_SUGGESTION[cascade.level],
          metadata: { level: cascade.level, score: cascade.score, patterns: cascade.patterns, artifactPath: result.artifactPath, pattern: `cascade-${cascade.level.toLowerCase()}` },
        });
        if (cascade.level === 'CRITICAL') {
          log.error({ cascade: cascade.level, score: cascade.score, eventId, costUsd }, 'critical cascade: halting the intent');
          // No details: the workflow writes a SafetyEvent from a SAFETY_HALT's details, and this
          // one is already written (its cost is in activity_runs).
          throw ApplicationFailure.create({
            type: FailureType.SafetyHalt,
            message: `CASCADE_DETECTED: critical cascade in ${call.stage ?? 'agent'} output (score ${cascade.score.toFixed(2)}); the intent is halted (event ${eventId})`,
            nonRetryable: true,
          });
        }
      }
      // A result the workflow will not see (the attempt was cancelled or timed out meanwhile) is not its to record.
      delivered = resultReachesWorkflow(ctx);
      return result;
    } finally {
      await this.closeSpend(ctx, call, agent, stageInput, meter, delivered, facts);
    }
  }

  /**
   * Feeds the behaviour monitor with this attempt (answered or failed) and the circuit changes it
   * saw; records each finding as ANOMALY_DETECTED. A CRITICAL finding halts the intent here
   * (non-retryable SAFETY_HALT, without details: its event is written); HIGH ones reach the
   * workflow with the intent's next answer, which holds it at the anomaly gate.
   */
  private async watchBehaviour(
    call: CallRef,
    agent: AgentEndpoint,
    input: StageInput,
    transitions: readonly CircuitStateChange[],
    result: StageResult | undefined,
    event: (type: SafetyEventType, severity: Severity, reason: string, details?: EventDetails) => Promise<string>,
  ): Promise<void> {
    const intentId = call.intentId ?? call.workflowId;
    const now = Date.now();
    const findings: Finding[] = [
      ...this.behaviour.breakerChanges(transitions, intentId),
      ...this.behaviour.agentCall({
        intentId,
        stage: input.stage,
        agentId: agent.agentId,
        modelId: agent.modelId,
        request: { feedback: input.feedback, conditions: input.conditions },
        outputHash: result?.safety?.outputHash,
        costUsd: result ? normalizeUsd(result.costUsd) : '0',
        latencyMs: now - call.startedMs,
        at: now,
      }),
    ];
    for (const [i, finding] of findings.entries()) {
      activityLogger(this.deps.logger).warn({ anomaly: finding.kind, severity: finding.severity, reason: finding.reason }, 'behaviour monitor finding');
      await event('ANOMALY_DETECTED', finding.severity, finding.reason.slice(0, 1000), {
        key: `monitor:${finding.kind}:${i}`,
        ...(finding.endpoint ? { breakerId: finding.endpoint } : {}),
        suggestion: finding.suggestion,
        metadata: { kind: finding.kind, monitor: 'behaviour', pattern: `anomaly-${finding.kind}` },
      });
    }
    const critical = findings.find((f) => f.severity === 'critical');
    if (critical) {
      throw ApplicationFailure.create({
        type: FailureType.SafetyHalt,
        message: `ANOMALY_DETECTED: critical ${critical.kind} in ${call.stage ?? 'agent'}: ${critical.reason}`.slice(0, 2000),
        nonRetryable: true,
      });
    }
  }

  /**
   * Waits, heartbeating, while the endpoint's circuit admits no call, as long as the wait is
   * short (the cool-down, a probe interval) and fits in this attempt: a refused call would cost
   * the intent one of its few retry attempts, and a short outage would fail it within a minute.
   * A longer wait fails the attempt with CIRCUIT_OPEN and `nextRetryDelay` = the time until the
   * circuit admits a probe, so the next attempt comes no earlier than that.
   */
  private async waitForCircuit(ctx: Context, call: CallRef, endpoint: string): Promise<void> {
    let logged = false;
    for (;;) {
      const state = this.breakers.state(endpoint);
      const waitMs = this.breakers.retryAfterMs(endpoint);
      if (state === 'CLOSED' || waitMs <= 0) return;
      if (waitMs > MAX_CIRCUIT_WAIT_IN_ATTEMPT_MS || Date.now() + waitMs > call.deadlineMs || ctx.cancellationSignal.aborted) {
        throw circuitOpenFailure(new CircuitOpenError(endpoint, waitMs, state));
      }
      if (!logged) activityLogger(this.deps.logger).info({ endpoint, circuit: state, waitMs }, 'circuit not admitting calls: waiting for it in this attempt');
      logged = true;
      ctx.heartbeat();
      await ctx.sleep(Math.min(waitMs, 2_000));
    }
  }

  /**
   * The ledger side of an attempt's meter. Each paid call reserves its maximum against the day's
   * budget, the agent's day budget, the intent's budget and its stage's budget, atomically (one
   * transaction, see `Ledger.reserveBudget`); a refusal is one SafetyEvent and ends the attempt:
   * the day's or the agent's with BUDGET_EXCEEDED, the intent's or the stage's with a halt. After
   * the call the reservation is settled at its real cost, or released when nothing was billed.
   */
  private budgetBook(
    ctx: Context,
    call: CallRef,
    agent: AgentEndpoint,
    input: StageInput,
    event: (type: SafetyEventType, severity: Severity, reason: string, details?: EventDetails) => Promise<string>,
  ): BudgetBook {
    const day = new Date().toISOString().slice(0, 10);
    const { agentDayBudgetUsd, dayBudgetUsd } = this.deps.config;
    const limits = input.intent.limits as Partial<Pick<IntentLimitsConfig, 'budgetUsd' | 'stageBudgetUsd'>>;
    const limited = (usd: string | undefined): string | undefined => (usd === undefined || compareUsd(usd, '0') === 0 ? undefined : normalizeUsd(usd));
    const stageLimit = limits.stageBudgetUsd?.[input.stage as keyof IntentLimitsConfig['stageBudgetUsd']];
    const base = reservationIdOf(call);
    const idOf = (open: OpenCall): string => `${base}/${open.index}`;
    const log = activityLogger(this.deps.logger);
    return {
      reserve: async (open) => {
        const reservationId = idOf(open);
        const reservation = await this.patiently(ctx, call, "reserve the call's maximum cost", () =>
          this.deps.ledger.reserveBudget({
            id: reservationId,
            day,
            intentId: call.intentId ?? call.workflowId,
            amountUsd: open.maxUsd,
            limitUsd: limited(dayBudgetUsd) ?? UNLIMITED_USD,
            agentId: agent.agentId,
            agentLimitUsd: limited(agentDayBudgetUsd),
            intentLimitUsd: limited(limits.budgetUsd),
            stage: input.stage,
            // "0" means unlimited here too, as for every other budget (see mergeLimits).
            stageLimitUsd: limited(stageLimit),
          }),
        );
        if (reservation.granted) return;
        const maximum = `this call may cost up to $${open.maxUsd}${open.bounded ? '' : ' (its declared limits.maxCallUsd)'}`;
        const snapshot = { dayUsd: reservation.committedUsd, limitUsd: reservation.limitUsd };
        const metadata = { day, maxCallUsd: open.maxUsd, bounded: open.bounded, model: open.model, reservationId, budget: reservation.deniedBy };
        switch (reservation.deniedBy) {
          case 'agent': {
            const reason = `agent ${agent.agentId} spent $${reservation.committedUsd} today; ${maximum}, over its $${reservation.limitUsd} day budget`;
            const eventId = await event('COST_BUDGET_EXCEEDED', 'high', reason, {
              breakerId: 'agent-day-budget',
              suggestion: 'Wait for tomorrow (UTC), or raise worker.agentDayBudgetUsd if this spend is expected; then resume the intent.',
              costSnapshot: snapshot,
              metadata,
            });
            throw budgetFailure(reason, eventId);
          }
          case 'intent':
          case 'stage': {
            const which = reservation.deniedBy === 'stage' ? `stage ${input.stage}: spent $${reservation.committedUsd} of its $${reservation.limitUsd} budget` : `spent $${reservation.committedUsd} of the intent's $${reservation.limitUsd} budget`;
            const reason = `${which}; ${maximum}, which would pass it`;
            const eventId = await event('COST_BUDGET_EXCEEDED', 'high', reason, {
              breakerId: `${reservation.deniedBy}-budget`,
              suggestion: reservation.deniedBy === 'stage' ? `Raise limits.stageBudgetUsd.${input.stage} if this spend is expected, then resume the intent.` : 'Raise limits.budgetUsd if this spend is expected (or use a cheaper model, or fewer max_tokens), then resume the intent.',
              costSnapshot: { intentUsd: reservation.committedUsd, limitUsd: reservation.limitUsd },
              metadata,
            });
            // No details: its SafetyEvent is written; the workflow fails the intent with this halt.
            throw ApplicationFailure.create({ type: FailureType.SafetyHalt, message: `COST_BUDGET_EXCEEDED: ${reason} (event ${eventId})`, nonRetryable: true });
          }
          default: {
            const reason = `day budget: $${reservation.committedUsd} already spent or reserved on ${day}; ${maximum}, over the $${reservation.limitUsd} limit`;
            const eventId = await event('BUDGET_RESERVATION_DENIED', 'high', reason, {
              breakerId: 'day-budget',
              suggestion: 'Wait for tomorrow (UTC), or raise worker.dayBudgetUsd if this spend is expected; then resume the intent.',
              costSnapshot: snapshot,
              metadata,
            });
            throw budgetFailure(reason, eventId);
          }
        }
      },
      settle: async (open, paid) => {
        await this.patiently(ctx, call, 'settle the reservation', () => this.deps.ledger.settleReservation(idOf(open), paid.costUsd, { overrun: paid.overrun })).catch((error: unknown) =>
          // The call was made and paid for: failing the attempt now would only make it again.
          log.error({ reservationId: idOf(open), costUsd: paid.costUsd, error: messageOf(error) }, 'could not settle the budget reservation; it stays open at its maximum'),
        );
      },
      release: async (open) => {
        await this.patiently(ctx, call, 'release the reservation', () => this.deps.ledger.releaseReservation(idOf(open))).catch((error: unknown) =>
          log.error({ reservationId: idOf(open), error: messageOf(error) }, 'could not release the budget reservation; it stays open'),
        );
      },
    };
  }

  /**
   * After a successful call: a call counted at its declared cap because it reports no usage is a
   * COST_WARNING (its real cost is unknown); a call that cost more than its declared cap halts
   * the intent (its real cost is recorded; spend may now pass a budget by that overrun).
   */
  private async judgeSpend(
    meter: SpendMeter,
    input: StageInput,
    event: (type: SafetyEventType, severity: Severity, reason: string, details?: EventDetails) => Promise<string>,
  ): Promise<void> {
    const unmetered = meter.calls.filter((c) => c.unmetered);
    if (unmetered.length > 0) {
      const counted = unmetered.reduce((sum, c) => addUsd(sum, c.costUsd), ZERO_USD);
      await event('COST_WARNING', 'medium', `unmetered: the ${input.stage} agent reports no token usage; ${unmetered.length} call(s) counted at the declared $${meter.declaredCapUsd} each ($${counted}), not at what they cost`, {
        suggestion: "Set limits.maxCallUsd to what one call of this agent really costs at most (\"0\" if it is free), or use an HTTP agent, whose usage is metered.",
        key: 'unmetered',
        metadata: { unmetered: true, calls: unmetered.length, countedUsd: counted, maxCallUsd: meter.declaredCapUsd },
      });
    }
    const over = meter.calls.find((c) => c.overrun);
    if (over) {
      const reason = `the ${input.stage} call reported $${over.costUsd}, more than the $${over.maxUsd} reserved for it${over.estimated ? '' : ' (its declared limits.maxCallUsd)'}; it is recorded at its real cost and the intent is halted`;
      const eventId = await event('COST_BUDGET_EXCEEDED', 'high', reason, {
        breakerId: 'call-cap',
        suggestion: 'Raise limits.maxCallUsd to what one call of this agent really costs at most (or cap its tokens), then resume the intent.',
        costSnapshot: { intentUsd: over.costUsd, limitUsd: over.maxUsd },
        metadata: { costUsd: over.costUsd, maxCallUsd: over.maxUsd, model: over.model, overrun: true },
      });
      throw ApplicationFailure.create({ type: FailureType.SafetyHalt, message: `COST_BUDGET_EXCEEDED: ${reason} (event ${eventId})`, nonRetryable: true });
    }
  }

  /**
   * At the end of an attempt: reservations still open are released (nothing was counted for them),
   * and when the workflow will not get the result — the attempt failed, was halted, cancelled or
   * timed out — the paid calls are written to cost_events here, so that every paid call is counted
   * once: in cost_events, in the budgets and in `warden costs`.
   */
  private async closeSpend(ctx: Context, call: CallRef, agent: AgentEndpoint, input: StageInput, meter: SpendMeter, delivered: boolean, facts: RunFacts): Promise<void> {
    await meter.releaseOpen();
    if (meter.calls.length > 0) facts.spendUsd = meter.totalUsd();
    if (delivered) return;
    const log = activityLogger(this.deps.logger);
    // A call that cost nothing and used no tokens has nothing to count.
    const counted = meter.calls.filter((c) => compareUsd(c.costUsd, '0') > 0 || c.usage.inputTokens > 0 || c.usage.outputTokens > 0);
    for (const paid of counted) {
      const id = deterministicUuid(call.workflowId, call.runId, call.activityId, call.attempt, 'cost', paid.index);
      await this.patiently(ctx, call, 'record the cost of a call', () =>
        this.deps.ledger.recordCost({
          id,
          timestamp: new Date(),
          intentId: call.intentId ?? call.workflowId,
          stage: input.stage,
          attempt: input.attempt,
          agentId: agent.agentId,
          modelId: paid.model,
          inputTokens: paid.usage.inputTokens,
          outputTokens: paid.usage.outputTokens,
          usd: paid.costUsd,
        }),
      ).catch((error: unknown) => log.error({ costUsd: paid.costUsd, error: messageOf(error) }, 'could not record the cost of a paid call'));
    }
    if (counted.length > 0) log.info({ costUsd: meter.totalUsd(), calls: counted.length }, 'paid calls of an attempt whose result the workflow does not get: recorded here');
  }

  /** Re-judges the error rate and records a change of level: warning and critical once each time they are entered. */
  private async judgeErrorRate(ctx: Context, call: CallRef, agent: AgentEndpoint): Promise<void> {
    const check = this.errorRate.check(Date.now());
    const from = this.errorRateLevel;
    const to = check.verdict;
    if (from === to) return;
    this.errorRateLevel = to;
    const key = `error-rate:${from}->${to}`;
    const metadata = { calls: check.calls, errors: check.errors, rate: check.rate, from, to };
    const log = activityLogger(this.deps.logger);
    if (to === 'trip') {
      log.error({ errorRate: metadata }, 'agent-call error rate is critical: new agent calls fail fast');
      await this.recordEvent(ctx, call, agent, 'ANOMALY_DETECTED', 'critical', `error rate critical: ${check.detail}; new agent calls fail fast until it drops`, {
        breakerId: 'error-rate', key, suggestion: check.suggestion, metadata: { ...metadata, pattern: 'ERROR_RATE_CRITICAL' },
      });
    } else if (from === 'trip') {
      log.info({ errorRate: metadata }, 'agent-call error rate is below critical again');
      await this.recordEvent(ctx, call, agent, 'CIRCUIT_RESET', 'info', `error rate no longer critical: ${check.detail}`, { breakerId: 'error-rate', key, metadata });
    } else if (to === 'warn') {
      log.warn({ errorRate: metadata }, 'agent-call error rate above warning');
      await this.recordEvent(ctx, call, agent, 'ANOMALY_DETECTED', 'medium', `error rate warning: ${check.detail}`, {
        breakerId: 'error-rate', key, suggestion: check.suggestion, metadata: { ...metadata, pattern: 'ERROR_RATE_WARNING' },
      });
    }
  }

  /** How long until the error rate drops below critical with no new calls: when enough errors have left the window. */
  private errorRateWaitMs(now: number): number {
    const windowMs = parseDuration(this.deps.config.errorRate.window);
    const exits = this.errorRate
      .toJSON()
      .samples.map((s) => s.at + windowMs)
      .filter((t) => t > now)
      .sort((a, b) => a - b);
    const drop = exits.find((t) => this.errorRate.check(t).verdict !== 'trip');
    return (drop ?? now + windowMs) - now;
  }

  /** CIRCUIT_TRIPPED for every move to OPEN, CIRCUIT_RESET for every move to CLOSED; HALF_OPEN is only logged. */
  private async writeTransitions(ctx: Context, call: CallRef, agent: AgentEndpoint, transitions: readonly CircuitStateChange[]): Promise<void> {
    const log = activityLogger(this.deps.logger);
    for (const change of transitions) {
      const metadata = { from: change.from, to: change.to, cause: change.reason, at: new Date(change.at).toISOString() };
      const key = `${change.endpoint}:${change.from}->${change.to}`;
      if (change.to === 'OPEN') {
        log.error({ circuit: metadata, endpoint: change.endpoint }, 'circuit opened');
        await this.recordEvent(ctx, call, agent, 'CIRCUIT_TRIPPED', 'high', `circuit for ${change.endpoint} opened: ${change.detail}`, {
          breakerId: change.endpoint,
          key,
          suggestion: `Calls to ${change.endpoint} fail fast until the cool-down (${this.deps.config.circuitBreaker.halfOpenAfter}) ends and probes succeed; check the endpoint (or the agent's setup) meanwhile.`,
          metadata,
        });
      } else if (change.to === 'CLOSED') {
        log.info({ circuit: metadata, endpoint: change.endpoint }, 'circuit closed');
        await this.recordEvent(ctx, call, agent, 'CIRCUIT_RESET', 'info', `circuit for ${change.endpoint} closed: ${change.detail}`, { breakerId: change.endpoint, key, metadata });
      } else {
        log.info({ circuit: metadata, endpoint: change.endpoint }, 'circuit half-open: probing');
      }
    }
  }

  /** Writes one SafetyEvent with its deterministic id (a repeat is a no-op) and returns the id. */
  private async recordEvent(
    ctx: Context,
    call: CallRef,
    agent: AgentEndpoint,
    eventType: SafetyEventType,
    severity: Severity,
    reason: string,
    details: EventDetails = {},
  ): Promise<string> {
    const id = safetyEventId(call, eventType, details.key);
    await this.patiently(ctx, call, `record ${eventType}`, () =>
      this.deps.ledger.recordSafetyEvent({
        id,
        timestamp: new Date(),
        eventType,
        severity,
        reason,
        intentId: call.intentId,
        stage: call.stage,
        agentId: agent.agentId,
        modelId: agent.modelId,
        breakerId: details.breakerId,
        costSnapshot: details.costSnapshot,
        suggestion: details.suggestion,
        metadata: { ...details.metadata, workflowId: call.workflowId, runId: call.runId, activityId: call.activityId, attempt: call.attempt },
      }),
    ).catch((error: unknown) => {
      // The decision stands even if its record could not be written; say so loudly.
      activityLogger(this.deps.logger).error({ eventId: id, eventType, reason, error: messageOf(error) }, 'could not record a safety event');
    });
    return id;
  }

  /** One `activity_runs` row per attempt. Never throws: the audit must not change the activity's outcome. */
  private async audit(ctx: Context, call: CallRef, outcome: ActivityOutcome, failureType: string | undefined, facts: RunFacts): Promise<void> {
    const endedAt = new Date(Math.max(Date.now(), call.startedMs));
    try {
      await this.patiently(ctx, call, 'record the activity run', () =>
        this.deps.ledger.recordActivityRun({
          workflowId: call.workflowId,
          runId: call.runId,
          activityId: call.activityId,
          attempt: call.attempt,
          activityType: call.activityType,
          taskQueue: call.taskQueue,
          intentId: call.intentId,
          stage: call.stage,
          agentId: facts.agent?.agentId,
          modelId: facts.agent?.modelId,
          startedAt: new Date(call.startedMs),
          endedAt,
          outcome,
          failureType,
          spendUsd: facts.spendUsd,
        }),
      );
    } catch (error) {
      activityLogger(this.deps.logger).error({ outcome, error: messageOf(error) }, 'could not record the activity run in the ledger');
    }
  }

  /**
   * Runs a ledger operation, waiting out an unreachable database (heartbeating, so the attempt
   * stays alive) until shortly before the attempt's deadline or its cancellation.
   */
  private patiently<T>(ctx: Context, call: CallRef, what: string, fn: () => Promise<T>): Promise<T> {
    return patientlyWithLedger(ctx, this.deps.logger, call.deadlineMs, what, fn);
  }

  /** Errors that say the endpoint is unhealthy; not cancellations, nor our own bad requests. */
  private countsAgainstEndpoint(error: unknown, ctx: Context | undefined): boolean {
    if (ctx?.cancellationSignal.aborted) return false;
    if (error instanceof CancelledFailure || (error instanceof Error && error.name === 'AbortError')) return false;
    if (error instanceof ApplicationFailure && error.type && NOT_ENDPOINT_FAILURES.has(error.type)) return false;
    return true;
  }
}

function describeCall(ctx: Context, args: readonly unknown[]): CallRef {
  const info = ctx.info;
  const first = args[0] as { intent?: { id?: unknown }; stage?: unknown } | undefined;
  const startedMs = Date.now();
  return {
    workflowId: info.workflowExecution?.workflowId ?? `activity:${info.activityId}`,
    runId: info.workflowExecution?.runId ?? info.activityRunId ?? 'none',
    activityId: info.activityId,
    attempt: info.attempt,
    activityType: info.activityType,
    taskQueue: info.taskQueue,
    intentId: typeof first?.intent?.id === 'string' ? first.intent.id : undefined,
    stage: typeof first?.stage === 'string' ? first.stage : undefined,
    startedMs,
    deadlineMs: ledgerDeadlineOf(ctx, startedMs),
  };
}

/** The call's maximum cost: the stage input's, or the intent's limit when the workflow gave none. */
function maxCallOf(input: StageInput): string {
  const raw: unknown = input.maxCallUsd ?? (input.intent.limits as { maxCallUsd?: unknown } | undefined)?.maxCallUsd;
  try {
    const usd = normalizeUsd(raw as string);
    if (compareUsd(usd, '0') >= 0) return usd;
  } catch {
    // reported below
  }
  throw ApplicationFailure.create({ type: FailureType.InvalidIntent, message: `maxCallUsd ${JSON.stringify(raw)} is not a USD amount`, nonRetryable: true });
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

/** The reservations of one attempt (one per paid call, numbered): a retry reserves afresh; a repeated write is the same one. */
function reservationIdOf(call: CallRef): string {
  const id = `agent-call/${call.workflowId}/${call.runId}/${call.activityId}/${call.attempt}`;
  return id.length <= 190 ? id : `agent-call/${safetyEventId(call, 'BUDGET_RESERVATION_DENIED', 'reservation')}`;
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

function budgetFailure(reason: string, eventId: string): ApplicationFailure {
  return ApplicationFailure.create({ type: FailureType.BudgetExceeded, message: reason, nonRetryable: true, details: [{ eventId }] });
}

function failureTypeOf(error: unknown): string {
  if (error instanceof ApplicationFailure) return error.type ?? 'ApplicationFailure';
  if (error instanceof CancelledFailure) return 'CANCELLED';
  return (error instanceof Error ? error.name : typeof error).slice(0, 200);
}

/** Worth waiting for: the database unreachable or briefly unable; not a bad row, nor a ledger state conflict. */

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
