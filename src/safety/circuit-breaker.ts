/**
 * Per-endpoint circuit breakers with ADR 0002's semantics, built on cockatiel 3.
 *
 * NOT workflow-safe: imports cockatiel and reads `Date.now()`. Use it in activities and activity
 * interceptors only (one registry per worker process).
 *
 * Semantics (defaults from the ADR):
 * - CLOSED → OPEN when errors are ≥ 50 % of ≥ 20 calls in the rolling window (5 min), or after
 *   5 consecutive failures — on exactly the call that reaches the threshold.
 * - OPEN fails fast with `CircuitOpenError` until the cool-down (30 s) has passed.
 * - The first call after the cool-down is a probe and moves the circuit to HALF_OPEN. In
 *   HALF_OPEN one probe runs at a time, at least 5 s after the previous one ended; other calls
 *   fail fast. 3 successful probes → CLOSED; any failed probe → OPEN with a new cool-down.
 *
 * What cockatiel does and what this file adds, and why:
 * - Cockatiel's `CircuitBreakerPolicy` owns CLOSED/OPEN and the cool-down, and runs the first
 *   probe as its own half-open test. Its breakers are combined here in one `IBreaker`
 *   (cockatiel 3.2.1 has no composite breaker): `SamplingBreaker` for the error rate and
 *   `ConsecutiveBreaker` for the run of failures.
 * - Cockatiel closes on the first successful half-open test and, while it runs, makes other
 *   callers wait for it and then run. "3 probes 5 s apart, others fail fast" cannot be expressed
 *   in its options, so this file keeps its own HALF_OPEN phase after cockatiel has closed: it
 *   admits probes 2..n itself and, if one fails, the composite breaker reports "open" to cockatiel.
 * - `SamplingBreaker` opens on failures *strictly greater* than threshold × calls and has a
 *   minimum *rate* (`minimumRps`), not a minimum count; both are converted here so that 10 of
 *   20 calls trips and 19 calls never do.
 * - `SamplingBreaker` advances its ring of 1 s buckets by one bucket per recorded call, so under
 *   sparse traffic calls far older than the window stay counted. Stale buckets are cleared
 *   through its public `state` (its serialisation hook) before every failure is judged, keeping
 *   the window a real rolling time window (at 1 s resolution).
 * - Errors that `isFailure` does not count are carried through cockatiel as a successful value
 *   and rethrown here: left unhandled, cockatiel would skip them when CLOSED but treat one as a
 *   success that closes the circuit when HALF_OPEN. This way they mean "the endpoint answered"
 *   in every state.
 */
import {
  BrokenCircuitError,
  CircuitState as CockatielState,
  ConsecutiveBreaker,
  SamplingBreaker,
  circuitBreaker,
  handleAll,
} from 'cockatiel';
import type { CircuitBreakerPolicy, IBreaker } from 'cockatiel';

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

/** Defaults: ADR 0002 where it gives one; cool-down and window are Warden's choice. */
export const DEFAULT_CIRCUIT_OPTIONS: Readonly<Required<Omit<CircuitBreakerOptions, 'onStateChange' | 'isFailure'>>> = {
  errorRateThreshold: 0.5,
  minimumCalls: 20,
  windowMs: 300_000,
  consecutiveFailures: 5,
  coolDownMs: 30_000,
  probes: 3,
  probeIntervalMs: 5_000,
};

interface SamplingWindow {
  startedAt: number;
  failures: number;
  successes: number;
}
interface SamplingState {
  windows: SamplingWindow[];
  currentWindow: number;
  currentFailures: number;
  currentSuccesses: number;
}

/** What made the composite breaker open, for the transition's reason. */
interface Trip {
  readonly reason: CircuitTransitionReason;
  readonly detail: string;
}

/** SamplingBreaker + ConsecutiveBreaker as one cockatiel `IBreaker`; see the file comment. */
class CompositeBreaker implements IBreaker {
  /**
   * Set while HALF_OPEN probes 2..n run through a cockatiel circuit that is already closed. A call
   * started before the circuit opened that fails meanwhile also counts as a failed probe:
   * conservative, it reopens the circuit.
   */
  probing = false;
  lastTrip: Trip | undefined;
  private readonly sampling: SamplingBreaker;
  private readonly consecutive: ConsecutiveBreaker;
  /** SamplingBreaker's real window length: it rounds the window to whole buckets. */
  private readonly samplingDurationMs: number;

  constructor(private readonly settings: Settings) {
    const windowCount = Math.max(5, Math.ceil(settings.windowMs / 1000));
    this.samplingDurationMs = Math.round(settings.windowMs / windowCount) * windowCount;
    this.sampling = new SamplingBreaker({
      // Cockatiel opens on failures > threshold × total; the ADR says ≥.
      threshold: settings.errorRateThreshold - 1e-9,
      duration: settings.windowMs,
      // Cockatiel wants a rate: total < duration × rate means "too few calls". Half a call of
      // margin makes minimumCalls exact despite float rounding.
      minimumRps: ((settings.minimumCalls - 0.5) * 1000) / this.samplingDurationMs,
    });
    this.consecutive = new ConsecutiveBreaker(settings.consecutiveFailures);
  }

  get state(): unknown {
    return { sampling: this.sampling.state, consecutive: this.consecutive.state };
  }

  set state(value: unknown) {
    const { sampling, consecutive } = value as { sampling: unknown; consecutive: number };
    this.sampling.state = sampling;
    this.consecutive.state = consecutive;
  }

  success(state: CockatielState): void {
    this.sampling.success(state);
    this.consecutive.success();
  }

  failure(state: CockatielState): boolean {
    // Only failures are evaluated, so pruning here is enough to keep the rate a real window.
    this.pruneStaleWindows();
    const rateTrips = this.sampling.failure(state);
    const runTrips = this.consecutive.failure();
    if (this.probing || state !== CockatielState.Closed) {
      this.lastTrip = { reason: 'probe-failed', detail: 'a half-open probe failed' };
      return true;
    }
    const { currentFailures: failures, currentSuccesses: successes } = this.sampling.state as SamplingState;
    if (runTrips) {
      this.lastTrip = { reason: 'consecutive-failures', detail: `${this.consecutive.state as number} consecutive failures (threshold ${this.settings.consecutiveFailures})` };
    } else if (rateTrips) {
      const total = failures + successes;
      this.lastTrip = {
        reason: 'error-rate',
        detail: `${failures} of ${total} calls failed within ${this.settings.windowMs} ms (${((failures / total) * 100).toFixed(1)}% ≥ ${this.settings.errorRateThreshold * 100}%)`,
      };
    }
    return runTrips || rateTrips;
  }

  /** Clears buckets that fell out of the window, which SamplingBreaker itself only does one per call. */
  private pruneStaleWindows(): void {
    const now = Date.now();
    const current = this.sampling.state as SamplingState;
    let failures = 0;
    let successes = 0;
    const windows = current.windows.map((window) => {
      if (now - window.startedAt >= this.samplingDurationMs) return { startedAt: window.startedAt, failures: 0, successes: 0 };
      failures += window.failures;
      successes += window.successes;
      return { ...window };
    });
    this.sampling.state = { windows, currentWindow: current.currentWindow, currentFailures: failures, currentSuccesses: successes };
  }
}

/** A value that smuggles an error the caller does not count past cockatiel as a success. */
class Uncounted {
  constructor(readonly error: unknown) {}
}

/** One endpoint's circuit: cockatiel's policy plus the HALF_OPEN probe phase. */
class EndpointCircuit {
  current: CircuitState = 'CLOSED';
  private openedAt = 0;
  private probeInFlight = false;
  private probesSucceeded = 0;
  private lastProbeEndedAt: number | undefined;
  private readonly breaker: CompositeBreaker;
  private readonly policy: CircuitBreakerPolicy;
  private readonly pending: CircuitStateChange[] = [];

  constructor(
    private readonly endpoint: string,
    private readonly settings: Settings,
  ) {
    this.breaker = new CompositeBreaker(settings);
    this.policy = circuitBreaker(handleAll, { halfOpenAfter: settings.coolDownMs, breaker: this.breaker });
    // Runs inside cockatiel's execute: only update state here; callbacks run later, from our code.
    this.policy.onBreak(() => {
      const trip = this.breaker.lastTrip ?? { reason: 'consecutive-failures', detail: 'cockatiel opened the circuit' };
      this.openedAt = Date.now();
      this.breaker.probing = false;
      this.probeInFlight = false;
      this.transition('OPEN', trip.reason, trip.detail);
    });
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

  async execute<T>(fn: (signal: AbortSignal) => PromiseLike<T> | T, signal?: AbortSignal): Promise<T> {
    try {
      const now = Date.now();
      const wait = this.retryAfterMs(now);
      if (this.current !== 'CLOSED' && (wait > 0 || this.probeInFlight)) {
        throw new CircuitOpenError(this.endpoint, wait, this.current);
      }
      if (this.current === 'CLOSED') return await this.run(fn, signal);
      if (this.current === 'OPEN') {
        this.probesSucceeded = 0;
        this.lastProbeEndedAt = undefined;
        this.transition('HALF_OPEN', 'cool-down-elapsed', `${now - this.openedAt} ms after opening; probing with 1 of ${this.settings.probes} calls`);
      }
      return await this.probe(fn, signal);
    } finally {
      this.flush();
    }
  }

  private async probe<T>(fn: (signal: AbortSignal) => PromiseLike<T> | T, signal?: AbortSignal): Promise<T> {
    this.probeInFlight = true;
    // Probes 2..n run through a cockatiel circuit that already closed after probe 1.
    this.breaker.probing = this.policy.state === CockatielState.Closed;
    let succeeded = false;
    try {
      const result = await this.run(fn, signal);
      succeeded = true;
      return result;
    } catch (error) {
      // An uncounted error rethrown by run() is still a healthy answer from the endpoint.
      succeeded = this.current === 'HALF_OPEN' && !(error instanceof CircuitOpenError);
      throw error;
    } finally {
      this.probeInFlight = false;
      if (succeeded && this.current === 'HALF_OPEN') {
        this.probesSucceeded += 1;
        this.lastProbeEndedAt = Date.now();
        if (this.probesSucceeded >= this.settings.probes) {
          this.breaker.probing = false;
          this.transition('CLOSED', 'probes-succeeded', `${this.probesSucceeded} probe(s) succeeded`);
        }
      }
    }
  }

  /** Runs `fn` through cockatiel; errors the caller does not count pass through as successes. */
  private async run<T>(fn: (signal: AbortSignal) => PromiseLike<T> | T, signal?: AbortSignal): Promise<T> {
    let outcome: T | Uncounted;
    try {
      outcome = await this.policy.execute(async ({ signal: inner }) => {
        try {
          return await fn(inner);
        } catch (error) {
          if (this.settings.isFailure(error)) throw error;
          return new Uncounted(error);
        }
      }, signal);
    } catch (error) {
      if (error instanceof BrokenCircuitError) {
        // Cockatiel and this wrapper disagree on the clock by a millisecond at most.
        throw new CircuitOpenError(this.endpoint, Math.max(1, this.retryAfterMs(Date.now())), this.current === 'CLOSED' ? 'OPEN' : this.current);
      }
      throw error;
    }
    if (outcome instanceof Uncounted) throw outcome.error;
    return outcome;
  }

  private transition(to: CircuitState, reason: CircuitTransitionReason, detail: string): void {
    if (to === this.current) return;
    this.pending.push({ endpoint: this.endpoint, from: this.current, to, reason, detail, at: Date.now() });
    this.current = to;
  }

  private flush(): void {
    const callback = this.settings.onStateChange;
    for (const change of this.pending.splice(0)) {
      try {
        callback?.(change);
      } catch {
        // A failing audit hook must not break the breaker or replace the call's own result.
      }
    }
  }
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
    if (settings.windowMs < 1000) throw new RangeError('windowMs must be at least 1000');
    this.settings = settings;
  }

  /**
   * Runs `fn` through `endpoint`'s circuit. While the circuit is OPEN (or HALF_OPEN with no probe
   * slot) it throws `CircuitOpenError` without calling `fn`; otherwise it returns or throws
   * whatever `fn` does. `fn` receives an AbortSignal that follows `signal`.
   */
  execute<T>(endpoint: string, fn: (signal: AbortSignal) => PromiseLike<T> | T, signal?: AbortSignal): Promise<T> {
    return this.circuit(endpoint).execute(fn, signal);
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
