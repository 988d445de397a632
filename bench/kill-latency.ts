/**
 * Kill-latency benchmark: with N intents (default 100) each inside a long-running command agent,
 * how long does `warden stop --all` take to leave 0 running intent workflows and 0 live agent
 * processes? A benchmark to run by hand, not a timed test:
 *
 *   npx tsx bench/kill-latency.ts [--intents 100] [--window 10] [--setup-timeout 900] [--sandbox none|process] [--cache N]
 *   npm run bench:kill -- --intents 50
 *
 * `--window K` (default 10) starts intents so that at most K are on their way to impl at once;
 * `--window all` starts every intent at once. `--sandbox process` runs the agents at the
 * command agent's `process` sandbox level instead of `none`. `--cache N` sets the worker's
 * `maxCachedWorkflows` (default: the config's); with fewer than N, intents are evicted and every
 * workflow task of theirs replays. `--cpu-profile FILE` profiles the worker's main thread from
 * the stop until all is closed and prints its top functions; `--log-level info` puts every
 * activity's duration in the worker log. The run also prints the CPU time the worker, the dev
 * server and PostgreSQL used until all was closed, the processes the worker started and the
 * ledger round trips (queries to PostgreSQL) made. Then, on the same server, Temporal's own floor:
 * N bare workflows, each waiting on one activity that heartbeats, cancelled all at once, and the
 * time until all have closed (`bareHanging` in bench/bare/workflow.ts).
 *
 * Everything is its own: an in-memory Temporal dev server on free ports (UI off), an embedded
 * PostgreSQL in a temp folder, one in-process worker, N sample repos. The temporal CLI comes from
 * `<repo>/.warden/tools` (installed there on first use). All of it is torn down at the end, on
 * failure too. The result goes to bench/results/kill-latency.json; the worker's log (warn and
 * up) to bench/results/kill-latency.log.
 */
import { existsSync, readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { NativeConnection, Worker } from '@temporalio/worker';
import * as bareActivities from './bare/activities';
import type { WardenWorker } from '../src/workers/host-worker';
import pino from 'pino';
import { liveProcessGroups } from '../src/activities/process';
import { processTally, tallySince } from '../src/activities/process-tally';
import { answeringDesignStages, createSampleRepo } from '../src/client/sample-repo';
import { quietSdkRuntime } from '../src/client/in-process-worker';
import { startCpuProfile, startCpuWindow, type CpuWindow } from './cpu';
import { countRoundTrips } from './round-trips';
import { endProgress, mapLimit, out, percentile, progress, runBenchmark, secs, sized, sleep, t } from './console';
import { unthrottledConfig } from './harness';
import { startIntent } from '../src/client/intents';
import type { IntentInput } from '../src/shared/intent';
import { stopAll } from '../src/client/stop-intents';
import { openDatabase, type LedgerDatabase } from '../src/ledger/database';
import { Ledger } from '../src/ledger/ledger';
import { startDevServer, type DevServer } from '../src/runtime/dev-server';
import { createLogger } from '../src/runtime/logger';
import { ensureTemporalCli } from '../src/runtime/temporal-cli';
import { createRedactor } from '../src/shared/redact';
import { createWardenWorker } from '../src/workers/warden-worker';

const REPO_ROOT = path.resolve(__dirname, '..');
const RESULTS_DIR = path.join(REPO_ROOT, 'bench', 'results');
const RESULT_FILE = path.join(RESULTS_DIR, 'kill-latency.json');
const LOG_FILE = path.join(RESULTS_DIR, 'kill-latency.log');
const TARGET_MS = 2000;
/** How long to wait, after stop --all, for the workflows and agents to be gone. */
const MEASURE_TIMEOUT_MS = 120_000;
const RUNNING_QUERY = "WorkflowType = 'intentWorkflow' AND ExecutionStatus = 'Running'";

const { values: flags } = parseArgs({
  options: {
    intents: { type: 'string' },
    smoke: { type: 'boolean', default: false },
    'setup-timeout': { type: 'string', default: '900' },
    sandbox: { type: 'string', default: 'none' },
    window: { type: 'string', default: '10' },
    cache: { type: 'string' },
    'cpu-profile': { type: 'string' },
    'log-level': { type: 'string', default: 'warn' },
    help: { type: 'boolean', default: false },
  },
});
if (flags.help) {
  process.stdout.write('usage: npx tsx bench/kill-latency.ts [--intents N (100; 3 with --smoke)] [--smoke] [--setup-timeout SECONDS (900)] [--window K|all (10)] [--sandbox none|process (none)] [--cache N (config default)] [--cpu-profile FILE (profile the worker main thread during the stop)] [--log-level LEVEL (warn; info logs every activity with its duration)]\n');
  process.exit(0);
}
const N = sized(flags.intents, flags.smoke, 100, 3);
const SETUP_TIMEOUT_MS = Number(flags['setup-timeout']) * 1000;
const WINDOW = flags.window === 'all' ? N : Number(flags.window);
if (!Number.isInteger(WINDOW) || WINDOW < 1) throw new Error(`--window must be a positive whole number or all, not ${flags.window}`);
const SANDBOX = flags.sandbox as 'none' | 'process';
if (SANDBOX !== 'none' && SANDBOX !== 'process') throw new Error(`--sandbox must be none or process (bubblewrap hides the agent's pid), not ${flags.sandbox}`);
if (!Number.isInteger(N) || N < 1) throw new Error(`--intents must be a positive whole number, not ${flags.intents}`);
if (!['trace', 'debug', 'info', 'warn', 'error'].includes(flags['log-level'])) throw new Error(`--log-level must be trace, debug, info, warn or error, not ${flags['log-level']}`);
const CACHE = flags.cache === undefined ? undefined : Number(flags.cache);
if (CACHE !== undefined && (!Number.isInteger(CACHE) || CACHE < 0)) throw new Error(`--cache must be a whole number ≥ 0, not ${flags.cache}`);
if (!(SETUP_TIMEOUT_MS > 0)) throw new Error(`--setup-timeout must be a positive number of seconds, not ${flags['setup-timeout']}`);

/** The kill-switch test's agent: answers every stage at once, but in impl records its pid and hangs. */
function hangingAgent(pidFile: string): string {
  return answeringDesignStages(`if grep -q '^# Warden: impl'; then cut -d' ' -f5 /proc/self/stat > ${pidFile}; sleep 600 & sleep 600 & wait; else echo ok; fi`);
}

/**
 * The agent profile. `sandbox` is set through a variable, not a literal, so this also compiles
 * where the profile has no sandbox setting (zod drops the key there). Only `none` and `process`
 * keep `$$` a host pid the benchmark can signal; bubblewrap has its own pid namespace and /tmp.
 */
function agentProfile(pidFile: string): IntentInput['agent'] {
  const profile = { kind: 'command' as const, command: hangingAgent(pidFile), promptVia: 'stdin' as const, timeout: '30m', maxOutputBytes: 1_000_000, sandbox: SANDBOX };
  return profile;
}

function readPid(file: string): number | undefined {
  if (!existsSync(file)) return undefined;
  const pid = Number(readFileSync(file, 'utf8').trim());
  return Number.isInteger(pid) && pid > 1 ? pid : undefined;
}

/** Polls `done` every `everyMs` until true; resolves with the ms since `since`, or undefined on timeout. */
async function timeUntil(done: () => boolean | Promise<boolean>, since: number, everyMs: number, timeoutMs: number): Promise<number | undefined> {
  while (t() - since < timeoutMs) {
    if (await done()) return t() - since;
    await sleep(everyMs);
  }
  return undefined;
}


/** Set on SIGINT/SIGTERM: the setup loop stops starting things while everything is torn down. */
let interrupted = false;

interface Resources {
  tmp?: string;
  server?: DevServer;
  database?: LedgerDatabase;
  connection?: Connection;
  native?: NativeConnection;
  worker?: WardenWorker;
  workerRun?: Promise<void>;
  pidFiles: string[];
}

/** A workflow's history events from `sinceWallMs` on, as "+ms event (activity)" lines: where its time went. */
async function timelineSince(client: Client, workflowId: string, sinceWallMs: number): Promise<string[]> {
  const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const activityNames = new Map<string, string>();
  const lines: string[] = [];
  for (const event of events) {
    const name = event.activityTaskScheduledEventAttributes?.activityType?.name;
    if (name) activityNames.set(String(event.eventId), name);
    const at = Number(event.eventTime?.seconds ?? 0) * 1000 + Math.round((event.eventTime?.nanos ?? 0) / 1e6);
    if (at < sinceWallMs) continue;
    const attributes = Object.values(event).find((v): v is { scheduledEventId?: unknown } => typeof v === 'object' && v !== null && 'scheduledEventId' in v);
    const activity = name ?? (attributes?.scheduledEventId ? activityNames.get(String(attributes.scheduledEventId)) : undefined);
    const type = typeof event.eventType === 'number' ? temporal.api.enums.v1.EventType[event.eventType] : String(event.eventType);
    lines.push(`+${String(at - sinceWallMs).padStart(5)} ms  ${String(type).replace(/^EVENT_TYPE_/, '')}${activity ? ` (${activity})` : ''}`);
  }
  return lines;
}

async function main(): Promise<number> {
  const res: Resources = { pidFiles: [] };
  const benchStart = t();
  let cleaning: Promise<void> | undefined;
  const cleanUpOnce = (): Promise<void> => (cleaning ??= cleanUp(res));
  // Ctrl-C in the middle of a run still tears everything down.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      interrupted = true;
      endProgress();
      out(`${signal}: stopping`);
      void cleanUpOnce().finally(() => process.exit(130));
    });
  }
  try {
    return await run(res, benchStart);
  } finally {
    await cleanUpOnce();
  }
}

async function run(res: Resources, benchStart: number): Promise<number> {
  out(`kill-latency benchmark: ${N} intents, ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown cpu'}), node ${process.version}`);
  await mkdir(RESULTS_DIR, { recursive: true });
  quietSdkRuntime();

  // The embedded PostgreSQL runs as the `postgres` user when we are root: it must traverse tmp.
  res.tmp = await mkdtemp(path.join(os.tmpdir(), 'warden-bench-kill-'));
  await chmod(res.tmp, 0o755);
  const dirs = {
    postgres: path.join(res.tmp, 'postgres'),
    repos: path.join(res.tmp, 'repos'),
    pids: path.join(res.tmp, 'pids'),
    worktrees: path.join(res.tmp, 'worktrees'),
    lineage: path.join(res.tmp, 'lineage'),
  };
  await Promise.all(Object.values(dirs).map((dir) => mkdir(dir, { recursive: true, mode: 0o755 })));
  const setupTimes: Record<string, number> = {};
  const phase = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    const started = t();
    progress(`${name}…`);
    const value = await fn();
    setupTimes[name] = Math.round(t() - started);
    progress(`${name}: ${secs(t() - started)}`);
    endProgress();
    return value;
  };

  // 1. Temporal and PostgreSQL, side by side.
  await phase('starting Temporal dev server and PostgreSQL', async () => {
    const [server, database] = await Promise.all([
      (async () => {
        const cliPath = await ensureTemporalCli({ wardenHome: path.join(REPO_ROOT, '.warden'), env: process.env });
        return startDevServer({ cliPath, port: 0, uiPort: false, logFile: path.join(res.tmp!, 'temporal.log') });
      })(),
      openDatabase({ dataDir: dirs.postgres, port: 0 }),
    ]);
    res.server = server;
    res.database = database;
  });
  const server = res.server!;
  const ledger = new Ledger(res.database!.pool);
  const ledgerRoundTrips = countRoundTrips(res.database!.pool);
  res.connection = await Connection.connect({ address: server.address });
  const client = new Client({ connection: res.connection, namespace: server.namespace });

  // 2. One worker, with limits that do not throttle N agents started at once.
  const config = unthrottledConfig(CACHE === undefined ? {} : { maxCachedWorkflows: CACHE });
  await phase('bundling workflows and starting the worker', async () => {
    res.native = await NativeConnection.connect({ address: server.address });
    const logger = createLogger({ level: flags['log-level'], destination: pino.destination({ dest: LOG_FILE, sync: false, append: false }) });
    res.worker = await createWardenWorker({
      connection: res.native,
      namespace: server.namespace,
      worktreeRoot: dirs.worktrees,
      lineageRoot: dirs.lineage,
      ledger,
      logger,
      redact: createRedactor(process.env),
      safety: config.worker,
      killSwitch: { enabled: true, emergencyStopFile: path.join(res.tmp!, 'EMERGENCY_STOP') },
    });
    res.workerRun = res.worker.run();
    // A worker that dies makes everything below hang: surface it at once.
    res.workerRun.catch((error: unknown) => {
      endProgress();
      out(`worker failed: ${error instanceof Error ? error.message : String(error)}`);
    });
  });

  // 3. N sample repos.
  const repos: string[] = [];
  await phase(`creating ${N} sample repos`, async () => {
    for (let i = 0; i < N; i++) {
      repos.push(createSampleRepo(path.join(dirs.repos, `repo-${i}`)));
      if ((i + 1) % 10 === 0 || i + 1 === N) progress(`creating ${N} sample repos: ${i + 1}/${N}`);
    }
  });

  // 4. N intents, each ending up in a hanging impl agent.
  const tag = `${Date.now().toString(36)}`;
  const ids = repos.map((_, i) => `bench-kill-${tag}-${i}`);
  res.pidFiles = ids.map((_, i) => path.join(dirs.pids, `${i}.pid`));
  const setupStarted = t();
  const start = async (i: number): Promise<void> => {
    await startIntent(client, {
      id: ids[i]!,
      goal: 'hang in impl (kill-latency benchmark)',
      repoPath: repos[i]!,
      baseBranch: 'main',
      agent: agentProfile(res.pidFiles[i]!),
      limits: config.limits,
      // The agent runs outside bubblewrap so the benchmark can see its pid: the operator's opt-in.
      confinement: { allowUnconfinedCode: true, testNetwork: 'none' },
    });
  };
  // At most WINDOW intents on their way to impl at once: their stages run git with no
  // heartbeat, and too many of them at once on a small machine overrun the heartbeat timeout.
  let started = 0;
  let lastKey = '';
  let lastPrint = 0;
  let lastCheck = t();
  let pids: number[] = [];
  for (;;) {
    if (interrupted) throw new Error('interrupted');
    pids = res.pidFiles.map(readPid).filter((pid): pid is number => pid !== undefined);
    const running = liveProcessGroups(pids).live.size;
    const batch = Math.min(N - started, WINDOW - (started - running));
    if (batch > 0) {
      await Promise.all(Array.from({ length: batch }, (_, k) => start(started + k)));
      started += batch;
    }
    const key = `started ${started}/${N} intents, ${running}/${N} agents running`;
    if (key !== lastKey || t() - lastPrint > 10_000) {
      progress(`${key} (${secs(t() - setupStarted)})`);
      lastKey = key;
      lastPrint = t();
    }
    if (running === N) break;
    if (t() - setupStarted > SETUP_TIMEOUT_MS) {
      endProgress();
      throw new Error(`only ${running}/${N} agents were running after ${secs(SETUP_TIMEOUT_MS)}; try fewer --intents or a longer --setup-timeout`);
    }
    // Every 10 s: an intent that ended (failed) before impl would never get there.
    if (t() - lastCheck > 10_000) {
      lastCheck = t();
      // (Visibility lags behind starts, so a low running count alone proves nothing.)
      const ended: string[] = [];
      for await (const wf of client.workflow.list({ query: "WorkflowType = 'intentWorkflow' AND ExecutionStatus != 'Running'" })) {
        ended.push(`${wf.workflowId} ${wf.status.name}`);
      }
      if (ended.length > 0) {
        endProgress();
        throw new Error(`${ended.length} intent(s) ended before their agent ran: ${ended.slice(0, 5).join(', ')}${ended.length > 5 ? ', …' : ''} (worker log: ${LOG_FILE})`);
      }
    }
    await sleep(250);
  }
  endProgress();
  setupTimes['until all agents ran'] = Math.round(t() - setupStarted);
  out(`${N}/${N} agents running after ${secs(t() - setupStarted)}; load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const runningBefore = (await client.workflow.count(RUNNING_QUERY)).count;
  const loadAtStop = os.loadavg().map((l) => Number(l.toFixed(2)));

  // 5. The emergency stop, and the clocks.
  out('warden stop --all …');
  const t0 = t();
  const wallT0 = Date.now();
  const cpuRoots = new Map([
    ['worker (this process, its agents and git)', process.pid],
    ['Temporal dev server', server.pid],
    ...(res.database!.server ? [['PostgreSQL', res.database!.server.pid] as [string, number]] : []),
  ]);
  const cpuWindow = startCpuWindow(cpuRoots);
  const launchedBefore = processTally();
  const roundTripsBefore = ledgerRoundTrips();
  const profiler = flags['cpu-profile'] ? await startCpuProfile() : undefined;
  const deaths = new Map<number, number>();
  let zombieOnlyGroups = 0;
  const [stopResult, workflowsMs, agentsMs] = await Promise.all([
    stopAll(client, ledger, { by: 'bench', reason: 'kill-latency benchmark' }).then((outcomes) => ({ cancelled: outcomes, ms: t() - t0 })),
    timeUntil(async () => (await client.workflow.count(RUNNING_QUERY)).count === 0, t0, 50, MEASURE_TIMEOUT_MS),
    timeUntil(
      () => {
        const { live, zombieOnly } = liveProcessGroups(pids);
        const now = t() - t0;
        for (const pid of pids) if (!live.has(pid) && !deaths.has(pid)) deaths.set(pid, now);
        zombieOnlyGroups = Math.max(zombieOnlyGroups, zombieOnly.size);
        return live.size === 0;
      },
      t0,
      20,
      MEASURE_TIMEOUT_MS,
    ),
  ]);
  const cpu = cpuWindow.end();
  // The worker is this process: what it launched until all had closed. The CPU above counts
  // only processes still alive at the end, so the git processes that came and went are not in it.
  const launchedDuringStop = tallySince(launchedBefore).launched;
  // The stop's own writes and the worker's, from the stop until all had closed.
  const roundTripsDuringStop = ledgerRoundTrips() - roundTripsBefore;
  if (profiler) await profiler.stopInto(flags['cpu-profile']!);
  const bothMs = workflowsMs === undefined || agentsMs === undefined ? undefined : Math.max(workflowsMs, agentsMs);
  const deathTimes = [...deaths.values()].sort((a, b) => a - b);

  // How the intents ended, and when (by the server's close time, free of visibility lag).
  const statuses: Record<string, number> = {};
  const closes: number[] = [];
  let lastClosed: { id: string; ms: number } | undefined;
  await mapLimit(ids, 10, async (id) => {
    const description = await client.workflow.getHandle(`intent-${id}`).describe();
    statuses[description.status.name] = (statuses[description.status.name] ?? 0) + 1;
    if (!description.closeTime) return;
    const ms = description.closeTime.getTime() - wallT0;
    closes.push(ms);
    if (!lastClosed || ms > lastClosed.ms) lastClosed = { id, ms };
  });
  closes.sort((a, b) => a - b);
  const lastTimeline = lastClosed ? await timelineSince(client, `intent-${lastClosed.id}`, wallT0) : [];

  // 6. Temporal's own floor on the same server, measured the same way.
  const floor = await bareCancelFloor(res, client, server);

  const round = (ms: number | undefined): number | null => (ms === undefined ? null : Math.round(ms));
  const result = {
    benchmark: 'kill-latency',
    when: new Date().toISOString(),
    intents: N,
    sandbox: SANDBOX,
    startWindow: WINDOW,
    maxCachedWorkflows: config.worker.maxCachedWorkflows ?? null,
    runningBeforeStop: runningBefore,
    cores: os.cpus().length,
    loadAverageAtStop: loadAtStop,
    cpu: os.cpus()[0]?.model ?? 'unknown',
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    targetMs: TARGET_MS,
    stopAllReturnedMs: round(stopResult.ms),
    cancelled: stopResult.cancelled.length,
    zeroRunningWorkflowsMs: round(workflowsMs),
    zeroLiveAgentsMs: round(agentsMs),
    bothMs: round(bothMs),
    withinTarget: bothMs !== undefined && bothMs <= TARGET_MS,
    agentDeathMs: { first: round(deathTimes[0]), p50: round(percentile(deathTimes, 50)), p90: round(percentile(deathTimes, 90)), last: round(deathTimes.at(-1)) },
    workflowCloseMs: { first: round(closes[0]), p50: round(percentile(closes, 50)), p90: round(percentile(closes, 90)), last: round(closes.at(-1)) },
    zombieOnlyGroups,
    cpuDuringStop: cpu,
    processesLaunchedDuringStop: launchedDuringStop,
    ledgerRoundTripsDuringStop: roundTripsDuringStop,
    finalStatuses: statuses,
    lastToClose: lastClosed ? { intentId: lastClosed.id, timeline: lastTimeline } : null,
    setupMs: setupTimes,
    bareFloor: { closedMs: round(floor.closedMs), cpuDuringStop: floor.cpu },
    totalMs: Math.round(t() - benchStart),
  };
  await writeFile(RESULT_FILE, `${JSON.stringify(result, null, 2)}\n`);

  const fmt = (ms: number | null): string => (ms === null ? `not within ${MEASURE_TIMEOUT_MS / 1000} s` : `${ms} ms`);
  const rows: [string, string][] = [
    ['intents (agents running at stop)', `${N} (${runningBefore} workflows running)`],
    ['machine cores (load average at stop)', `${result.cores} (${loadAtStop.join(' ')})`],
    ['stopAll returned', fmt(result.stopAllReturnedMs)],
    ['(a) 0 running intent workflows', fmt(result.zeroRunningWorkflowsMs)],
    ['(b) 0 live agent process groups', fmt(result.zeroLiveAgentsMs)],
    ['(c) both', `${fmt(result.bothMs)}  (target ≤ ${TARGET_MS} ms: ${result.withinTarget ? 'met' : 'MISSED'})`],
    ['agent deaths first / p50 / p90 / last', [result.agentDeathMs.first, result.agentDeathMs.p50, result.agentDeathMs.p90, result.agentDeathMs.last].map((v) => (v === null ? '-' : `${v}`)).join(' / ') + ' ms'],
    ['workflow close times first / p50 / p90 / last', [result.workflowCloseMs.first, result.workflowCloseMs.p50, result.workflowCloseMs.p90, result.workflowCloseMs.last].map((v) => (v === null ? '-' : `${v}`)).join(' / ') + ' ms'],
    [
      `CPU until all closed (${cpu.elapsedSeconds.toFixed(2)} s)`,
      `machine ${(cpu.machineBusyShare * 100).toFixed(0)}% busy; ${Object.entries(cpu.cpuSeconds)
        .map(([label, seconds]) => `${label} ${seconds.toFixed(2)} s`)
        .join(', ')}`,
    ],
    ['processes the worker started until then', Object.entries(launchedDuringStop).map(([program, count]) => `${program} ${count}`).join(', ') || 'none'],
    ['ledger round trips until then', `${roundTripsDuringStop} (${(roundTripsDuringStop / N).toFixed(1)} per intent)`],
    ['final workflow statuses', Object.entries(statuses).map(([k, v]) => `${k} ${v}`).join(', ')],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  out('');
  for (const [k, v] of rows) out(`  ${k.padEnd(width)}  ${v}`);
  if (zombieOnlyGroups > 0) out(`  (${zombieOnlyGroups} agent group(s) were zombies only for a while — killed orphans init had not reaped yet; counted as dead)`);
  if (lastClosed) {
    out('');
    out(`  the last intent to close (${lastClosed.id}), its history from the stop on:`);
    for (const line of lastTimeline) out(`    ${line}`);
  }
  out('');
  out(`  Temporal's own floor: ${N} bare workflows, each waiting on a heartbeating activity, cancelled at once: all closed within ${fmt(round(floor.closedMs))}`);
  out(`    (CPU ${floor.cpu.elapsedSeconds.toFixed(2)} s: ${Object.entries(floor.cpu.cpuSeconds).map(([label, seconds]) => `${label} ${seconds.toFixed(2)} s`).join(', ')})`);
  out('');
  out(`result: ${path.relative(process.cwd(), RESULT_FILE)}`);
  out(JSON.stringify(result));
  return workflowsMs !== undefined && agentsMs !== undefined ? 0 : 1;
}

/**
 * N bare workflows on their own task queue, each in `hang` (heartbeating), cancelled at once
 * (the client's cancel calls all in flight together): ms until none runs, and the CPU used.
 */
async function bareCancelFloor(res: Resources, client: Client, server: DevServer): Promise<{ closedMs: number | undefined; cpu: CpuWindow }> {
  const taskQueue = 'bare-kill';
  let hanging = 0;
  const worker = await Worker.create({
    connection: res.native!,
    namespace: server.namespace,
    taskQueue,
    workflowsPath: require.resolve('./bare/workflow'),
    activities: {
      ...bareActivities,
      hang: async () => {
        hanging += 1;
        try {
          await bareActivities.hang();
        } finally {
          hanging -= 1;
        }
      },
    },
  });
  const running = worker.run();
  try {
    const tag = Date.now().toString(36);
    const handles = await Promise.all(Array.from({ length: N }, (_, i) => client.workflow.start('bareHanging', { taskQueue, workflowId: `bare-kill-${tag}-${i}` })));
    const allHanging = await timeUntil(() => hanging === N, t(), 50, MEASURE_TIMEOUT_MS);
    if (allHanging === undefined) throw new Error(`only ${hanging}/${N} bare activities ran within ${MEASURE_TIMEOUT_MS / 1000} s`);
    const query = "WorkflowType = 'bareHanging' AND ExecutionStatus = 'Running'";
    await timeUntil(async () => (await client.workflow.count(query)).count === N, t(), 50, MEASURE_TIMEOUT_MS);
    const cpuWindow = startCpuWindow(new Map([['this process (the bare worker)', process.pid], ['Temporal dev server', server.pid]]));
    const t0 = t();
    const [closedMs] = await Promise.all([timeUntil(async () => (await client.workflow.count(query)).count === 0, t0, 50, MEASURE_TIMEOUT_MS), Promise.all(handles.map((h) => h.cancel()))]);
    return { closedMs, cpu: cpuWindow.end() };
  } finally {
    worker.shutdown();
    await running;
  }
}

/** Tears everything down, each step on its own so one failure does not leave the rest running. */
async function cleanUp(res: Resources): Promise<void> {
  const step = async (name: string, fn: () => Promise<unknown> | undefined): Promise<void> => {
    try {
      await fn();
    } catch (error) {
      out(`cleanup: ${name} failed: ${error instanceof Error ? error.message : String(error)}`);
    }
  };
  const started = t();
  progress('cleaning up…');
  if (res.worker) {
    await step('stopping the worker', async () => {
      if (res.worker!.getState() === 'RUNNING') res.worker!.shutdown();
      await res.workerRun;
    });
  }
  // Whatever agent survived (a failed run): kill its whole group.
  for (const file of res.pidFiles) {
    const pid = readPid(file);
    if (pid === undefined) continue;
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  await step('closing the worker connection', async () => res.native?.close());
  await step('closing the client connection', async () => res.connection?.close());
  await step('stopping the Temporal dev server', async () => res.server?.stop());
  await step('stopping PostgreSQL', async () => res.database?.close());
  if (res.tmp) await step('removing the temp folder', () => rm(res.tmp!, { recursive: true, force: true, maxRetries: 3 }));
  progress(`cleaned up in ${secs(t() - started)}`);
  endProgress();
}

runBenchmark('kill-latency', main);
