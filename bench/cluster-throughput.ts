/**
 * Throughput on the real Temporal server, side by side in one run on one machine: intents per
 * second of Warden's no-op core (bench/core/noop-activities.ts: the workflow, its interceptors and
 * the PostgreSQL ledger real, every stage answered at once, the merge passed by the automation
 * ladder pinned at L3) on
 *
 * - the dev server (SQLite in memory) with 1 worker process,
 * - the real server (1.32.2 on PostgreSQL, as `npm run cluster:up` runs it) with 1 worker process,
 * - the same real server with 2 worker processes on one task queue;
 *
 * each worker its own child process (bench/core/worker-process.ts). For each: intents/s, p50/p90
 * of an intent's time from start to result, and the CPU the server, the workers, PostgreSQL and
 * this process (the client) used meanwhile, from /proc.
 *
 *   npm run bench:cluster -- [--intents 40] [--concurrency 8] [--warmup 8] [--slots 0.8,0.8] [--smoke]
 *
 * `--slots CPU,MEMORY` adds a fourth set-up: the real server with 1 worker process whose
 * `worker.slots` (the resource-based slot tuner) has those targets.
 *
 * `--smoke`: 4 intents, concurrency 2, no warm-up; where the real server is not built yet its two
 * columns are skipped, saying so (a build takes minutes: `npx tsx src/runtime/temporal-server-install.ts`).
 * A full run builds it when missing. The server's databases live in the benchmark's own embedded
 * PostgreSQL, beside the ledger. Results: bench/results/cluster-throughput.json.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import pg from 'pg';
import { startIntent } from '../src/client/intents';
import { findRunningServer } from '../src/ledger/embedded-server';
import { LadderStore } from '../src/ledger/ladder-store';
import { startPrivateCluster, stopProcess, TEMPORAL_DATABASES } from '../src/runtime/temporal-cluster';
import { ensureTemporalServer, isTemporalServerInstalled, temporalServerInstall, TEMPORAL_SERVER_VERSION } from '../src/runtime/temporal-server-install';
import { workflowIdForIntent } from '../src/shared/ids';
import { WORKER_READY_LINE } from './core/worker-process';
import { startCpuWindow, type CpuWindow } from './cpu';
import { endProgress, mapLimit, out, percentile, progress, runBenchmark, secs, sized, t } from './console';
import { REPO_ROOT, startBench, typeScriptArgs, writeResult, type Bench } from './harness';

const { values: flags } = parseArgs({
  options: {
    intents: { type: 'string' },
    concurrency: { type: 'string' },
    warmup: { type: 'string' },
    slots: { type: 'string' },
    smoke: { type: 'boolean', default: false },
  },
});
const N = sized(flags.intents, flags.smoke, 40, 4);
const C = sized(flags.concurrency, flags.smoke, 8, 2);
const WARMUP = sized(flags.warmup, flags.smoke, 8, 0);
for (const [name, value, least] of [['--intents', N, 1], ['--concurrency', C, 1], ['--warmup', WARMUP, 0]] as const) {
  if (!Number.isInteger(value) || value < least) {
    out(`${name} takes a whole number ≥ ${least}`);
    process.exit(2);
  }
}
const SLOTS = flags.slots === undefined ? undefined : flags.slots.split(',').map(Number);
if (SLOTS && (SLOTS.length !== 2 || SLOTS.some((share) => !(share > 0 && share <= 1)))) {
  out('--slots takes the CPU and memory targets of worker.slots, each above 0 and at most 1 (e.g. 0.8,0.8)');
  process.exit(2);
}

const AGENT = 'bench-cluster';
const WORKER_FILE = path.join(__dirname, 'core', 'worker-process.ts');
const say = (message: string): void => progress(`  ${message}`);

/** A Temporal server the intents run on. */
interface Target {
  readonly name: string;
  readonly address: string;
  readonly namespace: string;
  readonly client: Client;
  readonly pid: number;
}

interface Run {
  readonly system: string;
  readonly workers: number;
  readonly intents: number;
  readonly concurrency: number;
  readonly wallMs: number;
  readonly perSecond: number;
  readonly latency: { readonly p50Ms: number; readonly p90Ms: number };
  /** CPU seconds each part used over the measured intents, and its average share of one core. */
  readonly cpu: { readonly server: number; readonly workers: number; readonly postgres: number; readonly client: number; readonly machineBusyShare: number; readonly elapsedSeconds: number };
  /** CPU seconds by process tree as /proc counted them (each worker apart: both of two must work). */
  readonly cpuByProcess: Record<string, number>;
  /** Connections open on PostgreSQL at the end of the run, by database, and the server's max_connections. */
  readonly postgresConnections: Record<string, number>;
  /** What one intent asks of the server: its history's events, and the tasks the task queue carried for it. */
  readonly shape: IntentShape;
}

interface IntentShape {
  readonly historyEvents: number;
  readonly workflowTasks: number;
  readonly activityTasks: number;
}

async function intentShape(target: Target, intentId: string): Promise<IntentShape> {
  const events = (await target.client.workflow.getHandle(workflowIdForIntent(intentId)).fetchHistory()).events ?? [];
  return {
    historyEvents: events.length,
    workflowTasks: events.filter((e) => e.workflowTaskScheduledEventAttributes).length,
    activityTasks: events.filter((e) => e.activityTaskScheduledEventAttributes).length,
  };
}

/** Starts `count` worker processes on `queue`; resolves once each says it polls. */
async function startWorkers(b: Bench, target: Target, queue: string, count: number, databaseUrl: string, slots?: readonly number[]): Promise<ChildProcess[]> {
  const env = {
    ...process.env,
    BENCH_TEMPORAL_ADDRESS: target.address,
    BENCH_NAMESPACE: target.namespace,
    BENCH_TASK_QUEUE: queue,
    BENCH_DATABASE_URL: databaseUrl,
    BENCH_DIR: path.join(b.tmp, queue),
    ...(slots ? { BENCH_SLOTS: JSON.stringify({ targetCpu: slots[0], targetMemory: slots[1] }) } : {}),
  };
  return Promise.all(
    Array.from({ length: count }, async () => {
      const child = spawn(process.execPath, typeScriptArgs(WORKER_FILE), { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr!.on('data', (chunk: Buffer) => void (stderr = (stderr + chunk.toString()).slice(-4000)));
      await new Promise<void>((resolve, reject) => {
        let seen = '';
        child.stdout!.on('data', (chunk: Buffer) => {
          seen = (seen + chunk.toString()).slice(-1000);
          if (seen.includes(WORKER_READY_LINE)) resolve();
        });
        child.once('exit', (code, signal) => reject(new Error(`a bench worker exited (${signal ?? `code ${code}`}) before it was ready:\n${stderr}`)));
        child.once('error', reject);
      });
      // A benchmark cut short must not leave its workers polling.
      process.once('exit', () => (child.exitCode === null ? child.kill('SIGKILL') : undefined));
      return child;
    }),
  );
}

async function stopWorkers(children: readonly ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const guard = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(guard);
    }),
  );
}

async function connectionsByDatabase(adminUrl: string): Promise<Record<string, number>> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const rows = await client.query<{ datname: string; n: number }>("SELECT datname, count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() GROUP BY datname ORDER BY datname");
    const limit = await client.query<{ max_connections: string }>('SHOW max_connections');
    return { ...Object.fromEntries(rows.rows.map((row) => [row.datname, row.n])), max_connections: Number(limit.rows[0]!.max_connections) };
  } finally {
    await client.end();
  }
}

/** One intent through the no-op core; resolves with its time from start to result. */
async function oneIntent(b: Bench, target: Target, queue: string, id: string): Promise<number> {
  const begun = t();
  const handle = await startIntent(
    target.client,
    { id, goal: 'No-op pipeline', repoPath: path.join(b.tmp, 'no-repo'), paths: ['lib/**'], agent: { kind: 'scripted', name: AGENT, scriptPath: b.demoScript }, limits: { cooldown: '0s' } },
    queue,
  );
  const outcome = await handle.result();
  if (outcome.status !== 'merged') throw new Error(`${id} on ${target.name} ended ${outcome.status}`);
  return t() - begun;
}

interface Postgres {
  readonly adminUrl: string;
  readonly ledgerUrl: string;
  readonly pid: number;
}

/** `workers` worker processes on `target`: a warm-up, then N intents C at a time, with the CPU each part used. */
async function measure(b: Bench, pgInfo: Postgres, target: Target, workers: number, cpuRoots: () => Map<string, number>, slots?: readonly number[]): Promise<Run> {
  const system = `${target.name}, ${workers} worker${workers > 1 ? 's' : ''}${slots ? `, slots ${slots.join('/')}` : ''}`;
  const queue = `cluster-${target.name.replace(/\W+/g, '-')}-${workers}w${slots ? '-slots' : ''}`;
  progress(`${system}: starting ${workers} worker process${workers > 1 ? 'es' : ''}…`);
  const children = await startWorkers(b, target, queue, workers, pgInfo.ledgerUrl, slots);
  try {
    if (WARMUP > 0) {
      let warmed = 0;
      await mapLimit(
        Array.from({ length: WARMUP }, (_, i) => i),
        C,
        async (i) => {
          await oneIntent(b, target, queue, `${queue}-warmup-${i}`);
          progress(`${system}: warm-up ${++warmed}/${WARMUP}`);
        },
      );
    }
    const roots = cpuRoots();
    children.forEach((child, i) => roots.set(`worker ${i + 1}`, child.pid!));
    const window = startCpuWindow(roots);
    const latencies: number[] = [];
    const started = t();
    await mapLimit(
      Array.from({ length: N }, (_, i) => i),
      C,
      async (i) => {
        latencies.push(await oneIntent(b, target, queue, `${queue}-${i}`));
        progress(`${system}: ${latencies.length}/${N} merged, ${secs(t() - started)}`);
      },
    );
    const wallMs = t() - started;
    const cpu = window.end();
    const connections = await connectionsByDatabase(pgInfo.adminUrl);
    const shape = await intentShape(target, `${queue}-0`);
    endProgress();
    const sorted = [...latencies].sort((a, b) => a - b);
    return {
      system,
      workers,
      intents: N,
      concurrency: C,
      wallMs,
      perSecond: N / (wallMs / 1000),
      latency: { p50Ms: percentile(sorted, 50)!, p90Ms: percentile(sorted, 90)! },
      cpu: cpuOf(cpu, target),
      cpuByProcess: Object.fromEntries(Object.entries(cpu.cpuSeconds).map(([label, value]) => [label, fixed(value, 2)])),
      postgresConnections: connections,
      shape,
    };
  } finally {
    await stopWorkers(children);
  }
}

function cpuOf(window: CpuWindow, target: Target): Run['cpu'] {
  const seconds = window.cpuSeconds;
  const workers = Object.entries(seconds)
    .filter(([label]) => label.startsWith('worker '))
    .reduce((sum, [, value]) => sum + value, 0);
  return { server: seconds[target.name] ?? 0, workers, postgres: seconds.postgres ?? 0, client: seconds['bench client'] ?? 0, machineBusyShare: window.machineBusyShare, elapsedSeconds: window.elapsedSeconds };
}

/**
 * The real server on the bench's PostgreSQL, on free ports: built when missing (a full run), or
 * undefined with the reason when it is not built and this is a smoke run.
 */
async function startRealServer(b: Bench, pgInfo: Postgres): Promise<{ target: Target; stop(): Promise<void> } | { skipped: string }> {
  let install = temporalServerInstall();
  if (!(await isTemporalServerInstalled(install))) {
    if (flags.smoke) return { skipped: `the real Temporal server ${TEMPORAL_SERVER_VERSION} is not built in ${install.dir} (build it: npx tsx src/runtime/temporal-server-install.ts)` };
    out(`building the real Temporal server ${TEMPORAL_SERVER_VERSION} (minutes, once per machine)…`);
    install = await ensureTemporalServer({ log: say });
  }
  progress(`starting the real Temporal server ${TEMPORAL_SERVER_VERSION} on PostgreSQL…`);
  const db = { adminUrl: pgInfo.adminUrl, user: 'temporal', password: randomBytes(12).toString('hex'), ...TEMPORAL_DATABASES };
  const { server } = await startPrivateCluster({ install, db, dir: b.tmp, log: say });
  const connection = await Connection.connect({ address: server.address });
  endProgress();
  return {
    target: { name: 'real server', address: server.address, namespace: 'default', client: new Client({ connection, namespace: 'default' }), pid: server.pid },
    async stop() {
      await connection.close();
      await stopProcess(server.pid, () => undefined);
    },
  };
}

async function postgresOf(b: Bench): Promise<Postgres> {
  const running = await findRunningServer(path.join(b.tmp, 'postgres'));
  if (!running) throw new Error("the benchmark's embedded PostgreSQL is not running");
  const ledgerUrl = new URL(running.url);
  ledgerUrl.pathname = '/warden';
  return { adminUrl: running.url, ledgerUrl: ledgerUrl.toString(), pid: running.pid };
}

const fixed = (value: number, digits = 1): number => Number(value.toFixed(digits));

function printTable(runs: readonly Run[]): void {
  out('');
  out('| system | intents/s | p50 intent | p90 intent | CPU server | CPU workers | CPU PostgreSQL | CPU client | machine busy |');
  out('|---|---|---|---|---|---|---|---|---|');
  // CPU as the share of one core over the measured window (2.0 = two cores busy throughout).
  const share = (r: Run, seconds: number): string => `${(seconds / Math.max(0.001, r.cpu.elapsedSeconds)).toFixed(2)}`;
  for (const r of runs) {
    out(
      `| ${r.system} | ${r.perSecond.toFixed(2)} | ${r.latency.p50Ms.toFixed(0)} ms | ${r.latency.p90Ms.toFixed(0)} ms | ${share(r, r.cpu.server)} | ${share(r, r.cpu.workers)} | ${share(r, r.cpu.postgres)} | ${share(r, r.cpu.client)} | ${(r.cpu.machineBusyShare * 100).toFixed(0)} % |`,
    );
  }
  out('(CPU columns: cores in use on average over the measured intents, from /proc; machine busy counts every process, other users\' too)');
  out('');
  out('| system | CPU ms per intent: server | workers | PostgreSQL | one intent: workflow tasks, activity tasks, history events | PostgreSQL connections at the end |');
  out('|---|---|---|---|---|---|');
  for (const r of runs) {
    const per = (seconds: number): string => ((seconds * 1000) / r.intents).toFixed(0);
    out(`| ${r.system} | ${per(r.cpu.server)} | ${per(r.cpu.workers)} | ${per(r.cpu.postgres)} | ${r.shape.workflowTasks}, ${r.shape.activityTasks}, ${r.shape.historyEvents} | ${Object.entries(r.postgresConnections).map(([db, n]) => `${db} ${n}`).join(', ')} |`);
  }
}

async function main(): Promise<number> {
  out(`cluster throughput: ${N} intents per system, concurrency ${C}, ${WARMUP} warm-up; ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown cpu'}), node ${process.version}`);
  const b = await startBench('cluster');
  try {
    const pgInfo = await postgresOf(b);
    // Pinned at L3: the ladder passes every merge, so no person is in the loop.
    await new LadderStore(b.database.pool).setLevel({ scope: `agent:${AGENT}`, level: 3, pinned: true, by: 'bench', defaults: { level: 0, allowLevelUp: false } });
    const devTarget: Target = { name: 'dev server', address: b.server.address, namespace: b.server.namespace, client: b.client, pid: b.server.pid };
    const roots = (extra: Record<string, number> = {}) => () => new Map<string, number>([['dev server', b.server.pid], ['postgres', pgInfo.pid], ['bench client', process.pid], ...Object.entries(extra)]);
    const runs: Run[] = [await measure(b, pgInfo, devTarget, 1, roots())];
    const real = await startRealServer(b, pgInfo);
    let skipped: string | undefined;
    if ('skipped' in real) {
      skipped = real.skipped;
      out(`SKIPPED the real server's columns: ${skipped}`);
    } else {
      try {
        const realRoots = roots({ 'real server': real.target.pid });
        runs.push(await measure(b, pgInfo, real.target, 1, realRoots));
        runs.push(await measure(b, pgInfo, real.target, 2, realRoots));
        if (SLOTS) runs.push(await measure(b, pgInfo, real.target, 1, realRoots, SLOTS));
      } finally {
        await real.stop();
      }
    }
    printTable(runs);
    const find = (system: string): Run | undefined => runs.find((r) => r.system === system);
    const dev = find('dev server, 1 worker')!;
    const real1 = find('real server, 1 worker');
    const real2 = find('real server, 2 workers');
    const ratios = real1 && real2 ? { realVsDev: real1.perSecond / dev.perSecond, twoWorkersVsOne: real2.perSecond / real1.perSecond } : undefined;
    out('');
    if (ratios) out(`same run: real server / dev server (1 worker) ${ratios.realVsDev.toFixed(2)}×; real server 2 workers / 1 worker ${ratios.twoWorkersVsOne.toFixed(2)}×`);
    const perSecond = Object.fromEntries(runs.map((r) => [r.system, fixed(r.perSecond, 3)]));
    await writeResult('cluster-throughput', { intents: N, concurrency: C, warmup: WARMUP, cores: os.cpus().length, runs, ratios, ...(skipped ? { skipped } : {}) }, {
      perSecond,
      p50Ms: Object.fromEntries(runs.map((r) => [r.system, fixed(r.latency.p50Ms, 0)])),
      ...(ratios ? { realVsDev: fixed(ratios.realVsDev, 3), twoWorkersVsOne: fixed(ratios.twoWorkersVsOne, 3) } : { realServer: 'skipped' }),
    });
    return 0;
  } finally {
    await b.close();
  }
}

runBenchmark('cluster throughput', main);
