/**
 * A model gateway in a process of its own, as one worker runs it, for the tests of limits shared
 * across workers: its rate buckets and circuits live in the database at DATABASE_URL (scope
 * LIMIT_SCOPE) unless SHARED=0. One lease, to the OpenAI-shaped upstream at UPSTREAM_URL.
 *
 * It reads commands as JSON lines on stdin and answers each with one JSON line on stdout:
 *   {"cmd":"burst","n":15,"at":<epoch ms>}   n calls at once, from `at` on → {"statuses":[…]}
 *   {"cmd":"call"}                           one call → {"status":…,"body":…}
 * and prints {"ready":…} once listening, {"circuit":…} on each transition its gateway makes.
 * Run with `node --require tsx/cjs test/helpers/gateway-process.ts`.
 */
import { createInterface } from 'node:readline';
import pg from 'pg';
import pino from 'pino';
import { ModelGateway, type GatewayLimits } from '../../src/gateway/gateway';
import { SpendMeter, type BudgetBook } from '../../src/gateway/spend-meter';
import { SharedLimitStore } from '../../src/ledger/shared-limits';
import { readyCascadeModel } from '../../src/workers/cascade-model-cache';

const UPSTREAM_KEY = 'sk-upstream-key-for-the-test';

function send(message: unknown): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

async function main(): Promise<void> {
  const limits = JSON.parse(process.env.GATEWAY_LIMITS!) as GatewayLimits;
  // As a worker does before it polls: the first answer's screening must not train the model.
  await readyCascadeModel(pino({ level: 'silent' }));
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 20 });
  const shared = process.env.SHARED === '0' ? undefined : { store: new SharedLimitStore(pool), scope: process.env.LIMIT_SCOPE! };
  // Only the circuit's transitions leave the process: the test asks who made them.
  const logger = pino({ level: 'warn' }, { write: (line: string) => {
    const entry = JSON.parse(line) as { circuit?: unknown };
    if (entry.circuit) send({ circuit: entry.circuit });
  } });
  const gateway = await ModelGateway.start({
    limits,
    logger,
    env: { OPENAI_API_KEY: UPSTREAM_KEY },
    ...(shared ? { shared } : {}),
    // Refusals are what the test counts: they must not stop the lease as an error loop.
    maxFailuresInRow: 1_000_000,
  });
  const book: BudgetBook = { reserve: async () => undefined, settle: async () => undefined, release: async () => undefined };
  const lease = gateway.issue({
    intentId: `intent-${process.pid}`,
    stage: 'impl',
    attempt: 1,
    agentId: 'shared-agent',
    upstream: {
      kind: 'openai',
      baseUrl: `${process.env.UPSTREAM_URL}/v1`,
      apiKeyEnv: ['OPENAI_API_KEY'],
      models: ['gpt-test'],
      maxTokens: 1000,
      // A hang guard, not a figure under test: the local model server answers in milliseconds.
      timeoutMs: 60_000,
      maxResponseBytes: 1_000_000,
    },
    meter: new SpendMeter({ pricing: { 'gpt-test': { inputUsdPerMillion: '1', outputUsdPerMillion: '1' } }, declaredCapUsd: '1', book }),
  });
  let calls = 0;
  // A body of its own per call: the gateway halts an attempt that repeats itself.
  const call = async (): Promise<{ status: number; body: string }> => {
    calls += 1;
    const response = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${lease.key}` },
      body: JSON.stringify({ model: 'gpt-test', max_tokens: 100, messages: [{ role: 'user', content: `call ${process.pid}-${calls}` }] }),
    });
    return { status: response.status, body: await response.text() };
  };

  send({ ready: true, pid: process.pid });
  for await (const line of createInterface({ input: process.stdin })) {
    const command = JSON.parse(line) as { cmd: 'burst'; n: number; at: number } | { cmd: 'call' };
    if (command.cmd === 'burst') {
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, command.at - Date.now())));
      const results = await Promise.all(Array.from({ length: command.n }, call));
      send({ statuses: results.map((r) => r.status) });
    } else {
      send(await call());
    }
  }
  await gateway.close();
  await pool.end();
}

main().catch((error: unknown) => {
  process.stderr.write(`gateway process failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
