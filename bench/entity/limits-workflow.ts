import { condition, defineUpdate, setHandler } from '@temporalio/workflow';
import { CircuitMachine, type CircuitAdmission, type CircuitData, type CircuitSettings } from '../../src/safety/circuit-state';
import { RateLimiter, type RateLimitConfig, type RateLimiterState, type RateLimitResult } from '../../src/safety/token-bucket';

/**
 * The alternative bench/shared-limits.ts measures against PostgreSQL: one long-running Temporal
 * workflow (an entity) holding every bucket and circuit; workers take and record through updates,
 * which Temporal runs one at a time. The same pure classes, at workflow time.
 */

export interface EntityCall {
  readonly agent: string;
  readonly model: string;
  readonly tokens: number;
  readonly endpoint: string;
  /** Unique per call: the probe slot's id if the circuit admits the call as a probe. */
  readonly callId: string;
}

export const takeAndAdmit = defineUpdate<{ rate: RateLimitResult; circuit: CircuitAdmission }, [EntityCall]>('takeAndAdmit');
export const recordOutcome = defineUpdate<void, [{ endpoint: string; ok: boolean; probeId?: string }]>('recordOutcome');

export async function limitsEntity(config: RateLimitConfig, settings: CircuitSettings): Promise<void> {
  let buckets: RateLimiterState = { buckets: {} };
  const circuits: Record<string, CircuitData> = {};
  setHandler(takeAndAdmit, (call) => {
    const now = Date.now();
    const limiter = new RateLimiter(config, buckets);
    const rate = limiter.take({ agent: call.agent, model: call.model, tokens: call.tokens, at: now });
    buckets = limiter.toJSON();
    const machine = new CircuitMachine(call.endpoint, settings, circuits[call.endpoint]);
    const circuit = rate.ok ? machine.admit(now, { id: call.callId, until: now + 30_000 }) : ({ kind: 'refused', state: 'OPEN', retryAfterMs: 0 } as const);
    circuits[call.endpoint] = machine.toJSON();
    return { rate, circuit };
  });
  setHandler(recordOutcome, ({ endpoint, ok, probeId }) => {
    const machine = new CircuitMachine(endpoint, settings, circuits[endpoint]);
    if (ok) machine.answered(Date.now(), probeId);
    else machine.failed(Date.now(), probeId);
    circuits[endpoint] = machine.toJSON();
  });
  // Lives until it is terminated (a real one would continue-as-new as its history grows).
  await condition(() => false);
}
