import { randomUUID } from 'node:crypto';
import {
  announceChanges,
  CircuitOpenError,
  circuitSettingsOf,
  type CircuitBreakerOptions,
  type CircuitBreakers,
  type CircuitRegistrySettings,
} from '../safety/circuit-breaker';
import { CircuitMachine, type CircuitData, type CircuitState } from '../safety/circuit-state';
import { sharedLimitKey, type SharedLimitStore } from './shared-limits';

export interface SharedCircuitOptions extends CircuitBreakerOptions {
  /** The fleet sharing the circuits (Warden: the task queue). */
  readonly scope: string;
  /**
   * How long a CLOSED state read from the database is trusted before it is read again (250 ms):
   * a circuit another worker opened is seen within this. Anything but CLOSED is read every time.
   */
  readonly cacheMs?: number;
  /**
   * How long the probe slot stays held without news from its holder (30 s). A live holder renews
   * it every third of that; a holder whose process died frees it when it runs out.
   */
  readonly probeLeaseMs?: number;
  /** A failure to record a call's outcome (the database unreachable): the call's own result stands. */
  readonly onRecordError?: (error: unknown, endpoint: string) => void;
}

/**
 * Circuit breakers keyed by endpoint that every worker of a scope shares: one row per endpoint
 * holding a CircuitMachine's state, stepped under the row's lock at the database's time. A
 * circuit one worker opens is open for all of them within `cacheMs`. Transitions are announced
 * (`onStateChange`) in the worker whose step made them, once the step has committed.
 *
 * Per call: a read (skipped while a CLOSED read is fresh), a locked step only when the circuit is
 * not CLOSED (the probe slot, OPEN → HALF_OPEN), and a locked step to record the outcome.
 */
export class SharedCircuitBreakers implements CircuitBreakers {
  private readonly settings: CircuitRegistrySettings;
  private readonly cacheMs: number;
  private readonly probeLeaseMs: number;
  /** The last state seen per endpoint, and when (this process's monotonic clock: only its age matters). */
  private readonly seen = new Map<string, { readonly data: CircuitData | undefined; readonly now: number; readonly at: number }>();

  constructor(
    private readonly store: SharedLimitStore,
    private readonly options: SharedCircuitOptions,
  ) {
    this.settings = circuitSettingsOf(options);
    this.cacheMs = options.cacheMs ?? 250;
    this.probeLeaseMs = options.probeLeaseMs ?? 30_000;
  }

  async status(endpoint: string): Promise<{ state: CircuitState; retryAfterMs: number }> {
    const { machine, now } = await this.look(endpoint);
    return { state: machine.state, retryAfterMs: machine.retryAfterMs(now) };
  }

  async execute<T>(endpoint: string, fn: (signal: AbortSignal) => PromiseLike<T> | T, signal?: AbortSignal): Promise<T> {
    const { machine } = await this.look(endpoint);
    let held: string | undefined;
    if (machine.state !== 'CLOSED') {
      // Leaving OPEN and taking the probe slot are decided under the row's lock: one worker gets them.
      const probeId = randomUUID();
      const admission = await this.step(endpoint, (m, now) => m.admit(now, { id: probeId, until: now + this.probeLeaseMs }));
      if (admission.kind === 'refused') throw new CircuitOpenError(endpoint, admission.retryAfterMs, admission.state);
      if (admission.kind === 'probe') held = probeId;
    }
    const renewal = held === undefined ? undefined : this.keepProbe(endpoint, held);
    try {
      let result: T;
      try {
        result = await fn(signal ?? new AbortController().signal);
      } catch (error) {
        if (this.settings.isUnanswered(error)) {
          // Nothing to record, unless a probe slot is to be given back: a stop of a hundred
          // intents would otherwise queue a hundred writes on this one row.
          if (held !== undefined) await this.record(endpoint, (m) => m.unanswered(held));
          throw error;
        }
        const failure = this.settings.isFailure(error);
        await this.record(endpoint, (m, now) => (failure ? m.failed(now, held) : m.answered(now, held)));
        throw error;
      }
      await this.record(endpoint, (m, now) => m.answered(now, held));
      return result;
    } finally {
      if (renewal) clearInterval(renewal);
    }
  }

  /** The endpoint's circuit as last read, read again unless it was CLOSED less than `cacheMs` ago. */
  private async look(endpoint: string): Promise<{ machine: CircuitMachine; now: number }> {
    const cached = this.seen.get(endpoint);
    const age = cached ? performance.now() - cached.at : Infinity;
    if (cached && (cached.data?.state ?? 'CLOSED') === 'CLOSED' && age < this.cacheMs) {
      return { machine: new CircuitMachine(endpoint, this.settings, cached.data), now: cached.now + age };
    }
    const key = this.keyOf(endpoint);
    const { now, states } = await this.store.read([key]);
    const data = states.get(key) as CircuitData | undefined;
    this.seen.set(endpoint, { data, now, at: performance.now() });
    return { machine: new CircuitMachine(endpoint, this.settings, data), now };
  }

  /** One locked step on the endpoint's row; its transitions are announced here once it has committed. */
  private async step<R>(endpoint: string, apply: (machine: CircuitMachine, now: number) => R): Promise<R> {
    const key = this.keyOf(endpoint);
    const { result, changes, data, now } = await this.store.update([key], (states, now) => {
      const machine = new CircuitMachine(endpoint, this.settings, states.get(key) as CircuitData | undefined);
      const result = apply(machine, now);
      const data = machine.toJSON();
      return { result: { result, changes: machine.takeChanges(), data, now }, write: new Map([[key, data]]) };
    });
    this.seen.set(endpoint, { data, now, at: performance.now() });
    announceChanges(changes, this.settings.onStateChange);
    return result;
  }

  /** Records an outcome; a database failure here must not turn the call's answer into an error. */
  private async record(endpoint: string, apply: (machine: CircuitMachine, now: number) => void): Promise<void> {
    try {
      await this.step(endpoint, apply);
    } catch (error) {
      this.options.onRecordError?.(error, endpoint);
    }
  }

  /** Renews the probe slot while the probe runs, so that only a dead holder loses it. */
  private keepProbe(endpoint: string, probeId: string): NodeJS.Timeout {
    const timer = setInterval(() => {
      this.step(endpoint, (m, now) => m.renewProbe(probeId, now + this.probeLeaseMs)).catch((error: unknown) => this.options.onRecordError?.(error, endpoint));
    }, Math.max(1, Math.floor(this.probeLeaseMs / 3)));
    timer.unref();
    return timer;
  }

  private keyOf(endpoint: string): string {
    return sharedLimitKey(this.options.scope, 'circuit', endpoint);
  }
}
