import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import type { GatewayLimits } from '../../src/gateway/gateway';
import { migrate } from '../../src/ledger/migrate';
import { describeOnBackends, freshDatabase, type FreshDatabase } from '../helpers/database';
import { startModelServer, type ModelServer } from '../helpers/model-server';

/*
 * Two worker processes, each with its own model gateway, on one ledger database: the limits hold
 * across them. Real OS processes (test/helpers/gateway-process.ts), a real PostgreSQL, one local
 * model server both call. (Not full Temporal workers: the gateway is where every model call of
 * an agent is admitted, so two gateways are the two workers' limits.)
 */

const CHILD = path.resolve(__dirname, '../helpers/gateway-process.ts');
// Few enough that a token takes 15 s to come back: the burst is over long before (the count allows for it if not).
const R = 4;

const limits: GatewayLimits = {
  circuitBreaker: { failureRate: 1, minimumCalls: 1000, consecutiveFailures: 3, window: '60s', halfOpenAfter: '10m', probes: 1, probeInterval: '1s' },
  rateLimits: { perAgent: { requestsPerMinute: R, tokensPerMinute: 10_000_000 }, perModel: { requestsPerMinute: 1_000_000, tokensPerMinute: 10_000_000 } },
};

interface GatewayProcess {
  readonly child: ChildProcess;
  /** Sends a command and waits for its answer. */
  ask<T>(command: unknown): Promise<T>;
  /** The circuit transitions this process's gateway announced. */
  readonly transitions: Array<{ from: string; to: string }>;
}

async function startGatewayProcess(env: NodeJS.ProcessEnv): Promise<GatewayProcess> {
  const child = spawn(process.execPath, ['--require', 'tsx/cjs', CHILD], { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'inherit'] });
  const lines: Interface = createInterface({ input: child.stdout! });
  const transitions: Array<{ from: string; to: string }> = [];
  const waiting: Array<(value: unknown) => void> = [];
  lines.on('line', (line) => {
    const message = JSON.parse(line) as { circuit?: { from: string; to: string } };
    if (message.circuit) transitions.push({ from: message.circuit.from, to: message.circuit.to });
    else waiting.shift()?.(message);
  });
  const next = <T>(): Promise<T> => new Promise<T>((resolve) => waiting.push(resolve as (value: unknown) => void));
  const ready = next<{ ready: boolean }>();
  const exited = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`gateway process exited (${code}) before it was ready`))));
  await Promise.race([ready, exited]);
  return {
    child,
    transitions,
    ask<T>(command: unknown): Promise<T> {
      const answer = next<T>();
      child.stdin!.write(`${JSON.stringify(command)}\n`);
      return answer;
    },
  };
}

async function stop(processes: readonly GatewayProcess[]): Promise<void> {
  await Promise.all(
    processes.map(
      (p) =>
        new Promise<void>((resolve) => {
          if (p.child.exitCode !== null) return resolve();
          p.child.once('exit', () => resolve());
          p.child.stdin!.end();
          setTimeout(() => p.child.kill('SIGKILL'), 5_000).unref();
        }),
    ),
  );
}

describeOnBackends('limits shared by two gateway processes on the %s PostgreSQL', (baseUrl) => {
  let database: FreshDatabase;
  let upstream: ModelServer;
  let scopes = 0;

  beforeAll(async () => {
    database = await freshDatabase(baseUrl);
    await migrate(database.pool);
    upstream = await startModelServer();
  });
  afterAll(async () => {
    await upstream?.close();
    await database?.drop();
  });

  /** Two processes on the database, in a scope of their own. */
  async function twoProcesses(shared = true, requestsPerMinute = R): Promise<[GatewayProcess, GatewayProcess]> {
    scopes += 1;
    const own = { ...limits, rateLimits: { ...limits.rateLimits, perAgent: { ...limits.rateLimits.perAgent, requestsPerMinute } } };
    const env = { DATABASE_URL: database.url, UPSTREAM_URL: upstream.url, LIMIT_SCOPE: `test-${scopes}`, GATEWAY_LIMITS: JSON.stringify(own), SHARED: shared ? '1' : '0' };
    return Promise.all([startGatewayProcess(env), startGatewayProcess(env)]);
  }

  async function burst(pair: readonly GatewayProcess[]): Promise<number[]> {
    // Both at the same moment, half a second from now: the calls of the two overlap.
    const at = Date.now() + 500;
    const answers = await Promise.all(pair.map((p) => p.ask<{ statuses: number[] }>({ cmd: 'burst', n: (3 * R) / 2, at })));
    return answers.flatMap((a) => a.statuses);
  }

  test(`a limit of ${R} requests a minute per agent: of ${3 * R} calls offered at once across both, exactly ${R} pass`, async () => {
    upstream.respond = () => ({ text: 'ok' });
    const pair = await twoProcesses();
    try {
      const before = upstream.requests.length;
      const started = Date.now();
      const statuses = await burst(pair);
      // The bucket starts full (R) and gets one token back every 60/R s: at most `refilled` came
      // back while the burst lasted, none unless it lasted longer than 60/R s (a very slow machine).
      const refilled = Math.floor(((Date.now() - started) * R) / 60_000);
      const passed = statuses.filter((s) => s === 200).length;
      expect(passed).toBeGreaterThanOrEqual(R);
      expect(passed).toBeLessThanOrEqual(R + refilled);
      expect(statuses.filter((s) => s === 429)).toHaveLength(3 * R - passed);
      expect(upstream.requests.length - before).toBe(passed);
    } finally {
      await stop(pair);
    }
  });

  test('the same burst with each process on its own in-memory buckets lets twice the limit through (what sharing fixes)', async () => {
    upstream.respond = () => ({ text: 'ok' });
    const pair = await twoProcesses(false);
    try {
      const statuses = await burst(pair);
      expect(statuses.filter((s) => s === 200)).toHaveLength(2 * R);
    } finally {
      await stop(pair);
    }
  });

  test('a circuit one process opens (consecutive failures) is OPEN for the other once its CLOSED read has aged out', async () => {
    upstream.respond = () => ({ text: 'ok' });
    // No rate limit in the way: every refusal here is the circuit's.
    const [a, b] = await twoProcesses(true, 1_000);
    try {
      // B has just seen the endpoint healthy (its CLOSED read is fresh)…
      expect((await b.ask<{ status: number }>({ cmd: 'call' })).status).toBe(200);
      // …when A's three failures in a row open the circuit.
      upstream.respond = () => ({ raw: { status: 500, body: '{"error":{"message":"down"}}' } });
      for (let i = 0; i < 3; i++) expect((await a.ask<{ status: number }>({ cmd: 'call' })).status).toBe(500);
      const opened = Date.now();
      expect(a.transitions).toEqual([{ from: 'CLOSED', to: 'OPEN' }]);

      // B trusts a CLOSED read for 250 ms: 400 ms or more after the opening (a slow machine only
      // makes it more), B's next call is refused by its own gateway without reaching the
      // endpoint. How soon after the opening B sees it is measured by bench/shared-limits.ts.
      const before = upstream.requests.length;
      await new Promise((resolve) => setTimeout(resolve, opened + 400 - Date.now()));
      const refused = await b.ask<{ status: number; body: string }>({ cmd: 'call' });
      expect(refused.status).toBe(503);
      expect(refused.body).toMatch(/circuit is open/);
      // A made the transition and announced it; B only saw it.
      expect(b.transitions).toEqual([]);
      // And it stays refused for B: no call leaves while the circuit cools down.
      for (let i = 0; i < 3; i++) expect((await b.ask<{ status: number }>({ cmd: 'call' })).status).toBe(503);
      expect(upstream.requests.length - before).toBe(0);
    } finally {
      await stop([a, b]);
    }
  });
});
