/**
 * One endpoint's circuit as a pure state machine: times are passed in and its state is plain
 * data, so the same arithmetic runs in one worker's memory (CircuitBreakerRegistry, at
 * the process clock) and in a row every worker shares (src/ledger/shared-circuits.ts, at the
 * database's clock). Restore from `toJSON()`, apply one step, store `toJSON()` again.
 *
 * Workflow-safe: no Node built-ins, no clocks. The semantics are circuit-breaker.ts's.
 */

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
  /** The clock's time at the transition (ms since the epoch). */
  readonly at: number;
}

/** Every setting of a circuit, validated (see `circuitSettingsOf` in circuit-breaker.ts). */
export interface CircuitSettings {
  readonly errorRateThreshold: number;
  readonly minimumCalls: number;
  readonly windowMs: number;
  readonly consecutiveFailures: number;
  readonly coolDownMs: number;
  readonly probes: number;
  readonly probeIntervalMs: number;
}

/** Calls and failures of one second of the rolling window. */
export interface CircuitCountBucket {
  readonly startedAt: number;
  readonly calls: number;
  readonly failures: number;
}

/**
 * The probe slot's holder. `until` bounds how long a holder that never reports back (its process
 * died) keeps the slot; a live holder renews it.
 */
export interface ProbeSlot {
  readonly id: string;
  readonly until: number;
}

/** Serialisable state of one circuit. */
export interface CircuitData {
  readonly state: CircuitState;
  readonly openedAt: number;
  readonly consecutiveFailures: number;
  readonly counts: readonly CircuitCountBucket[];
  readonly probe: ProbeSlot | null;
  readonly probesSucceeded: number;
  readonly lastProbeEndedAt: number | null;
}

/** `admit`'s answer: run the call (as a probe or not), or refuse it for `retryAfterMs`. */
export type CircuitAdmission =
  | { readonly kind: 'call' }
  | { readonly kind: 'probe' }
  | { readonly kind: 'refused'; readonly state: 'OPEN' | 'HALF_OPEN'; readonly retryAfterMs: number };

const BUCKET_MS = 1_000;

/** A probe slot that never expires: a holder in this process always gives it back. */
export const FOREVER = Number.MAX_SAFE_INTEGER;

/**
 * One endpoint's circuit. Every step takes its time; the transitions it makes are kept for the
 * caller to take and announce (in the process that made them).
 */
export class CircuitMachine {
  private changes: CircuitStateChange[] = [];
  private current: CircuitState;
  private openedAt: number;
  private consecutiveFailures: number;
  private counts: { startedAt: number; calls: number; failures: number }[];
  private probe: ProbeSlot | null;
  private probesSucceeded: number;
  private lastProbeEndedAt: number | null;

  constructor(
    private readonly endpoint: string,
    private readonly settings: CircuitSettings,
    data?: CircuitData | null,
  ) {
    this.current = data?.state ?? 'CLOSED';
    this.openedAt = data?.openedAt ?? 0;
    this.consecutiveFailures = data?.consecutiveFailures ?? 0;
    this.counts = (data?.counts ?? []).map((b) => ({ ...b }));
    this.probe = data?.probe ?? null;
    this.probesSucceeded = data?.probesSucceeded ?? 0;
    this.lastProbeEndedAt = data?.lastProbeEndedAt ?? null;
  }

  /** The transitions made since the last call (or since it was built), oldest first; clears them. */
  takeChanges(): CircuitStateChange[] {
    const made = this.changes;
    this.changes = [];
    return made;
  }

  get state(): CircuitState {
    return this.current;
  }

  /** How long until a call would be admitted (0: now). */
  retryAfterMs(now: number): number {
    switch (this.current) {
      case 'CLOSED':
        return 0;
      case 'OPEN':
        return Math.max(0, this.openedAt + this.settings.coolDownMs - now);
      case 'HALF_OPEN':
        if (this.probeHeld(now)) return this.settings.probeIntervalMs;
        return this.lastProbeEndedAt === null ? 0 : Math.max(0, this.lastProbeEndedAt + this.settings.probeIntervalMs - now);
    }
  }

  /**
   * Admits a call at `now`: CLOSED runs it; OPEN after its cool-down, or HALF_OPEN with the probe
   * slot free and the interval passed, runs it as a probe holding `probe`; otherwise it is refused.
   */
  admit(now: number, probe: ProbeSlot): CircuitAdmission {
    const wait = this.retryAfterMs(now);
    if (this.current !== 'CLOSED' && (wait > 0 || this.probeHeld(now))) return { kind: 'refused', state: this.current, retryAfterMs: wait };
    if (this.current === 'CLOSED') return { kind: 'call' };
    if (this.current === 'OPEN') {
      this.probesSucceeded = 0;
      this.lastProbeEndedAt = null;
      this.consecutiveFailures = 0;
      this.counts = [];
      this.transition(now, 'HALF_OPEN', 'cool-down-elapsed', `${now - this.openedAt} ms after opening; probing with 1 of ${this.settings.probes} calls`);
    }
    this.probe = probe;
    return { kind: 'probe' };
  }

  /** Extends the probe slot of `id` to `until`; false when it is no longer `id`'s. */
  renewProbe(id: string, until: number): boolean {
    if (this.probe?.id !== id) return false;
    this.probe = { id, until };
    return true;
  }

  /**
   * The endpoint answered (a success, or an error that does not count against it) at `now`.
   * `probeId`: the slot the call held when it was admitted as a probe.
   */
  answered(now: number, probeId?: string): void {
    this.judgeAnswer(now, probeId !== undefined);
    this.release(probeId);
  }

  /** The call was stopped before any answer: nothing is judged; a probe slot it held is free again. */
  unanswered(probeId?: string): void {
    this.release(probeId);
  }

  /** The call failed against the endpoint at `now`. */
  failed(now: number, probeId?: string): void {
    this.judgeFailure(now);
    this.release(probeId);
  }

  toJSON(): CircuitData {
    return {
      state: this.current,
      openedAt: this.openedAt,
      consecutiveFailures: this.consecutiveFailures,
      counts: this.counts.map((b) => ({ ...b })),
      probe: this.probe,
      probesSucceeded: this.probesSucceeded,
      lastProbeEndedAt: this.lastProbeEndedAt,
    };
  }

  private probeHeld(now: number): boolean {
    return this.probe !== null && this.probe.until > now;
  }

  private release(probeId: string | undefined): void {
    // Only the holder's own slot: one that expired may be another prober's by now.
    if (probeId !== undefined && this.probe?.id === probeId) this.probe = null;
  }

  private judgeAnswer(now: number, probe: boolean): void {
    // Only a probe's answer counts once the circuit has left CLOSED: a call admitted before it
    // opened says nothing about the endpoint's recovery.
    if (this.current === 'OPEN' || (this.current === 'HALF_OPEN' && !probe)) return;
    this.consecutiveFailures = 0;
    this.record(now, false);
    if (this.current !== 'HALF_OPEN') return;
    this.probesSucceeded += 1;
    this.lastProbeEndedAt = now;
    if (this.probesSucceeded >= this.settings.probes) {
      this.transition(now, 'CLOSED', 'probes-succeeded', `${this.probesSucceeded} probe(s) succeeded`);
    }
  }

  private judgeFailure(now: number): void {
    if (this.current === 'OPEN') return;
    if (this.current === 'HALF_OPEN') {
      // Also a call admitted before the circuit opened that fails now: conservative, it reopens.
      this.open(now, 'probe-failed', 'a half-open probe failed');
      return;
    }
    this.consecutiveFailures += 1;
    this.record(now, true);
    const { consecutiveFailures: limit, errorRateThreshold, minimumCalls, windowMs } = this.settings;
    if (this.consecutiveFailures >= limit) {
      this.open(now, 'consecutive-failures', `${this.consecutiveFailures} consecutive failures (threshold ${limit})`);
      return;
    }
    // Judged on failures only, so the circuit opens on exactly the call that reaches the rate.
    const { calls, failures } = this.totals(now);
    if (calls >= minimumCalls && failures / calls >= errorRateThreshold) {
      const rate = `${((failures / calls) * 100).toFixed(1)}% ≥ ${errorRateThreshold * 100}%`;
      this.open(now, 'error-rate', `${failures} of ${calls} calls failed within ${windowMs} ms (${rate})`);
    }
  }

  private open(now: number, reason: CircuitTransitionReason, detail: string): void {
    this.openedAt = now;
    this.transition(now, 'OPEN', reason, detail);
  }

  private transition(now: number, to: CircuitState, reason: CircuitTransitionReason, detail: string): void {
    if (to === this.current) return;
    this.changes.push({ endpoint: this.endpoint, from: this.current, to, reason, detail, at: now });
    this.current = to;
  }

  // Calls and failures per second over the last `windowMs`: memory bounded by the window, not the traffic.

  private record(at: number, failed: boolean): void {
    this.prune(at);
    const startedAt = at - (at % BUCKET_MS);
    let bucket = this.counts.at(-1);
    if (!bucket || bucket.startedAt < startedAt) {
      bucket = { startedAt, calls: 0, failures: 0 };
      this.counts.push(bucket);
    }
    bucket.calls += 1;
    if (failed) bucket.failures += 1;
  }

  /** Totals of the buckets that started less than `windowMs` before `now`. */
  private totals(now: number): { calls: number; failures: number } {
    this.prune(now);
    let calls = 0;
    let failures = 0;
    for (const b of this.counts) {
      calls += b.calls;
      failures += b.failures;
    }
    return { calls, failures };
  }

  private prune(now: number): void {
    const firstKept = this.counts.findIndex((b) => now - b.startedAt < this.settings.windowMs);
    this.counts.splice(0, firstKept < 0 ? this.counts.length : firstKept);
  }
}
