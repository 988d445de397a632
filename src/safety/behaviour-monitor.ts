/**
 * Behaviour monitor: rule-based anomaly detection over every agent
 * action — loops, A-B-A-B alternation, escalating cost, rapid actions, z-score outliers of cost
 * and latency, and circuit breakers flapping between OPEN and CLOSED. Each limit bounds one
 * quantity (attempts, spend, time); this looks for patterns across attempts that none of them
 * sees alone (docs/design.md).
 *
 * One monitor watches every intent a worker runs (see behaviour-watch.ts), so that:
 * - sequences (loop, alternation, escalating cost, rapid actions) are kept per intent — its
 *   `scope` — and see every attempt, Temporal's retries included;
 * - cost and latency baselines are kept per stage and agent across intents (and seeded from the
 *   ledger's past runs), so an outlier is measurable from an intent's first attempt.
 *
 * Severities: MEDIUM is recorded; HIGH holds the intent at the human-only `anomaly` gate;
 * CRITICAL halts it. HIGH: a loop of 5 identical answers (10 are CRITICAL), a cost more
 * than 6 standard deviations above its baseline, 5 rising costs ending at 2× the first, 8 steps
 * of A-B-A-B, a flapping circuit. A second HIGH finding in the same intent — after a person has
 * already let it go on once — is CRITICAL. Rapid actions and slow calls are only recorded.
 *
 * Workflow-safe: pure, no Node built-ins, no clocks (every observation carries its time), no
 * randomness; the state is plain JSON (`snapshot()`), and a JSON round trip yields exactly the
 * same findings.
 * A finding is reported when its condition starts to hold and again when it escalates, not on
 * every observation while it keeps holding; once the condition stops, the rule re-arms.
 */
import type { Severity } from '../shared/safety-events';
import { toMicros } from '../shared/money';

/** What the monitor can find. */
export type FindingKind =
  | 'loop'
  | 'alternation'
  | 'escalating-cost'
  | 'rapid-actions'
  | 'cost-outlier'
  | 'latency-outlier'
  | 'breaker-oscillation';

/** One thing an agent did: one attempt of an agent call, as the activity interceptor saw it. */
export interface Observation {
  /** When it ended, in ms (the monitor never reads a clock). */
  readonly at: number;
  /** Whose sequence it belongs to: the intent. */
  readonly scope: string;
  readonly stage: string;
  /** The agent (and model) it ran on: baselines are per stage and agent. */
  readonly agent: string;
  /** A hash of what it was asked (the same input again is the same action). */
  readonly action: string;
  /** A hash of what came out; absent for a failed attempt (which then has no sequence token). */
  readonly outputHash?: string;
  /** What it cost, as an exact decimal string ("0.012500"); "0" for unpaid actions. */
  readonly costUsd: string;
  readonly latencyMs: number;
}

/** A sample of a past run, to seed a baseline without judging it. */
export interface BaselineSample {
  readonly stage: string;
  readonly agent: string;
  readonly costUsd?: string;
  readonly latencyMs: number;
}

/** A breaker state as `circuit-breaker.ts` reports it. */
export type ObservedBreakerState = 'CLOSED' | 'OPEN' | 'HALF_OPEN';

/** An anomaly, ready to become an ANOMALY_DETECTED SafetyEvent. */
export interface Finding {
  readonly kind: FindingKind;
  readonly severity: Severity;
  readonly reason: string;
  readonly suggestion: string;
  readonly at: number;
  readonly scope?: string;
  readonly stage?: string;
  readonly agent?: string;
  readonly endpoint?: string;
}

/** Thresholds; every field has a default, in `DEFAULT_MONITOR_CONFIG`. */
export interface BehaviourMonitorConfig {
  /** This many identical action + output in a row is a HIGH loop (5: past any honest retry); 2× is CRITICAL. */
  readonly loopThreshold: number;
  /** Steps of strict A-B-A-B (same actions, same outputs) that make an alternation (4, MEDIUM); 2× is HIGH. */
  readonly alternationMinSteps: number;
  /** Paid attempts with strictly increasing cost that are an escalation (5, MEDIUM): an agent pulling ever more context in. */
  readonly escalationMinAttempts: number;
  /** …HIGH when the last costs at least this multiple of the first (2). */
  readonly escalationFactor: number;
  /** Actions in a row, each less than `rapidMaxGapMs` after the previous one, that are rapid (5 and 5 s, MEDIUM: faster than a person could follow). */
  readonly rapidMinActions: number;
  readonly rapidMaxGapMs: number;
  /** z-score above which a value is an outlier (3, MEDIUM); 2× is HIGH for cost (latency stays MEDIUM). */
  readonly outlierZ: number;
  /** Samples a baseline needs before it judges (10: fewer give a standard deviation too noisy to trust). */
  readonly outlierMinSamples: number;
  /** EWMA weight of a new sample once warmed up (0.1); before that the exact running mean is used. */
  readonly ewmaAlpha: number;
  /** Standard deviation floor as a fraction of the mean, so a near-constant baseline is not hair-triggered (0.05). */
  readonly outlierMinStdFraction: number;
  /** Absolute floors of the standard deviation: µ$ for cost (1), ms for latency (1). */
  readonly costMinStdMicros: number;
  readonly latencyMinStdMs: number;
  /** More than this many OPEN↔CLOSED changes of one endpoint inside `breakerWindowMs` is oscillation (3, HIGH). */
  readonly breakerMaxFlips: number;
  readonly breakerWindowMs: number;
  /** Intents whose sequences are kept; the least recently seen is forgotten beyond it (1000). */
  readonly maxScopes: number;
}

/** Defaults; docs/design.md says why each is what it is. */
export const DEFAULT_MONITOR_CONFIG: BehaviourMonitorConfig = {
  loopThreshold: 5,
  alternationMinSteps: 4,
  escalationMinAttempts: 5,
  escalationFactor: 2,
  rapidMinActions: 5,
  rapidMaxGapMs: 5_000,
  outlierZ: 3,
  outlierMinSamples: 10,
  ewmaAlpha: 0.1,
  outlierMinStdFraction: 0.05,
  costMinStdMicros: 1,
  latencyMinStdMs: 1,
  breakerMaxFlips: 3,
  breakerWindowMs: 10 * 60_000,
  maxScopes: 1000,
};

/** Running baseline: sample count, mean and variance (exact while n < 1/alpha, EWMA after). */
export interface Ewma {
  readonly n: number;
  readonly mean: number;
  readonly variance: number;
}

/** Per (stage, agent) of one intent: its sequence. */
export interface StreamState {
  readonly last: string | null;
  readonly beforeLast: string | null;
  readonly run: number;
  readonly loopLevel: number;
  readonly alternation: number;
  readonly alternationLevel: number;
  readonly lastCostMicros: number | null;
  readonly costRunStartMicros: number;
  readonly costRun: number;
  readonly costLevel: number;
}

/** Per agent of one intent: the run of quick actions. */
export interface PaceState {
  readonly lastAt: number | null;
  readonly quick: number;
  readonly reported: boolean;
}

/** One intent's sequences. */
export interface ScopeState {
  readonly lastAt: number;
  /** HIGH findings so far: the next one is CRITICAL. */
  readonly highs: number;
  readonly streams: Readonly<Record<string, StreamState>>;
  readonly pace: Readonly<Record<string, PaceState>>;
}

/** Per stage and agent, across intents. */
export interface BaselineState {
  readonly cost: Ewma;
  readonly latency: Ewma;
}

/** Per endpoint: last stable breaker state and recent flips. */
export interface BreakerHistoryState {
  readonly stable: 'OPEN' | 'CLOSED';
  readonly flips: readonly number[];
  readonly level: number;
}

/** The monitor's whole state: plain JSON data. Stream and baseline keys are `JSON.stringify([stage, agent])`. */
export interface MonitorState {
  readonly scopes: Readonly<Record<string, ScopeState>>;
  readonly baselines: Readonly<Record<string, BaselineState>>;
  readonly breakers: Readonly<Record<string, BreakerHistoryState>>;
}

type DeepMutable<T> = T extends readonly (infer U)[] ? DeepMutable<U>[] : T extends object ? { -readonly [K in keyof T]: DeepMutable<T[K]> } : T;
type Rule = Omit<Finding, 'at' | 'scope' | 'stage' | 'agent' | 'endpoint'>;

const EMPTY_EWMA: Ewma = { n: 0, mean: 0, variance: 0 };

/** An empty state. */
export function emptyMonitorState(): MonitorState {
  return { scopes: {}, baselines: {}, breakers: {} };
}

function clone<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/**
 * Feed it observations in time order; it answers with the findings each one causes. Construct
 * with a saved `MonitorState` to resume exactly where a previous monitor stopped.
 */
export class BehaviourMonitor {
  private readonly config: BehaviourMonitorConfig;
  private readonly state: DeepMutable<MonitorState>;

  constructor(config: Partial<BehaviourMonitorConfig> = {}, state: MonitorState = emptyMonitorState()) {
    this.config = { ...DEFAULT_MONITOR_CONFIG, ...config };
    this.state = clone(state) as DeepMutable<MonitorState>;
  }

  /** A deep, plain-data copy of the state. */
  snapshot(): MonitorState {
    return clone(this.state);
  }

  /** Samples a baseline holds for this stage and agent. */
  baselineSamples(stage: string, agent: string): number {
    return this.state.baselines[JSON.stringify([stage, agent])]?.latency.n ?? 0;
  }

  /** Adds a past run to the baselines without judging it (seeding from the ledger). */
  seed(sample: BaselineSample): void {
    const baseline = this.baseline(sample.stage, sample.agent);
    const costMicros = sample.costUsd === undefined ? 0 : Number(toMicros(sample.costUsd));
    if (costMicros > 0) baseline.cost = updated(baseline.cost, costMicros, this.config.ewmaAlpha);
    if (Number.isFinite(sample.latencyMs)) baseline.latency = updated(baseline.latency, sample.latencyMs, this.config.ewmaAlpha);
  }

  /** Records one observation and returns the findings it causes (often none). */
  observe(obs: Observation): Finding[] {
    const scope = this.scope(obs.scope, obs.at);
    const key = JSON.stringify([obs.stage, obs.agent]);
    const stream = (scope.streams[key] ??= {
      last: null,
      beforeLast: null,
      run: 0,
      loopLevel: 0,
      alternation: 0,
      alternationLevel: 0,
      lastCostMicros: null,
      costRunStartMicros: 0,
      costRun: 0,
      costLevel: 0,
    });
    const rules: Array<Rule | undefined> = [];
    if (obs.outputHash !== undefined) {
      rules.push(this.sequence(stream, obs));
      rules.push(this.alternationFinding(stream));
    }
    const costMicros = Number(toMicros(obs.costUsd));
    rules.push(this.escalation(stream, costMicros));
    rules.push(this.rapid(scope, obs));
    // Only answers feed the baselines: a failure's latency says how soon it failed.
    if (obs.outputHash !== undefined) {
      const baseline = this.baseline(obs.stage, obs.agent);
      if (costMicros > 0) rules.push(this.outlier('cost-outlier', baseline, 'cost', costMicros, this.config.costMinStdMicros));
      if (Number.isFinite(obs.latencyMs)) rules.push(this.outlier('latency-outlier', baseline, 'latency', obs.latencyMs, this.config.latencyMinStdMs));
    }
    const where = { at: obs.at, scope: obs.scope, stage: obs.stage, agent: obs.agent };
    return rules.filter((r): r is Rule => r !== undefined).map((rule) => this.escalated(scope, { ...rule, ...where }));
  }

  /**
   * Records a circuit breaker's state change for `endpoint` at `at`, seen by an agent call of
   * `scope` (if any). Each change between OPEN and CLOSED (HALF_OPEN in between is ignored) is
   * one flip; more than `breakerMaxFlips` flips inside `breakerWindowMs` is oscillation (HIGH).
   * Breakers start CLOSED.
   */
  observeBreaker(endpoint: string, state: ObservedBreakerState, at: number, scope?: string): Finding[] {
    const { breakerMaxFlips: max, breakerWindowMs: windowMs } = this.config;
    const history = (this.state.breakers[endpoint] ??= { stable: 'CLOSED', flips: [], level: 0 });
    if (state !== 'HALF_OPEN' && state !== history.stable) {
      history.stable = state;
      history.flips.push(at);
    }
    history.flips = history.flips.filter((t) => t <= at && at - t < windowMs).slice(-(max + 1));
    const level = history.flips.length > max ? 1 : 0;
    const rising = level > history.level;
    history.level = level;
    if (!rising) return [];
    const finding: Finding = {
      kind: 'breaker-oscillation',
      severity: 'high',
      reason: `circuit for ${endpoint} changed between OPEN and CLOSED ${history.flips.length} times within ${windowMs} ms (more than ${max})`,
      suggestion: 'Treat the endpoint as down rather than flaky: lengthen its cool-down, or route to another model or endpoint until it is stable.',
      at,
      endpoint,
      ...(scope === undefined ? {} : { scope }),
    };
    return [scope === undefined ? finding : this.escalated(this.scope(scope, at), finding)];
  }

  /** A HIGH finding in an intent that already had one is CRITICAL: a person let it go on once. */
  private escalated(scope: DeepMutable<ScopeState>, finding: Finding): Finding {
    if (finding.severity !== 'high') return finding;
    scope.highs += 1;
    if (scope.highs < 2) return finding;
    return {
      ...finding,
      severity: 'critical',
      reason: `${finding.reason}; HIGH anomaly number ${scope.highs} of this intent, after a person let it go on`,
      suggestion: `The intent was halted: the behaviour came back after a person let it go on. ${finding.suggestion}`,
    };
  }

  private scope(name: string, at: number): DeepMutable<ScopeState> {
    const scopes = this.state.scopes;
    const existing = scopes[name];
    if (existing) {
      existing.lastAt = Math.max(existing.lastAt, at);
      return existing;
    }
    const names = Object.keys(scopes);
    if (names.length >= this.config.maxScopes) {
      const oldest = names.reduce((a, b) => (scopes[b].lastAt < scopes[a].lastAt ? b : a));
      delete scopes[oldest];
    }
    return (scopes[name] = { lastAt: at, highs: 0, streams: {}, pace: {} });
  }

  private baseline(stage: string, agent: string): DeepMutable<BaselineState> {
    return (this.state.baselines[JSON.stringify([stage, agent])] ??= { cost: { ...EMPTY_EWMA }, latency: { ...EMPTY_EWMA } });
  }

  private sequence(stream: DeepMutable<StreamState>, obs: Observation): Rule | undefined {
    // Action and output together: the same request with a new answer (polling) is progress.
    const token = JSON.stringify([obs.action, obs.outputHash]);
    if (token === stream.last) {
      stream.run += 1;
      stream.alternation = 1;
    } else {
      stream.run = 1;
      stream.alternation = stream.last !== null && token === stream.beforeLast ? stream.alternation + 1 : stream.last === null ? 1 : 2;
    }
    stream.beforeLast = stream.last;
    stream.last = token;

    const threshold = this.config.loopThreshold;
    const level = stream.run >= 2 * threshold ? 2 : stream.run >= threshold ? 1 : 0;
    const rising = level > stream.loopLevel;
    stream.loopLevel = level;
    if (!rising) return undefined;
    return {
      kind: 'loop',
      severity: level === 2 ? 'critical' : 'high',
      reason: `${obs.agent} was asked the same thing and gave the same answer ${stream.run} times in a row in ${obs.stage} (threshold ${threshold})`,
      suggestion: 'The agent is stuck in a loop: change its input (prompt, context, approach) before letting it go on.',
    };
  }

  private alternationFinding(stream: DeepMutable<StreamState>): Rule | undefined {
    const min = this.config.alternationMinSteps;
    const level = stream.alternation >= 2 * min ? 2 : stream.alternation >= min ? 1 : 0;
    const rising = level > stream.alternationLevel;
    stream.alternationLevel = level;
    if (!rising) return undefined;
    return {
      kind: 'alternation',
      severity: level === 2 ? 'high' : 'medium',
      reason: `the agent alternated between the same two actions with the same two outputs for ${stream.alternation} steps`,
      suggestion: 'It is undoing and redoing its own work (A-B-A-B) without progress: diagnose which of the two states is right.',
    };
  }

  private escalation(stream: DeepMutable<StreamState>, costMicros: number): Rule | undefined {
    // Unpaid actions are not paid attempts and leave the cost run alone.
    if (costMicros <= 0) return undefined;
    if (stream.lastCostMicros !== null && costMicros > stream.lastCostMicros) {
      stream.costRun += 1;
    } else {
      stream.costRun = 1;
      stream.costRunStartMicros = costMicros;
      stream.costLevel = 0;
    }
    stream.lastCostMicros = costMicros;
    const { escalationMinAttempts: min, escalationFactor: factor } = this.config;
    const level = stream.costRun < min ? 0 : costMicros >= factor * stream.costRunStartMicros ? 2 : 1;
    const rising = level > stream.costLevel;
    stream.costLevel = Math.max(level, stream.costLevel);
    if (!rising) return undefined;
    return {
      kind: 'escalating-cost',
      severity: level === 2 ? 'high' : 'medium',
      reason: `cost per attempt rose ${stream.costRun} times in a row, from $${usd(stream.costRunStartMicros)} to $${usd(costMicros)}${level === 2 ? ` (${factor}× or more)` : ''}`,
      suggestion: 'Each retry costs more (growing context?): check that the attempts converge and that the budget covers where this is heading.',
    };
  }

  private rapid(scope: DeepMutable<ScopeState>, obs: Observation): Rule | undefined {
    const { rapidMinActions: min, rapidMaxGapMs: maxGap } = this.config;
    // Per stage: a pipeline's stages following each other quickly (a fast agent) is not a loop;
    // the same stage dispatched again and again within seconds is.
    const pace = (scope.pace[JSON.stringify([obs.stage, obs.agent])] ??= { lastAt: null, quick: 0, reported: false });
    const quick = pace.lastAt !== null && obs.at - pace.lastAt < maxGap;
    pace.quick = quick ? pace.quick + 1 : 1;
    if (!quick) pace.reported = false;
    pace.lastAt = obs.at;
    if (pace.reported || pace.quick < min) return undefined;
    pace.reported = true;
    return {
      kind: 'rapid-actions',
      severity: 'medium',
      reason: `${obs.agent} took ${pace.quick} ${obs.stage} actions in a row, each less than ${maxGap} ms after the previous one`,
      suggestion: 'Unusually fast for real work: probably a tight retry loop. Slow it down (cooldown) if it goes on.',
    };
  }

  private outlier(
    kind: 'cost-outlier' | 'latency-outlier',
    baseline: DeepMutable<BaselineState>,
    field: 'cost' | 'latency',
    value: number,
    absoluteMinStd: number,
  ): Rule | undefined {
    const { outlierZ, outlierMinSamples, outlierMinStdFraction, ewmaAlpha } = this.config;
    const base = baseline[field];
    let finding: Rule | undefined;
    if (base.n >= outlierMinSamples) {
      const std = Math.max(Math.sqrt(base.variance), Math.abs(base.mean) * outlierMinStdFraction, absoluteMinStd);
      // One-sided: a cheaper or quicker call than usual is no runaway.
      const z = (value - base.mean) / std;
      if (z > outlierZ) {
        const show = kind === 'cost-outlier' ? (v: number) => `$${usd(v)}` : (v: number) => `${Math.round(v)} ms`;
        finding = {
          kind,
          // A slow call has ended by now and cost nothing extra: recorded, not held for a person.
          severity: kind === 'cost-outlier' && z > 2 * outlierZ ? 'high' : 'medium',
          reason: `${field} ${show(value)} is ${z.toFixed(1)} standard deviations from the baseline of ${show(base.mean)} over ${base.n} runs (threshold ${outlierZ})`,
          suggestion:
            kind === 'cost-outlier'
              ? 'Check what made this call so different (prompt size, model, max_tokens) before it repeats.'
              : 'Check the endpoint or the command for a slowdown or a hang before it repeats.',
        };
      }
    }
    baseline[field] = updated(base, value, ewmaAlpha);
    return finding;
  }
}

/** The baseline with one more sample: exact running mean/variance while n < 1/alpha, then exponentially weighted. */
function updated(base: Ewma, value: number, ewmaAlpha: number): Ewma {
  const n = base.n + 1;
  const alpha = Math.max(ewmaAlpha, 1 / n);
  const diff = value - base.mean;
  const increment = alpha * diff;
  return { n, mean: base.mean + increment, variance: (1 - alpha) * (base.variance + diff * increment) };
}

function usd(micros: number): string {
  return (micros / 1_000_000).toFixed(6);
}
