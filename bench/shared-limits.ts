/**
 * What it costs a model call that its rate limits and circuit hold across workers. Every call the
 * gateway admits takes from its buckets, reads its endpoint's circuit and records the outcome
 * (src/gateway/gateway.ts); measured here per call, one call at a time, three ways:
 *
 * - memory: the worker's own buckets and circuits (LocalRateLimits, CircuitBreakerRegistry);
 *   what each worker did before, and what lets N workers allow N times the limit;
 * - postgres: the shared ones (SharedRateLimiter, SharedCircuitBreakers) on the ledger's
 *   database, as a worker runs them: one locked step for the take, the circuit read (a CLOSED
 *   read is trusted for 250 ms) and one locked step for the outcome;
 * - entity: the Temporal alternative, one long-running workflow holding the same buckets and
 *   circuits, and two updates per call (take + admit, then record).
 *
 * And how soon a circuit one worker opens is OPEN for another (the shared way): worker A's
 * breakers record failures until the circuit opens, while worker B's, which read it CLOSED just
 * before, read it again before each call as a busy worker does. The time from A's committed
 * opening to B's first OPEN read, with B trusting a CLOSED read for 250 ms (as workers do) and,
 * side by side, for no time at all (every call reads the row).
 *
 *   npx tsx bench/shared-limits.ts [--calls 2000] [--memory-calls 100000] [--entity-calls 500] [--openings 40] [--no-entity] [--smoke]
 *   npm run bench:shared-limits
 *
 * `--smoke` runs every part at its smallest size (a check that the bench runs, not figures).
 * Against an in-memory Temporal dev server and an embedded PostgreSQL on this machine (loopback),
 * so the figures are the floor: a database or server across a network adds its round trips. The
 * first tenth of each run warms up and is not counted. Printed: mean, p50 and p99 per call, each
 * way's ratio to memory, the openings' p50, p99 and max against the 250 ms a CLOSED read is
 * trusted, and a JSON line; results in bench/results/shared-limits.json.
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Worker } from '@temporalio/worker';
import { SharedCircuitBreakers } from '../src/ledger/shared-circuits';
import { SharedLimitStore } from '../src/ledger/shared-limits';
import { SharedRateLimiter } from '../src/ledger/shared-rate-limiter';
import { CircuitBreakerRegistry, DEFAULT_CIRCUIT_OPTIONS, type CircuitBreakers } from '../src/safety/circuit-breaker';
import { LocalRateLimits, type RateLimits } from '../src/safety/rate-limits';
import type { RateLimitConfig } from '../src/safety/token-bucket';
import { out, percentile, runBenchmark, sleep } from './console';
import { limitsEntity, recordOutcome, takeAndAdmit } from './entity/limits-workflow';
import { startBench, writeResult } from './harness';

const { values: flags } = parseArgs({
  options: {
    calls: { type: 'string', default: '2000' },
    'memory-calls': { type: 'string', default: '100000' },
    'entity-calls': { type: 'string', default: '500' },
    openings: { type: 'string', default: '40' },
    'no-entity': { type: 'boolean', default: false },
    smoke: { type: 'boolean', default: false },
  },
});
const CALLS = flags.smoke ? 100 : Number(flags.calls);
const MEMORY_CALLS = flags.smoke ? 100 : Number(flags['memory-calls']);
const ENTITY_CALLS = flags.smoke ? 100 : Number(flags['entity-calls']);
const OPENINGS = flags.smoke ? 3 : Number(flags.openings);
if (![CALLS, MEMORY_CALLS, ENTITY_CALLS].every((n) => Number.isInteger(n) && n >= 100) || !(Number.isInteger(OPENINGS) && OPENINGS >= 1)) {
  out('--calls, --memory-calls and --entity-calls take a whole number ≥ 100, --openings one ≥ 1');
  process.exit(2);
}

/** Limits no loop here reaches: every call is admitted, so each way does its whole work. */
const RATES: RateLimitConfig = {
  agents: { '*': { requestsPerMinute: 1_000_000_000, tokensPerMinute: 1_000_000_000_000 } },
  models: { '*': { requestsPerMinute: 1_000_000_000, tokensPerMinute: 1_000_000_000_000 } },
};
const ENDPOINT = 'openai http://127.0.0.1:1/v1 gpt-test';
const CALL = { agent: 'bench-agent', model: 'gpt-test', tokens: 100 };

interface Timing {
  readonly calls: number;
  readonly meanUs: number;
  readonly p50Us: number;
  readonly p99Us: number;
}

/** Runs `one` `calls` times in a row after a tenth as many to warm up; times in µs. */
async function measure(calls: number, one: () => Promise<void>): Promise<Timing> {
  for (let i = 0; i < Math.ceil(calls / 10); i++) await one();
  const times: number[] = [];
  for (let i = 0; i < calls; i++) {
    const started = performance.now();
    await one();
    times.push((performance.now() - started) * 1000);
  }
  const sorted = [...times].sort((a, b) => a - b);
  const round = (us: number | undefined): number => Math.round((us ?? 0) * 10) / 10;
  return { calls, meanUs: round(times.reduce((a, b) => a + b, 0) / times.length), p50Us: round(percentile(sorted, 50)), p99Us: round(percentile(sorted, 99)) };
}

/** What the gateway does per call: take, read the circuit, run the call through it. */
function gatewayCall(limits: RateLimits, breakers: CircuitBreakers): () => Promise<void> {
  return async () => {
    const taken = await limits.take(CALL);
    if (!taken.ok) throw new Error('the bench limits refused a call');
    const circuit = await breakers.status(ENDPOINT);
    if (circuit.state !== 'CLOSED') throw new Error('the bench circuit is not closed');
    await breakers.execute(ENDPOINT, () => undefined);
  };
}

/** How long a CLOSED read is trusted by the workers' shared circuits (SharedCircuitOptions.cacheMs). */
const WORKER_CACHE_MS = 250;
/** How often B reads the circuit: a worker busy with calls. */
const READ_EVERY_MS = 2;

interface OpeningSeen {
  readonly cacheMs: number;
  readonly openings: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

/**
 * For each of `openings` endpoints: B reads the circuit CLOSED (its read as fresh as it gets), A
 * fails three calls in a row and opens it; the time from A's committed opening to B's first
 * OPEN read. Two breakers of their own, as two workers have, on one database.
 */
async function measureOpeningSeen(store: SharedLimitStore, scope: string, cacheMs: number, openings: number): Promise<OpeningSeen> {
  const times: number[] = [];
  for (let i = 0; i < openings; i++) {
    const endpoint = `${ENDPOINT} opening-${i}`;
    let openedAt: number | undefined;
    const a = new SharedCircuitBreakers(store, { scope, cacheMs, consecutiveFailures: 3, onStateChange: (change) => void (change.to === 'OPEN' && (openedAt = performance.now())) });
    const b = new SharedCircuitBreakers(store, { scope, cacheMs, consecutiveFailures: 3 });
    await b.status(endpoint);
    let seenAt = 0;
    const watching = (async () => {
      while ((await b.status(endpoint)).state === 'CLOSED') await sleep(READ_EVERY_MS);
      seenAt = performance.now();
    })();
    for (let failure = 0; failure < 3; failure++) {
      await a
        .execute(endpoint, () => {
          throw new Error('the endpoint is down');
        })
        .catch(() => undefined);
    }
    await watching;
    if (openedAt === undefined) throw new Error('three failures in a row did not open the circuit');
    // B's read may land between A's commit and A's announcement of it: that is "at once".
    times.push(Math.max(0, seenAt - openedAt));
  }
  const sorted = [...times].sort((x, y) => x - y);
  const round = (ms: number | undefined): number => Math.round((ms ?? 0) * 10) / 10;
  return { cacheMs, openings, p50Ms: round(percentile(sorted, 50)), p99Ms: round(percentile(sorted, 99)), maxMs: round(sorted.at(-1)) };
}

async function main(): Promise<number> {
  const b = await startBench('shared-limits');
  try {
    const results: Record<string, Timing> = {};
    results.memory = await measure(MEMORY_CALLS, gatewayCall(new LocalRateLimits(RATES), new CircuitBreakerRegistry()));

    const store = new SharedLimitStore(b.database.pool);
    const scope = `bench-${randomUUID()}`;
    results.postgres = await measure(CALLS, gatewayCall(new SharedRateLimiter(store, RATES, scope), new SharedCircuitBreakers(store, { scope })));
    // The parts: the take alone, and the circuit (read + record) alone.
    const take = new SharedRateLimiter(store, RATES, `${scope}-take`);
    results.postgresTakeOnly = await measure(CALLS, async () => void (await take.take(CALL)));
    const circuits = new SharedCircuitBreakers(store, { scope: `${scope}-circuit` });
    results.postgresCircuitOnly = await measure(CALLS, async () => {
      await circuits.status(ENDPOINT);
      await circuits.execute(ENDPOINT, () => undefined);
    });

    const opening = {
      workers: await measureOpeningSeen(store, `${scope}-opening`, WORKER_CACHE_MS, OPENINGS),
      uncached: await measureOpeningSeen(store, `${scope}-opening-uncached`, 0, OPENINGS),
    };

    if (!flags['no-entity']) {
      const queue = 'limits-entity';
      const worker = await Worker.create({ connection: b.native, namespace: b.server.namespace, taskQueue: queue, workflowsPath: require.resolve('./entity/limits-workflow') });
      const running = worker.run();
      try {
        const entity = await b.client.workflow.start(limitsEntity, { taskQueue: queue, workflowId: `limits-${randomUUID()}`, args: [RATES, { ...DEFAULT_CIRCUIT_OPTIONS }] });
        results.entity = await measure(ENTITY_CALLS, async () => {
          const callId = randomUUID();
          const admitted = await entity.executeUpdate(takeAndAdmit, { args: [{ ...CALL, endpoint: ENDPOINT, callId }] });
          if (!admitted.rate.ok || admitted.circuit.kind === 'refused') throw new Error('the entity refused a call');
          await entity.executeUpdate(recordOutcome, { args: [{ endpoint: ENDPOINT, ok: true, ...(admitted.circuit.kind === 'probe' ? { probeId: callId } : {}) }] });
        });
        await entity.terminate('bench over');
      } finally {
        worker.shutdown();
        await running;
      }
    }

    const memory = results.memory!;
    out('');
    out('per model call: rate take + circuit read + outcome record, one call at a time (µs)');
    out(`${'way'.padEnd(22)}${'calls'.padStart(8)}${'mean'.padStart(10)}${'p50'.padStart(10)}${'p99'.padStart(10)}${'× memory (mean)'.padStart(18)}`);
    for (const [name, r] of Object.entries(results)) {
      out(`${name.padEnd(22)}${String(r.calls).padStart(8)}${r.meanUs.toFixed(1).padStart(10)}${r.p50Us.toFixed(1).padStart(10)}${r.p99Us.toFixed(1).padStart(10)}${`${(r.meanUs / memory.meanUs).toFixed(0)}×`.padStart(18)}`);
    }
    if (results.entity) out(`entity / postgres (mean): ${(results.entity.meanUs / results.postgres!.meanUs).toFixed(1)}×`);
    if (flags['no-entity']) out('entity: not measured (--no-entity)');
    out('');
    out('a circuit one worker opens, read OPEN by another: from the committed opening to the first OPEN read (ms)');
    out(`${'CLOSED read trusted'.padEnd(22)}${'openings'.padStart(9)}${'p50'.padStart(9)}${'p99'.padStart(9)}${'max'.padStart(9)}${'max / trusted'.padStart(15)}`);
    for (const o of [opening.workers, opening.uncached]) {
      const share = o.cacheMs > 0 ? `${(o.maxMs / o.cacheMs).toFixed(2)}` : '-';
      out(`${`${o.cacheMs} ms`.padEnd(22)}${String(o.openings).padStart(9)}${o.p50Ms.toFixed(1).padStart(9)}${o.p99Ms.toFixed(1).padStart(9)}${o.maxMs.toFixed(1).padStart(9)}${share.padStart(15)}`);
    }
    const ratio = (a: number, b: number): number => Math.round((a / Math.max(b, 0.1)) * 10) / 10;
    out(`workers' p50 / uncached p50: ${ratio(opening.workers.p50Ms, opening.uncached.p50Ms)}×`);
    const summary = {
      bench: 'shared-limits',
      ...(flags.smoke ? { smoke: true } : {}),
      ...Object.fromEntries(Object.entries(results).map(([name, r]) => [name, r])),
      openingSeen: opening,
      ratios: {
        postgresOverMemory: Math.round((results.postgres!.meanUs / memory.meanUs) * 10) / 10,
        ...(results.entity ? { entityOverMemory: Math.round((results.entity.meanUs / memory.meanUs) * 10) / 10, entityOverPostgres: Math.round((results.entity.meanUs / results.postgres!.meanUs) * 10) / 10 } : {}),
        openingSeenMaxOverTrusted: Math.round((opening.workers.maxMs / WORKER_CACHE_MS) * 100) / 100,
        openingSeenWorkersOverUncached: ratio(opening.workers.p50Ms, opening.uncached.p50Ms),
      },
    };
    out(JSON.stringify(summary));
    // A smoke run's figures are no figures: the last real ones stay.
    if (!flags.smoke) await writeResult('shared-limits', { ...summary, at: new Date().toISOString(), node: process.version });
    return 0;
  } finally {
    await b.close();
  }
}

runBenchmark('shared-limits', main);
