import type { CascadeContext } from '../safety/cascade-text';
import { randomBytes } from 'node:crypto';
import type { ApplicationFailure } from '@temporalio/common';
import type { RecordEvent } from './attempt-scope';
import { emptyCallPatterns, type CallPatternState } from './call-patterns';
import type { SpendMeter } from './spend-meter';
import type { UpstreamModel } from './upstream';
import type { RefusalKind } from './wire';

/** Who a gateway key was issued to: one attempt of one agent stage. */
export interface LeaseSpec {
  readonly intentId: string;
  readonly stage: string;
  readonly attempt: number;
  /** As cost events and rate limits name the agent. */
  readonly agentId: string;
  readonly upstream: UpstreamModel;
  /** Every call reserves its maximum here first and is settled here after. */
  readonly meter: SpendMeter;
  /** Records the gateway's decisions about this attempt's calls; without it they are only logged. */
  readonly event?: RecordEvent;
  /** What the intent asked for, which answers are screened against for a cascade. */
  readonly screening?: CascadeContext;
  /** Models this stage may not use (a reviewer may not be the implementer's model). */
  readonly forbiddenModels?: readonly string[];
  /**
   * Set for an attempt of a replay: the intent whose recording answers its calls. They are never
   * sent upstream and cost nothing; a request the recording has no answer for halts the attempt.
   */
  readonly replayOf?: ReplaySource;
}

/** Where a replayed attempt's answers come from. */
export interface ReplaySource {
  /** The intent whose recording answers the calls. */
  readonly intentId: string;
  /**
   * What differs between the two runs by construction, as [now, then] pairs: the replay's intent
   * id, worktree and repository for the original's. Each is put back in a replayed request before
   * it is matched, so a prompt naming its own worktree matches the original's.
   */
  readonly substitutions?: ReadonlyArray<readonly [string, string]>;
}

/** A refusal that ends the attempt: every later call gets it too, and the agent is stopped. */
export interface Halt {
  readonly kind: RefusalKind;
  readonly message: string;
  /** What the agent activity fails with once the agent has stopped. */
  readonly failure: ApplicationFailure;
}

/**
 * A key the gateway issued to one agent attempt: the attempt's identity on the wire. It is valid
 * from `issue` until `end`; the agent gets it as its API key, never the upstream's. A lease that
 * halts (a budget refused, a CRITICAL verdict, a loop) refuses every later call and, after a
 * grace, aborts `stopSignal`, which the agent's process is tied to.
 */
export class Lease {
  /** Random and unguessable; shaped like the providers' keys so CLIs that check the prefix accept it. */
  readonly key = `sk-warden-${randomBytes(24).toString('base64url')}`;
  private ended = false;
  private halted?: Halt;
  private graceTimer?: NodeJS.Timeout;
  private readonly stopper = new AbortController();
  private readonly ender = new AbortController();
  private readonly inFlight = new Set<Promise<unknown>>();
  /** What the call-pattern rules keep of this attempt's calls so far (call-patterns.ts). */
  callPatterns: CallPatternState = emptyCallPatterns();
  /** Requests that came after the lease halted. */
  callsAfterHalt = 0;
  /** Secrets cut from the model's answers on their way to the agent (counted, never kept). */
  redactions = 0;

  constructor(
    readonly spec: LeaseSpec,
    private readonly revoke: (lease: Lease) => void,
  ) {}

  get active(): boolean {
    return !this.ended;
  }

  get halt(): Halt | undefined {
    return this.halted;
  }

  /** Aborted once the lease halts: the agent must stop. */
  get stopSignal(): AbortSignal {
    return this.stopper.signal;
  }

  /** Aborted once the lease has ended: a call still running upstream is abandoned. */
  get endSignal(): AbortSignal {
    return this.ender.signal;
  }

  /**
   * Halts the attempt (only the first halt counts): every later call is refused with it, and the
   * agent is stopped after `graceMs` — time to print the refusal and exit by itself.
   */
  haltWith(halt: Halt, graceMs: number): void {
    if (this.halted) return;
    this.halted = halt;
    this.graceTimer = setTimeout(() => this.stopNow(), graceMs);
    this.graceTimer.unref();
  }

  /** Stops the agent now (it keeps calling after a halt, or loops). */
  stopNow(): void {
    if (this.graceTimer) clearTimeout(this.graceTimer);
    if (!this.stopper.signal.aborted) this.stopper.abort(this.halted?.failure ?? new Error('stopped by the model gateway'));
  }

  /** Keeps `work` (one call) counted until it has settled, so `end` waits for it. */
  track<T>(work: Promise<T>): Promise<T> {
    this.inFlight.add(work);
    void work.finally(() => this.inFlight.delete(work)).catch(() => undefined);
    return work;
  }

  /**
   * Revokes the key (a later call gets 401) and waits until every call in flight has been settled
   * against the meter, so the attempt's spend is whole when the activity reads it.
   */
  async end(): Promise<void> {
    this.ended = true;
    if (this.graceTimer) clearTimeout(this.graceTimer);
    this.revoke(this);
    this.ender.abort(new Error('the agent attempt has ended'));
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }
}
