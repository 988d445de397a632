/**
 * Per-endpoint circuit breakers: Warden stops calling a model endpoint that keeps failing, and
 * probes it carefully before trusting it again.
 *
 * NOT workflow-safe: reads `Date.now()`. Use it in activities and activity interceptors only (one
 * registry per worker process).
 *
 * Semantics (defaults in DEFAULT_CIRCUIT_OPTIONS):
 * - CLOSED → OPEN when errors are ≥ 50 % of ≥ 20 calls in the rolling window (5 min, at 1 s
 *   resolution), or after 5 consecutive failures — on exactly the call that reaches the threshold.
 * - OPEN fails fast with `CircuitOpenError` until the cool-down (30 s) has passed.
 * - The first call after the cool-down is a probe and moves the circuit to HALF_OPEN. In
 *   HALF_OPEN one probe runs at a time, at least 5 s after the previous one ended; other calls
 *   fail fast. 3 successful probes → CLOSED; any failed probe → OPEN with a new cool-down.
 * - Errors that `isFailure` does not count (our own bad request, a policy refusal) mean "the
 *   endpoint answered" in every state: they break a run of failures and pass a probe.
 *
 * Why this is our own code and not a library's: opossum has no failure run, closes after one
 * successful half-open trial and turns its window over with timers; cockatiel's
 * `CircuitBreakerPolicy` also closes on the first successful half-open test, and makes concurrent
 * callers wait for it and then run, so "N probes spaced by an interval, others fail fast" cannot
 * be expressed; it does not say how long a caller should wait (`retryAfterMs`); it counts an error
 * it does not handle as a passed test when half-open but ignores it when closed; and its
 * `SamplingBreaker` has a minimum rate, not a minimum count, and keeps calls older than its window
 * under sparse traffic. Using it meant re-implementing HALF_OPEN beside it and reading its
 * undocumented internal state; the state machine below is smaller than that wrapper was.
 */
import { parseDuration } from '../shared/duration';

/**
 * Failure types that say nothing about an endpoint's health, so they neither trip its circuit nor
 * count in the error rate. Our own bad requests and setup (a bad intent or script, an unknown
 * model, git, a missing sandbox), the global stop, and policy refusals of an answer the endpoint
 * did give: the wrong model answered (MODEL_MISMATCH), development mode refused a paid endpoint
 * (MODE_VIOLATION), the structured answer did not validate (INVALID_STRUCTURED_OUTPUT), the keys
 * were refused (CREDENTIALS_EXHAUSTED), an edit was refused (SAFETY_HALT), a budget or rate limit
 * of ours said no. Plain strings, so this module needs nothing from the rest of Warden.
 */
export const NOT_ENDPOINT_FAILURES: ReadonlySet<string> = new Set<string>([
  'INVALID_INTENT',
  'INVALID_SCRIPT',
  'PATH_OUTSIDE_WORKTREE',
  'UNKNOWN_MODEL',
  'GIT_FAILED',
  'BASE_BRANCH_DIRTY',
  'MERGE_CONFLICT',
  'SANDBOX_UNAVAILABLE',
  'KILL_SWITCH',
  'MODEL_MISMATCH',
  'MODE_VIOLATION',
  'INVALID_STRUCTURED_OUTPUT',
  'CREDENTIALS_EXHAUSTED',
  'SAFETY_HALT',
  'BUDGET_EXCEEDED',
  'RATE_LIMITED',
  'REVIEW_POLICY_VIOLATION',
]);

/**
 * A circuit's key: the endpoint, not the model name. Two servers answering for the same model
 * are two circuits, and one server's models are one circuit each: `openai https://host/v1 gpt-4.1`.
 */
export function endpointKey(parts: { readonly kind: string; readonly baseUrl?: string; readonly model: string }): string {
  return [parts.kind, parts.baseUrl?.replace(/\/+$/, ''), parts.model].filter(Boolean).join(' ');
}

/** Breaker state, as recorded in CIRCUIT_TRIPPED / CIRCUIT_RESET events. */
export type CircuitState = 'CLOSED' | 'OPEN' | 'HALF_OPEN';

/** Why a transition happened. */
export type CircuitTransitionReason =
  | 'error-rate'
  | 'consecutive-failures'
  | 'cool-down-elapsed'
  | 'probe-failed'
  | 'probes-succeeded';

/** One transition, for the caller to turn into a SafetyEvent (CLOSED→OPEN: CIRCUIT_TRIPPED, →CLOSED: CIRCUIT_RESET). */
export interface CircuitStateChange {
  readonly endpoint: string;
  readonly from: CircuitState;
  readonly to: CircuitState;
  readonly reason: CircuitTransitionReason;
  /** One sentence for people, with the numbers. */
  readonly detail: string;
  /** `Date.now()` at the transition. */
  readonly at: number;
}

/** Configuration shared by every endpoint of a registry; every field has a default. */
export interface CircuitBreakerOptions {
  /** Error fraction that opens the circuit, 0 < x ≤ 1 (0.5); reaching it is enough. */
  readonly errorRateThreshold?: number;
  /** Calls needed in the window before the error rate can open it (20). */
  readonly minimumCalls?: number;
  /** Rolling window of the error rate in ms, at 1 s resolution (300 000, as the config's default). */
  readonly windowMs?: number;
  /** Consecutive failures that open it (5). */
  readonly consecutiveFailures?: number;
  /** Time OPEN before the first probe is admitted (30 000). */
  readonly coolDownMs?: number;
  /** Successful probes needed to close again (3). */
  readonly probes?: number;
  /** Minimum gap between the end of one probe and the start of the next (5 000). */
  readonly probeIntervalMs?: number;
  /**
   * Whether an error counts against the endpoint (default: every error does). Errors for which it
   * returns false — a 400 caused by our own request, a cancellation — are rethrown but counted as
   * a healthy answer.
   */
  readonly isFailure?: (error: unknown) => boolean;
  /** Called synchronously on every transition. Exceptions it throws are swallowed, so make it non-throwing. */
  readonly onStateChange?: (change: CircuitStateChange) => void;
}

/**
 * Thrown instead of calling an endpoint whose circuit is OPEN, or HALF_OPEN with no probe slot
 * free. `retryAfterMs`: the rest of the cool-down (OPEN), the rest of the probe interval
 * (HALF_OPEN), or the probe interval as a lower bound while another probe is still running.
 */
export class CircuitOpenError extends Error {
  constructor(
    readonly endpoint: string,
    readonly retryAfterMs: number,
    readonly state: 'OPEN' | 'HALF_OPEN',
  ) {
    super(`circuit for ${endpoint} is ${state}; retry in ${retryAfterMs} ms`);
    this.name = 'CircuitOpenError';
  }
}

type Settings = Required<Omit<CircuitBreakerOptions, 'onStateChange'>> & Pick<CircuitBreakerOptions, 'onStateChange'>;

/** Defaults: cool-down and window are Warden's choice, the rest the usual breaker settings. */
export const DEFAULT_CIRCUIT_OPTIONS: Readonly<Required<Omit<CircuitBreakerOptions, 'onStateChange' | 'isFailure'>>> = {
  errorRateThreshold: 0.5,
  minimumCalls: 20,
  windowMs: 300_000,
  consecutiveFailures: 5,
  coolDownMs: 30_000,
  probes: 3,
  probeIntervalMs: 5_000,
};

const BUCKET_MS = 1_000;

/** Calls and failures per second over the last `windowMs`: memory bounded by the window, not the traffic. */
class RollingCounts {
  private buckets: { startedAt: number; calls: number; failures: number }[] = [];

  constructor(private readonly windowMs: number) {}

  record(at: number, failed: boolean): void {
    this.prune(at);
    const startedAt = at - (at % BUCKET_MS);
    let bucket = this.buckets.at(-1);
    if (!bucket || bucket.startedAt < startedAt) {
      bucket = { startedAt, calls: 0, failures: 0 };
      this.buckets.push(bucket);
    }
    bucket.calls += 1;
    if (failed) bucket.failures += 1;
  }

  /** Totals of the buckets that started less than `windowMs` before `now`. */
  totals(now: number): { calls: number; failures: number } {
    this.prune(now);
    let calls = 0;
    let failures = 0;
    for (const b of this.buckets) {
      calls += b.calls;
      failures += b.failures;
    }
    return { calls, failures };
  }

  clear(): void {
    this.buckets = [];
  }

  private prune(now: number): void {
    const firstKept = this.buckets.findIndex((b) => now - b.startedAt < this.windowMs);
    this.buckets.splice(0, firstKept < 0 ? this.buckets.length : firstKept);
  }
}

/** One endpoint's circuit. */
class EndpointCircuit {
  current: CircuitState = 'CLOSED';
  private openedAt = 0;
  private consecutiveFailures = 0;
  private readonly counts: RollingCounts;
  private probeInFlight = false;
  private probesSucceeded = 0;
  private lastProbeEndedAt: number | undefined;

  constructor(
    private readonly endpoint: string,
    private readonly settings: Settings,
  ) {
    this.counts = new RollingCounts(settings.windowMs);
  }

  retryAfterMs(now: number): number {
    switch (this.current) {
      case 'CLOSED':
        return 0;
      case 'OPEN':
        return Math.max(0, this.openedAt + this.settings.coolDownMs - now);
      case 'HALF_OPEN':
        if (this.probeInFlight) return this.settings.probeIntervalMs;
        return this.lastProbeEndedAt === undefined ? 0 : Math.max(0, this.lastProbeEndedAt + this.settings.probeIntervalMs - now);
    }
  }

  async execute<T>(fn: (signal: AbortSignal) => PromiseLike<T> | T, signal: AbortSignal): Promise<T> {
    const now = Date.now();
    const wait = this.retryAfterMs(now);
    if (this.current !== 'CLOSED' && (wait > 0 || this.probeInFlight)) {
      throw new CircuitOpenError(this.endpoint, wait, this.current);
    }
    if (this.current === 'CLOSED') return this.call(fn, signal, false);
    if (this.current === 'OPEN') {
      this.probesSucceeded = 0;
      this.lastProbeEndedAt = undefined;
      this.consecutiveFailures = 0;
      this.counts.clear();
      this.transition('HALF_OPEN', 'cool-down-elapsed', `${now - this.openedAt} ms after opening; probing with 1 of ${this.settings.probes} calls`);
    }
    this.probeInFlight = true;
    try {
      return await this.call(fn, signal, true);
    } finally {
      this.probeInFlight = false;
    }
  }

  /** Runs `fn` and judges its outcome in the state the circuit is in when it ends. */
  private async call<T>(fn: (signal: AbortSignal) => PromiseLike<T> | T, signal: AbortSignal, probe: boolean): Promise<T> {
    let result: T;
    try {
      result = await fn(signal);
    } catch (error) {
      if (this.settings.isFailure(error)) this.failed();
      else this.answered(probe);
      throw error;
    }
    this.answered(probe);
    return result;
  }

  /** The endpoint answered (a success, or an error that does not count against it). */
  private answered(probe: boolean): void {
    const now = Date.now();
    // Only a probe's answer counts once the circuit has left CLOSED: a call admitted before it
    // opened says nothing about the endpoint's recovery.
    if (this.current === 'OPEN' || (this.current === 'HALF_OPEN' && !probe)) return;
    this.consecutiveFailures = 0;
    this.counts.record(now, false);
    if (this.current !== 'HALF_OPEN') return;
    this.probesSucceeded += 1;
    this.lastProbeEndedAt = now;
    if (this.probesSucceeded >= this.settings.probes) {
      this.transition('CLOSED', 'probes-succeeded', `${this.probesSucceeded} probe(s) succeeded`);
    }
  }

  private failed(): void {
    const now = Date.now();
    if (this.current === 'OPEN') return;
    if (this.current === 'HALF_OPEN') {
      // Also a call admitted before the circuit opened that fails now: conservative, it reopens.
      this.open(now, 'probe-failed', 'a half-open probe failed');
      return;
    }
    this.consecutiveFailures += 1;
    this.counts.record(now, true);
    const { consecutiveFailures: limit, errorRateThreshold, minimumCalls, windowMs } = this.settings;
    if (this.consecutiveFailures >= limit) {
      this.open(now, 'consecutive-failures', `${this.consecutiveFailures} consecutive failures (threshold ${limit})`);
      return;
    }
    // Judged on failures only, so the circuit opens on exactly the call that reaches the rate.
    const { calls, failures } = this.counts.totals(now);
    if (calls >= minimumCalls && failures / calls >= errorRateThreshold) {
      const rate = `${((failures / calls) * 100).toFixed(1)}% ≥ ${errorRateThreshold * 100}%`;
      this.open(now, 'error-rate', `${failures} of ${calls} calls failed within ${windowMs} ms (${rate})`);
    }
  }

  private open(now: number, reason: CircuitTransitionReason, detail: string): void {
    this.openedAt = now;
    this.transition('OPEN', reason, detail);
  }

  private transition(to: CircuitState, reason: CircuitTransitionReason, detail: string): void {
    if (to === this.current) return;
    const change: CircuitStateChange = { endpoint: this.endpoint, from: this.current, to, reason, detail, at: Date.now() };
    this.current = to;
    try {
      this.settings.onStateChange?.(change);
    } catch {
      // A failing audit hook must not break the breaker or replace the call's own result.
    }
  }
}

/** The breaker settings of the config file (durations as text), as the registry takes them. */
export function circuitOptionsOf(config: {
  readonly failureRate: number;
  readonly minimumCalls: number;
  readonly consecutiveFailures: number;
  readonly window: string;
  readonly halfOpenAfter: string;
  readonly probes: number;
  readonly probeInterval: string;
}): CircuitBreakerOptions {
  return {
    errorRateThreshold: config.failureRate,
    minimumCalls: config.minimumCalls,
    consecutiveFailures: config.consecutiveFailures,
    windowMs: Math.max(1_000, parseDuration(config.window)),
    coolDownMs: parseDuration(config.halfOpenAfter),
    probes: config.probes,
    probeIntervalMs: parseDuration(config.probeInterval),
  };
}

/**
 * Circuit breakers keyed by endpoint (a model endpoint, a host), created on first use with the
 * registry's options. One registry per worker process.
 */
export class CircuitBreakerRegistry {
  private readonly settings: Settings;
  private readonly circuits = new Map<string, EndpointCircuit>();

  constructor(options: CircuitBreakerOptions = {}) {
    const settings: Settings = { ...DEFAULT_CIRCUIT_OPTIONS, isFailure: () => true, ...stripUndefined(options) };
    if (!(settings.errorRateThreshold > 0 && settings.errorRateThreshold <= 1)) throw new RangeError('errorRateThreshold must be in (0, 1]');
    for (const key of ['minimumCalls', 'consecutiveFailures', 'probes'] as const) {
      if (!Number.isSafeInteger(settings[key]) || settings[key] < 1) throw new RangeError(`${key} must be a positive integer`);
    }
    for (const key of ['windowMs', 'coolDownMs', 'probeIntervalMs'] as const) {
      if (!(settings[key] >= 0) || !Number.isFinite(settings[key])) throw new RangeError(`${key} must be a non-negative number of ms`);
    }
    if (settings.windowMs < BUCKET_MS) throw new RangeError(`windowMs must be at least ${BUCKET_MS}`);
    this.settings = settings;
  }

  /**
   * Runs `fn` through `endpoint`'s circuit. While the circuit is OPEN (or HALF_OPEN with no probe
   * slot) it throws `CircuitOpenError` without calling `fn`; otherwise it returns or throws
   * whatever `fn` does. `fn` receives `signal` (one that never aborts if none is given).
   */
  async execute<T>(endpoint: string, fn: (signal: AbortSignal) => PromiseLike<T> | T, signal?: AbortSignal): Promise<T> {
    return this.circuit(endpoint).execute(fn, signal ?? new AbortController().signal);
  }

  /** The endpoint's state; CLOSED for an endpoint never used. OPEN turns HALF_OPEN when a probe is admitted. */
  state(endpoint: string): CircuitState {
    return this.circuits.get(endpoint)?.current ?? 'CLOSED';
  }

  /** How long until `execute(endpoint, …)` would be admitted (0: now). */
  retryAfterMs(endpoint: string): number {
    return this.circuits.get(endpoint)?.retryAfterMs(Date.now()) ?? 0;
  }

  /** Endpoints used so far, sorted. */
  endpoints(): string[] {
    return [...this.circuits.keys()].sort();
  }

  private circuit(endpoint: string): EndpointCircuit {
    let circuit = this.circuits.get(endpoint);
    if (!circuit) {
      circuit = new EndpointCircuit(endpoint, this.settings);
      this.circuits.set(endpoint, circuit);
    }
    return circuit;
  }
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
