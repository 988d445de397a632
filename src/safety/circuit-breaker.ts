/**
 * Per-endpoint circuit breakers: Warden stops calling a model endpoint that keeps failing, and
 * probes it carefully before trusting it again.
 *
 * NOT workflow-safe: reads `Date.now()`. Use it in activities and activity interceptors only.
 * The state machine itself is circuit-state.ts (pure); CircuitBreakerRegistry keeps it in this
 * process's memory, src/ledger/shared-circuits.ts in a row every worker shares.
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
 * - A call that `isUnanswered` says was stopped before any answer (cancelled, killed) counts
 *   neither way; a probe slot it held is free again.
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
import { CircuitMachine, FOREVER, type CircuitSettings, type CircuitState, type CircuitStateChange } from './circuit-state';

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

export type { CircuitState, CircuitStateChange, CircuitTransitionReason } from './circuit-state';

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
   * returns false — a 400 caused by our own request — are rethrown but counted as a healthy answer
   * (unless `isUnanswered` says there was none).
   */
  readonly isFailure?: (error: unknown) => boolean;
  /**
   * Whether the call was stopped before the endpoint could answer (default: never). Such a call —
   * cancelled, or killed by a person's stop — says nothing of the endpoint either way: it is not
   * counted, and a probe slot it held is free again.
   */
  readonly isUnanswered?: (error: unknown) => boolean;
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

/** Defaults: cool-down and window are Warden's choice, the rest the usual breaker settings. */
export const DEFAULT_CIRCUIT_OPTIONS: Readonly<Required<Omit<CircuitBreakerOptions, 'onStateChange' | 'isFailure' | 'isUnanswered'>>> = {
  errorRateThreshold: 0.5,
  minimumCalls: 20,
  windowMs: 300_000,
  consecutiveFailures: 5,
  coolDownMs: 30_000,
  probes: 3,
  probeIntervalMs: 5_000,
};

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

/** A registry's settings: the machine's, what counts as a failure, and who hears of transitions. */
export interface CircuitRegistrySettings extends CircuitSettings {
  readonly isFailure: (error: unknown) => boolean;
  readonly isUnanswered: (error: unknown) => boolean;
  readonly onStateChange?: (change: CircuitStateChange) => void;
}

/** Options with their defaults filled in and checked; throws RangeError on a bad one. */
export function circuitSettingsOf(options: CircuitBreakerOptions = {}): CircuitRegistrySettings {
  const settings = { ...DEFAULT_CIRCUIT_OPTIONS, isFailure: () => true, isUnanswered: () => false, ...stripUndefined(options) };
  if (!(settings.errorRateThreshold > 0 && settings.errorRateThreshold <= 1)) throw new RangeError('errorRateThreshold must be in (0, 1]');
  for (const key of ['minimumCalls', 'consecutiveFailures', 'probes'] as const) {
    if (!Number.isSafeInteger(settings[key]) || settings[key] < 1) throw new RangeError(`${key} must be a positive integer`);
  }
  for (const key of ['windowMs', 'coolDownMs', 'probeIntervalMs'] as const) {
    if (!(settings[key] >= 0) || !Number.isFinite(settings[key])) throw new RangeError(`${key} must be a non-negative number of ms`);
  }
  if (settings.windowMs < 1_000) throw new RangeError('windowMs must be at least 1000');
  return settings;
}

/** Announces transitions in order; what the hook throws is swallowed. */
export function announceChanges(changes: readonly CircuitStateChange[], onStateChange: CircuitRegistrySettings['onStateChange']): void {
  for (const change of changes) {
    try {
      onStateChange?.(change);
    } catch {
      // A failing audit hook must not break the breaker or replace the call's own result.
    }
  }
}

/**
 * Circuits keyed by endpoint, as the gateway and the circuit layer use them: the worker's own
 * (CircuitBreakerRegistry) or shared by every worker (src/ledger/shared-circuits.ts).
 */
export interface CircuitBreakers {
  /** Runs `fn` through `endpoint`'s circuit, or throws `CircuitOpenError` without calling it. */
  execute<T>(endpoint: string, fn: (signal: AbortSignal) => PromiseLike<T> | T, signal?: AbortSignal): Promise<T>;
  /** The endpoint's state and how long until a call would be admitted (0: now). */
  status(endpoint: string): Promise<{ readonly state: CircuitState; readonly retryAfterMs: number }>;
}

/**
 * Circuit breakers keyed by endpoint (a model endpoint, a host), created on first use with the
 * registry's options, in this process's memory at `Date.now()`.
 */
export class CircuitBreakerRegistry implements CircuitBreakers {
  private readonly settings: CircuitRegistrySettings;
  private readonly circuits = new Map<string, CircuitMachine>();
  private probes = 0;

  constructor(options: CircuitBreakerOptions = {}) {
    this.settings = circuitSettingsOf(options);
  }

  /**
   * Runs `fn` through `endpoint`'s circuit. While the circuit is OPEN (or HALF_OPEN with no probe
   * slot) it throws `CircuitOpenError` without calling `fn`; otherwise it returns or throws
   * whatever `fn` does. `fn` receives `signal` (one that never aborts if none is given).
   */
  async execute<T>(endpoint: string, fn: (signal: AbortSignal) => PromiseLike<T> | T, signal?: AbortSignal): Promise<T> {
    const machine = this.circuit(endpoint);
    // A slot that never expires: this process always gives it back (below).
    const probeId = `probe-${++this.probes}`;
    const admission = machine.admit(Date.now(), { id: probeId, until: FOREVER });
    this.announce(machine);
    if (admission.kind === 'refused') throw new CircuitOpenError(endpoint, admission.retryAfterMs, admission.state);
    const held = admission.kind === 'probe' ? probeId : undefined;
    let result: T;
    try {
      result = await fn(signal ?? new AbortController().signal);
    } catch (error) {
      if (this.settings.isUnanswered(error)) machine.unanswered(held);
      else if (this.settings.isFailure(error)) machine.failed(Date.now(), held);
      else machine.answered(Date.now(), held);
      this.announce(machine);
      throw error;
    }
    machine.answered(Date.now(), held);
    this.announce(machine);
    return result;
  }

  async status(endpoint: string): Promise<{ state: CircuitState; retryAfterMs: number }> {
    return { state: this.state(endpoint), retryAfterMs: this.retryAfterMs(endpoint) };
  }

  /** The endpoint's state; CLOSED for an endpoint never used. OPEN turns HALF_OPEN when a probe is admitted. */
  state(endpoint: string): CircuitState {
    return this.circuits.get(endpoint)?.state ?? 'CLOSED';
  }

  /** How long until `execute(endpoint, …)` would be admitted (0: now). */
  retryAfterMs(endpoint: string): number {
    return this.circuits.get(endpoint)?.retryAfterMs(Date.now()) ?? 0;
  }

  /** Endpoints used so far, sorted. */
  endpoints(): string[] {
    return [...this.circuits.keys()].sort();
  }

  /** Transitions are announced synchronously, in the step that made them. */
  private announce(machine: CircuitMachine): void {
    announceChanges(machine.takeChanges(), this.settings.onStateChange);
  }

  private circuit(endpoint: string): CircuitMachine {
    let circuit = this.circuits.get(endpoint);
    if (!circuit) {
      circuit = new CircuitMachine(endpoint, this.settings);
      this.circuits.set(endpoint, circuit);
    }
    return circuit;
  }
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
