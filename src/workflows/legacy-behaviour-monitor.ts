/**
 * The behaviour monitor as workflows ran it before WORKER_MONITOR_PATCH: one per intent, fed once
 * per agent stage result. Kept unchanged so that those histories replay with the same findings
 * (and so the same ledger writes); new intents are watched by the worker (src/safety/behaviour-monitor.ts).
 * Do not change its behaviour.
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

/** One thing an agent did (typically one activity execution), as the activity interceptor saw it. */
export interface Observation {
  /** When it ended, in ms (workflow or activity clock; the monitor never reads one). */
  readonly at: number;
  readonly stage: string;
  readonly agent: string;
  /** A short key or hash of what was done (the command, the prompt, the tool call). */
  readonly action: string;
  /** A hash of what came out. */
  readonly outputHash: string;
  /** What it cost, as an exact decimal string ("0.012500"); "0" for unpaid actions. */
  readonly costUsd: string;
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
  readonly stage?: string;
  readonly agent?: string;
  readonly endpoint?: string;
}

/** Thresholds; every field has a default from the seeds. */
export interface BehaviourMonitorConfig {
  /** Identical action + output tolerated this many times in a row: one more is a HIGH loop, 2× is CRITICAL (5). */
  readonly loopThreshold: number;
  /** Steps of strict A-B-A-B (same actions, same outputs) that make an alternation (4); 2× is HIGH. */
  readonly alternationMinSteps: number;
  /** Paid attempts with strictly increasing cost needed for escalation (4). */
  readonly escalationMinAttempts: number;
  /** …and the last must cost at least this multiple of the first (2). */
  readonly escalationFactor: number;
  /** More than this many actions of one agent inside `rapidWindowMs` is rapid (10); 2× is HIGH. */
  readonly rapidMaxActions: number;
  readonly rapidWindowMs: number;
  /** z-score beyond which a value is an outlier (3); 2× is HIGH. */
  readonly outlierZ: number;
  /** Samples a baseline needs before it judges (10). */
  readonly outlierMinSamples: number;
  /** EWMA weight of a new sample once warmed up (0.1); before that the exact running mean is used. */
  readonly ewmaAlpha: number;
  /** Standard deviation floor as a fraction of the mean, so a near-constant baseline is not hair-triggered (0.05). */
  readonly outlierMinStdFraction: number;
  /** Absolute floors of the standard deviation: µ$ for cost (1), ms for latency (1). */
  readonly costMinStdMicros: number;
  readonly latencyMinStdMs: number;
  /** More than this many OPEN↔CLOSED changes of one endpoint inside `breakerWindowMs` is oscillation (3). */
  readonly breakerMaxFlips: number;
  readonly breakerWindowMs: number;
}

/** Defaults (seeds 000 and 001). */
export const DEFAULT_MONITOR_CONFIG: BehaviourMonitorConfig = {
  loopThreshold: 5,
  alternationMinSteps: 4,
  escalationMinAttempts: 4,
  escalationFactor: 2,
  rapidMaxActions: 10,
  rapidWindowMs: 60_000,
  outlierZ: 3,
  outlierMinSamples: 10,
  ewmaAlpha: 0.1,
  outlierMinStdFraction: 0.05,
  costMinStdMicros: 1,
  latencyMinStdMs: 1,
  breakerMaxFlips: 3,
  breakerWindowMs: 10 * 60_000,
};

/** Running baseline: sample count, mean and variance (exact while n < 1/alpha, EWMA after). */
export interface Ewma {
  readonly n: number;
  readonly mean: number;
  readonly variance: number;
}

/** Per (stage, agent) sequence state. */
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
  readonly costReported: boolean;
  readonly costBaseline: Ewma;
  readonly latencyBaseline: Ewma;
}

/** Per agent: recent action times, for rapid-action detection. */
export interface AgentActivityState {
  readonly times: readonly number[];
  readonly level: number;
}

/** Per endpoint: last stable breaker state and recent flips. */
export interface BreakerHistoryState {
  readonly stable: 'OPEN' | 'CLOSED';
  readonly flips: readonly number[];
  readonly level: number;
}

/** The monitor's whole state: plain JSON data. Keys of `streams` are `JSON.stringify([stage, agent])`. */
export interface MonitorState {
  readonly streams: Readonly<Record<string, StreamState>>;
  readonly agents: Readonly<Record<string, AgentActivityState>>;
  readonly breakers: Readonly<Record<string, BreakerHistoryState>>;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] extends readonly (infer U)[] ? U[] : T[K] };

const EMPTY_EWMA: Ewma = { n: 0, mean: 0, variance: 0 };

/** An empty state. */
export function emptyMonitorState(): MonitorState {
  return { streams: {}, agents: {}, breakers: {} };
}

function clone<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

function severityAt(level: number, levels: readonly Severity[]): Severity {
  return levels[Math.min(level, levels.length) - 1];
}

/**
 * Feed it observations in time order; it answers with the findings each one causes.
 * Sequences (loop, alternation, escalating cost) and baselines (outliers) are kept per stage and
 * agent, so test runs and model calls of one stage never share a baseline; rapid actions are
 * counted per agent. Construct with a saved `MonitorState` to resume exactly where a previous
 * monitor stopped.
 */
export class BehaviourMonitor {
  private readonly config: BehaviourMonitorConfig;
  private readonly streams: Record<string, Mutable<StreamState>>;
  private readonly agents: Record<string, Mutable<AgentActivityState>>;
  private readonly breakers: Record<string, Mutable<BreakerHistoryState>>;

  constructor(config: Partial<BehaviourMonitorConfig> = {}, state: MonitorState = emptyMonitorState()) {
    this.config = { ...DEFAULT_MONITOR_CONFIG, ...config };
    const copy = clone(state) as { streams: Record<string, Mutable<StreamState>>; agents: Record<string, Mutable<AgentActivityState>>; breakers: Record<string, Mutable<BreakerHistoryState>> };
    this.streams = copy.streams;
    this.agents = copy.agents;
    this.breakers = copy.breakers;
  }

  /** A deep, plain-data copy of the state. */
  snapshot(): MonitorState {
    return clone({ streams: this.streams, agents: this.agents, breakers: this.breakers });
  }

  /** Records one observation and returns the findings it causes (often none). */
  observe(obs: Observation): Finding[] {
    const key = JSON.stringify([obs.stage, obs.agent]);
    const stream = (this.streams[key] ??= {
      last: null,
      beforeLast: null,
      run: 0,
      loopLevel: 0,
      alternation: 0,
      alternationLevel: 0,
      lastCostMicros: null,
      costRunStartMicros: 0,
      costRun: 0,
      costReported: false,
      costBaseline: { ...EMPTY_EWMA },
      latencyBaseline: { ...EMPTY_EWMA },
    });
    const where = { at: obs.at, stage: obs.stage, agent: obs.agent };
    const findings: Finding[] = [];
    const push = (finding: Omit<Finding, 'at' | 'stage' | 'agent'> | undefined): void => {
      if (finding) findings.push({ ...finding, ...where });
    };

    push(this.sequence(stream, obs));
    push(this.alternationFinding(stream));
    const costMicros = Number(toMicros(obs.costUsd));
    push(this.escalation(stream, costMicros));
    push(this.rapid(obs));
    if (costMicros > 0) push(this.outlier('cost-outlier', stream, 'costBaseline', costMicros, this.config.costMinStdMicros));
    if (Number.isFinite(obs.latencyMs)) push(this.outlier('latency-outlier', stream, 'latencyBaseline', obs.latencyMs, this.config.latencyMinStdMs));
    return findings;
  }

  /**
   * Records a circuit breaker's state change for `endpoint` at `at`. Each change between OPEN and
   * CLOSED (HALF_OPEN in between is ignored) is one flip; more than `breakerMaxFlips` flips
   * inside `breakerWindowMs` is oscillation. Breakers start CLOSED.
   */
  observeBreaker(endpoint: string, state: ObservedBreakerState, at: number): Finding[] {
    const { breakerMaxFlips: max, breakerWindowMs: windowMs } = this.config;
    const history = (this.breakers[endpoint] ??= { stable: 'CLOSED', flips: [], level: 0 });
    if (state !== 'HALF_OPEN' && state !== history.stable) {
      history.stable = state;
      history.flips.push(at);
    }
    history.flips = history.flips.filter((t) => t <= at && at - t < windowMs).slice(-(max + 1));
    const level = history.flips.length > max ? 1 : 0;
    const rising = level > history.level;
    history.level = level;
    if (!rising) return [];
    return [
      {
        kind: 'breaker-oscillation',
        severity: 'high',
        reason: `circuit for ${endpoint} changed between OPEN and CLOSED ${history.flips.length} times within ${windowMs} ms (more than ${max})`,
        suggestion: 'Treat the endpoint as down rather than flaky: lengthen its cool-down, or route to another model or endpoint until it is stable.',
        at,
        endpoint,
      },
    ];
  }

  private sequence(stream: Mutable<StreamState>, obs: Observation): Omit<Finding, 'at' | 'stage' | 'agent'> | undefined {
    // Action and output together: the same command with a new answer (polling) is progress.
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
    const level = stream.run >= 2 * threshold ? 2 : stream.run > threshold ? 1 : 0;
    const rising = level > stream.loopLevel;
    stream.loopLevel = level;
    if (!rising) return undefined;
    return {
      kind: 'loop',
      severity: severityAt(level, ['high', 'critical']),
      reason: `${obs.agent} repeated the same action with the same output ${stream.run} times in a row (tolerated: ${threshold})`,
      suggestion: 'The agent is stuck in a loop: pause it and change its input (prompt, context, approach) before resuming.',
    };
  }

  private alternationFinding(stream: Mutable<StreamState>): Omit<Finding, 'at' | 'stage' | 'agent'> | undefined {
    const min = this.config.alternationMinSteps;
    const level = stream.alternation >= 2 * min ? 2 : stream.alternation >= min ? 1 : 0;
    const rising = level > stream.alternationLevel;
    stream.alternationLevel = level;
    if (!rising) return undefined;
    return {
      kind: 'alternation',
      severity: severityAt(level, ['medium', 'high']),
      reason: `the agent alternated between the same two actions with the same two outputs for ${stream.alternation} steps`,
      suggestion: 'It is undoing and redoing its own work (A-B-A-B) without progress: pause it and diagnose which of the two states is right.',
    };
  }

  private escalation(stream: Mutable<StreamState>, costMicros: number): Omit<Finding, 'at' | 'stage' | 'agent'> | undefined {
    // Unpaid actions (tool calls, test runs) are not attempts and leave the cost run alone.
    if (costMicros <= 0) return undefined;
    if (stream.lastCostMicros !== null && costMicros > stream.lastCostMicros) {
      stream.costRun += 1;
    } else {
      stream.costRun = 1;
      stream.costRunStartMicros = costMicros;
      stream.costReported = false;
    }
    stream.lastCostMicros = costMicros;
    const { escalationMinAttempts: min, escalationFactor: factor } = this.config;
    if (stream.costReported || stream.costRun < min || costMicros < factor * stream.costRunStartMicros) return undefined;
    stream.costReported = true;
    return {
      kind: 'escalating-cost',
      severity: 'medium',
      reason: `cost per attempt rose ${stream.costRun} times in a row, from $${usd(stream.costRunStartMicros)} to $${usd(costMicros)}`,
      suggestion: 'Each retry costs more (growing context?): check that the attempts converge and that the budget covers where this is heading.',
    };
  }

  private rapid(obs: Observation): Omit<Finding, 'at' | 'stage' | 'agent'> | undefined {
    const { rapidMaxActions: max, rapidWindowMs: windowMs } = this.config;
    const activity = (this.agents[obs.agent] ??= { times: [], level: 0 });
    activity.times.push(obs.at);
    activity.times = activity.times.filter((t) => t <= obs.at && obs.at - t < windowMs).slice(-(2 * max + 1));
    const count = activity.times.length;
    const level = count > 2 * max ? 2 : count > max ? 1 : 0;
    const rising = level > activity.level;
    activity.level = level;
    if (!rising) return undefined;
    return {
      kind: 'rapid-actions',
      severity: severityAt(level, ['medium', 'high']),
      reason: `${obs.agent} took ${count} actions within ${windowMs} ms (more than ${level === 2 ? 2 * max : max})`,
      suggestion: 'Unusually fast for real work: probably a tight retry loop. Slow it down (cooldown) or pause it.',
    };
  }

  private outlier(
    kind: 'cost-outlier' | 'latency-outlier',
    stream: Mutable<StreamState>,
    field: 'costBaseline' | 'latencyBaseline',
    value: number,
    absoluteMinStd: number,
  ): Omit<Finding, 'at' | 'stage' | 'agent'> | undefined {
    const { outlierZ, outlierMinSamples, outlierMinStdFraction, ewmaAlpha } = this.config;
    const base = stream[field];
    let finding: Omit<Finding, 'at' | 'stage' | 'agent'> | undefined;
    if (base.n >= outlierMinSamples) {
      const std = Math.max(Math.sqrt(base.variance), Math.abs(base.mean) * outlierMinStdFraction, absoluteMinStd);
      const z = Math.abs(value - base.mean) / std;
      if (z > outlierZ) {
        const show = kind === 'cost-outlier' ? (v: number) => `$${usd(v)}` : (v: number) => `${Math.round(v)} ms`;
        finding = {
          kind,
          severity: z > 2 * outlierZ ? 'high' : 'medium',
          reason: `${kind === 'cost-outlier' ? 'cost' : 'latency'} ${show(value)} is ${z.toFixed(1)} standard deviations from the baseline of ${show(base.mean)} (threshold ${outlierZ})`,
          suggestion:
            kind === 'cost-outlier'
              ? 'Check what made this call so different (prompt size, model, max_tokens) before it repeats.'
              : 'Check the endpoint or the command for a slowdown or a hang before it repeats.',
        };
      }
    }
    // Exact running mean/variance while n < 1/alpha, then exponentially weighted.
    const n = base.n + 1;
    const alpha = Math.max(ewmaAlpha, 1 / n);
    const diff = value - base.mean;
    const increment = alpha * diff;
    stream[field] = { n, mean: base.mean + increment, variance: (1 - alpha) * (base.variance + diff * increment) };
    return finding;
  }
}

function usd(micros: number): string {
  return (micros / 1_000_000).toFixed(6);
}
