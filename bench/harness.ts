import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import type { WardenWorker } from '../src/workers/host-worker';
import pino from 'pino';
import { startIntent } from '../src/client/intents';
import { quietSdkRuntime } from '../src/client/in-process-worker';
import { resolveConfig } from '../src/config/load';
import type { WardenConfig } from '../src/config/schema';
import { openDatabase, type LedgerDatabase } from '../src/ledger/database';
import { Ledger } from '../src/ledger/ledger';
import { startDevServer, type DevServer } from '../src/runtime/dev-server';
import { ensureTemporalCli } from '../src/runtime/temporal-cli';
import { createRedactor } from '../src/shared/redact';
import { createWardenWorker, type WardenWorkerOptions } from '../src/workers/warden-worker';
import type { intentWorkflow } from '../src/workflows';
import { endProgress, out, progress, secs, t } from './console';
import { countRoundTrips } from './round-trips';

export const REPO_ROOT = path.resolve(__dirname, '..');
export const RESULTS_DIR = path.join(REPO_ROOT, 'bench', 'results');

/**
 * Node's arguments to run one of the checkout's TypeScript files in a process of its own: under
 * bin/checkout-loader.js, as `warden` runs in a checkout. The tsx command costs about a CPU-second
 * more a process: it starts a second Node and reads every package through its own loader.
 */
export function typeScriptArgs(file: string, ...args: readonly string[]): string[] {
  return ['-r', path.join(REPO_ROOT, 'bin', 'checkout-loader.js'), file, ...args];
}

/** What a benchmark runs against: all its own, torn down by `close`. */
export interface Bench {
  readonly tmp: string;
  readonly server: DevServer;
  readonly database: LedgerDatabase;
  readonly ledger: Ledger;
  readonly client: Client;
  readonly native: NativeConnection;
  /** The demo script with every delay removed: a zero-delay scripted agent. */
  readonly demoScript: string;
  /** Queries sent on the ledger's pool so far (each one round trip to PostgreSQL): see `countRoundTrips`. */
  ledgerRoundTrips(): number;
  close(): Promise<void>;
}

/** An in-memory Temporal dev server (UI off) and an embedded PostgreSQL, in a temp folder. */
export async function startBench(name: string): Promise<Bench> {
  quietSdkRuntime();
  const tmp = await mkdtemp(path.join(os.tmpdir(), `warden-bench-${name}-`));
  await chmod(tmp, 0o755); // the embedded PostgreSQL may run as another user
  const started = t();
  progress('starting Temporal dev server and PostgreSQL…');
  const cliPath = await ensureTemporalCli({ wardenHome: path.join(REPO_ROOT, '.warden'), env: process.env });
  const [server, database] = await Promise.all([
    startDevServer({ cliPath, port: 0, uiPort: false, logFile: path.join(tmp, 'temporal.log') }),
    openDatabase({ dataDir: path.join(tmp, 'postgres'), port: 0 }),
  ]);
  progress(`servers up in ${secs(t() - started)}`);
  endProgress();
  const script = JSON.parse(await readFile(path.join(REPO_ROOT, 'examples', 'demo-agent.json'), 'utf8')) as { stages: Record<string, Array<{ delayMs?: number }>> };
  for (const attempts of Object.values(script.stages)) for (const attempt of attempts) attempt.delayMs = 0;
  const demoScript = path.join(tmp, 'demo-agent-no-delay.json');
  await writeFile(demoScript, JSON.stringify(script));
  const connection = await Connection.connect({ address: server.address });
  const native = await NativeConnection.connect({ address: server.address });
  const ledgerRoundTrips = countRoundTrips(database.pool);
  return {
    tmp,
    server,
    database,
    ledger: new Ledger(database.pool),
    client: new Client({ connection, namespace: server.namespace }),
    native,
    demoScript,
    ledgerRoundTrips,
    async close() {
      await connection.close();
      await native.close();
      await database.close();
      await server.stop();
      await rm(tmp, { recursive: true, force: true });
    },
  };
}

/** The default profile with no cooldown, and worker limits that never throttle a benchmark. */
export function unthrottledConfig(worker: { maxCachedWorkflows?: number; workflowHeapMb?: number } = {}): WardenConfig {
  return resolveConfig(unthrottledConfigFile(worker));
}

/** The same, as a warden.config.json holds it (for a worker run as its own process). */
export function unthrottledConfigFile(worker: { maxCachedWorkflows?: number; workflowHeapMb?: number } = {}) {
  return {
    limits: { cooldown: '0s' },
    worker: {
      rateLimits: { globalActivitiesPerSecond: 10_000, perAgent: { requestsPerMinute: 1_000_000, tokensPerMinute: 1_000_000_000 }, perModel: { requestsPerMinute: 1_000_000, tokensPerMinute: 1_000_000_000 } },
      dayBudgetUsd: '0',
      agentDayBudgetUsd: '0',
      ...worker,
    },
  };
}

/** A Warden worker on `queue`, with limits that never throttle a benchmark. */
export function benchWorker(
  b: Bench,
  queue: string,
  options: Pick<WardenWorkerOptions, 'safetyInterceptors' | 'wrapActivities' | 'intentRules'> & { maxCachedWorkflows?: number } = {},
): Promise<WardenWorker> {
  const config = unthrottledConfig(options.maxCachedWorkflows !== undefined ? { maxCachedWorkflows: options.maxCachedWorkflows } : {});
  return createWardenWorker({
    connection: b.native,
    namespace: b.server.namespace,
    taskQueue: queue,
    worktreeRoot: path.join(b.tmp, `worktrees-${queue}`),
    lineageRoot: path.join(b.tmp, `lineage-${queue}`),
    ledger: b.ledger,
    logger: pino({ level: 'silent' }),
    redact: createRedactor(process.env),
    safety: config.worker,
    safetyInterceptors: options.safetyInterceptors,
    wrapActivities: options.wrapActivities,
    intentRules: options.intentRules,
    killSwitch: { enabled: true, emergencyStopFile: path.join(b.tmp, 'EMERGENCY_STOP') },
  });
}

/**
 * Writes a benchmark's result to bench/results/<name>.json, says where, and prints its figures
 * (the result itself unless given) as one JSON line: the last line, for scripts and the smoke test.
 */
export async function writeResult(name: string, result: unknown, figures: unknown = result): Promise<void> {
  await mkdir(RESULTS_DIR, { recursive: true });
  const file = path.join(RESULTS_DIR, `${name}.json`);
  await writeFile(file, `${JSON.stringify(result, null, 2)}\n`);
  out(`results: ${path.relative(process.cwd(), file)}`);
  out(JSON.stringify(figures));
}

/** Runs `worker` while `fn` runs. */
export async function withWorker<T>(worker: Pick<WardenWorker, 'run' | 'shutdown'>, fn: () => Promise<T>): Promise<T> {
  const running = worker.run();
  try {
    return await fn();
  } finally {
    worker.shutdown();
    await running;
  }
}

/** Runs one intent of the sample repo's "Add slugify" through the whole pipeline with the zero-delay scripted agent; fails unless it merges. */
export async function runToMerge(b: Bench, queue: string, input: { readonly id: string; readonly repo: string; readonly agentName: string }): Promise<WorkflowHandle<typeof intentWorkflow>> {
  const handle = await startIntent(
    b.client,
    { id: input.id, goal: 'Add slugify', repoPath: input.repo, paths: ['lib/**'], agent: { kind: 'scripted', name: input.agentName, scriptPath: b.demoScript }, limits: { cooldown: '0s' } },
    queue,
  );
  const outcome = await handle.result();
  if (outcome.status !== 'merged') throw new Error(`${input.id} ended ${outcome.status}`);
  return handle;
}
