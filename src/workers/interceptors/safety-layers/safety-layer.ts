import type { Context } from '@temporalio/activity';
import type { StageResult, StageInput } from '../../../activities';
import type { CircuitStateChange } from '../../../safety/circuit-breaker';
import type { RunFacts } from '../activity-audit';
import type { AgentEndpoint } from '../agent-endpoint';
import type { CallRef } from '../call-ref';
import type { RecordEvent } from '../safety-events';

/** One attempt of an agent call (`runAgentStage`), as every safety layer sees it. */
export interface AgentCall {
  readonly ctx: Context;
  readonly ref: CallRef;
  readonly input: StageInput;
  readonly agent: AgentEndpoint;
  /**
   * Its model calls go through the model gateway, which applies the endpoint's circuit and the
   * rate limits to each call: the layers that would do it for the whole attempt stand aside.
   */
  readonly viaGateway: boolean;
  /** Records one decision of this attempt as a SafetyEvent (deterministic id) and returns its id. */
  readonly event: RecordEvent;
  /** Runs a ledger operation, waiting out an unreachable database until shortly before the attempt's deadline. */
  patiently<T>(what: string, fn: () => Promise<T>): Promise<T>;
  /** The endpoint circuit's changes during the call, in order: kept by the circuit layer, read by the behaviour monitor. */
  readonly circuitChanges: CircuitStateChange[];
  /** What the attempt's `activity_runs` row learns while it runs. */
  readonly facts: RunFacts;
}

/**
 * One safety concern around an agent call. Each hook is optional: a layer implements the moments
 * it acts in, and the interceptor runs each moment's layers in its own fixed order.
 *
 * A hook refuses or halts by throwing (an ApplicationFailure whose type says why); the layers
 * after it in that moment do not run.
 */
export interface SafetyLayer {
  /**
   * Before any layer admits the call: starts the reads its `admit` judges by (see `StartedWork`). Every
   * layer's look starts in the same turn, so their ledger reads share one round trip; the
   * judgements still come one after the other, in admission order. Must not throw.
   */
  look?(call: AgentCall): void;
  /** Before the call: throws to refuse it. Nothing is reserved or started yet. */
  admit?(call: AgentCall): Promise<void>;
  /** Runs the call inside what this layer must hold while it runs (a circuit, a meter). */
  around?(call: AgentCall, run: () => Promise<unknown>): Promise<unknown>;
  /** The call failed with `error`: records what that means to this layer; throws to fail the attempt otherwise. */
  failed?(call: AgentCall, error: unknown): Promise<void>;
  /** The call answered: judges the answer (throws to halt); returns it amended, or nothing to leave it as is. */
  answered?(call: AgentCall, result: StageResult): Promise<StageResult | void>;
  /** The attempt is over, however it ended; `delivered` when the workflow gets its result. Must not throw. */
  close?(call: AgentCall, delivered: boolean): Promise<void>;
}

/** A layer that acts in moment `K`. */
export type LayerWith<K extends keyof SafetyLayer> = SafetyLayer & Required<Pick<SafetyLayer, K>>;

/**
 * Work a layer started for a call in one hook, for a later hook to take once: the reads `look`
 * starts for `admit`, the outcome `around` counts for `answered`. A failure is the taker's to
 * throw; until taken it is held, not reported as unhandled.
 */
export class StartedWork<T> {
  private readonly started = new WeakMap<AgentCall, Promise<T>>();

  start(call: AgentCall, work: () => Promise<T>): void {
    const running = work();
    running.catch(() => undefined);
    this.started.set(call, running);
  }

  /** The work started for `call`, once; undefined when none was (a layer used on its own for `look`). */
  take(call: AgentCall): Promise<T> | undefined {
    const running = this.started.get(call);
    this.started.delete(call);
    return running;
  }
}
