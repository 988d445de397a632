/**
 * Faults of real processes: a worker killed with SIGKILL while it runs an agent, and the
 * Temporal server stopped and started again while a stage runs. Each test starts a dev server of
 * its own, so no other test file shares its task queue.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { WardenWorker } from '../../src/workers/host-worker';
import type { WardenActivities } from '../../src/activities';
import { startIntent } from '../../src/client/intents';
import { startDevServer, type DevServer } from '../../src/runtime/dev-server';
import { findFreePort } from '../../src/shared/ports';
import type { IntentInput } from '../../src/shared/intent';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { freshDatabase, type FreshDatabase } from '../helpers/database';
import { createTestWorld, demoScript, demoStages, git, makeSampleRepo, testDatabaseUrl, waitFor, worktreeFoldersLeft, type TestWorld } from '../helpers/env';
import { groupAlive } from '../../src/activities/process';
import { Ledger } from '../../src/ledger/ledger';
import { answeringDesignStages } from '../../src/client/sample-repo';

const BIN = path.resolve(__dirname, '../../bin/warden.js');
const ROOT = path.resolve(__dirname, '../..');

// ---------------------------------------------------------------------------------------------
// Small helpers: spawned processes that are always cleaned up, and polling that survives errors.

interface SpawnedWorker {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly exited: Promise<void>;
  output(): string;
}

/** Every process this file spawned (workers) or learned of (agent groups), killed in afterAll. */
const spawned = new Set<SpawnedWorker>();
const agentGroups = new Set<number>();
const servers = new Set<DevServer>();

afterAll(async () => {
  for (const worker of spawned) {
    if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill('SIGKILL');
    await worker.exited;
  }
  for (const pid of agentGroups) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  for (const server of servers) await server.stop();
});

/** `node bin/warden.js worker` with `env`; resolves once it says it runs. */
async function spawnWorker(env: NodeJS.ProcessEnv): Promise<SpawnedWorker> {
  const child = spawn(process.execPath, [BIN, 'worker'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const worker: SpawnedWorker = { child, pid: child.pid!, exited, output: () => out };
  spawned.add(worker);
  await waitFor(() => {
    if (child.exitCode !== null) throw new Error(`worker ${child.pid} exited with ${child.exitCode}:\n${out}`);
    return out.includes('worker running against') ? true : undefined;
  }, 120_000, `worker ${child.pid} to start`);
  return worker;
}


/** Like waitFor, but an error (server away, query not answered yet) counts as "not yet". */
async function poll<T>(check: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  let last: unknown;
  const value = await waitFor(async () => {
    try {
      return await check();
    } catch (error) {
      last = error;
      return undefined;
    }
  }, timeoutMs, what).catch((error: Error) => {
    throw new Error(`${error.message}${last ? ` (last error: ${(last as Error).message})` : ''}`);
  });
  return value;
}

/** The unmistakable step of impl attempt 1: a sleep the test finds in the process table. */
const WORK = 'sleep 4.017';

/**
 * The agent running WORK under one of `workers`: that worker, and the process it spawned for
 * the agent (the leader of the agent's process group: a shell, or bwrap in a sandbox).
 */
function agentAt(workers: readonly number[]): { worker: number; leader: number; program: string } | undefined {
  const table = spawnSync('ps', ['-e', '-o', 'pid=,ppid=,args='], { encoding: 'utf8' }).stdout;
  const parent = new Map<number, number>();
  const program = new Map<number, string>();
  const sleeping: number[] = [];
  for (const line of table.split('\n')) {
    const m = /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(line);
    if (!m) continue;
    parent.set(Number(m[1]), Number(m[2]));
    program.set(Number(m[1]), m[3]!.split(' ')[0]!);
    if (m[3]!.trim() === WORK) sleeping.push(Number(m[1]));
  }
  for (let pid of sleeping) {
    for (let up = parent.get(pid); up !== undefined && up > 1; pid = up, up = parent.get(pid)) {
      if (workers.includes(up)) return { worker: up, leader: pid, program: program.get(pid) ?? '?' };
    }
  }
  return undefined;
}

function log(message: string): void {
  process.stdout.write(`[worker-faults] ${message}\n`);
}

// ---------------------------------------------------------------------------------------------

test('two workers, one dies: kill -9 of the worker running impl, the other one finishes the intent', async () => {
  const t0 = Date.now();
  const since = (): string => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
  const server = await startDevServer({ cliPath: process.env.WARDEN_TEST_CLI_PATH!, port: 0, uiPort: false });
  servers.add(server);
  const database: FreshDatabase = await freshDatabase(testDatabaseUrl());
  const connection = await Connection.connect({ address: server.address });
  try {
    const home = mkdtempSync(path.join(tmpdir(), 'warden-two-workers-'));
    chmodSync(home, 0o755);
    const config = path.join(home, 'warden.config.json');
    // The server is this test's own, reached from here only: its unsigned decisions may count
    // (the merge gate is decided below with a plain signal).
    writeFileSync(config, JSON.stringify({ limits: { cooldown: '0s' }, unsignedDecisions: { accept: 'always' } }));
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      TEMPORAL_ADDRESS: server.address,
      TEMPORAL_NAMESPACE: server.namespace,
      DATABASE_URL: database.url,
      WARDEN_HOME: home,
      WARDEN_CONFIG: config,
      WARDEN_LOG_LEVEL: 'warn',
    };
    // Both start at once; the first one to open the ledger migrates it.
    const workers = await Promise.all([spawnWorker(env), spawnWorker(env)]);
    log(`server ${server.address} and workers ${workers.map((w) => w.pid).join(', ')} up at ${since()}`);

    // The agent: impl attempt 1 works 4 s (a `sleep` the test can find), then writes the demo's
    // first (wrong) slugify; attempt 2 writes the right one; every other stage answers at once.
    // It touches nothing outside the worktree, so it runs the same in any sandbox level.
    const impl = demoStages().impl!;
    const content = (attempt: number): string => Buffer.from(String((impl[attempt]!.edits as Array<{ content: string }>)[0]!.content)).toString('base64');
    const command = [
      'prompt=$(cat)',
      'case "$prompt" in',
      `  "# Warden: impl (attempt 1)"*) ${WORK}; printf %s ${content(0)} | base64 -d > lib/strings.js; echo "added slugify" ;;`,
      `  "# Warden: impl"*) printf %s ${content(1)} | base64 -d > lib/strings.js; echo "slugify lower-cases now" ;;`,
      '  *) printf "%s\\n" "$prompt" | head -n 1 | sed "s/^# Warden: /done: /" ;;',
      'esac',
    ].join('\n');
    const agentCommand = answeringDesignStages(command);

    const repo = makeSampleRepo();
    const id = `two-workers-${Date.now()}`;
    const intent: IntentInput = { id, goal: 'Add slugify', repoPath: repo, paths: ['lib/**'], agent: { kind: 'command', command: agentCommand }, limits: { cooldown: '0s' } };
    const client = new Client({ connection, namespace: server.namespace });
    const handle = await startIntent(client, intent);

    // impl attempt 1 runs: find the worker that spawned its agent, and kill that worker hard.
    const first = await waitFor(() => agentAt(workers.map((w) => w.pid)), 120_000, 'impl to start');
    agentGroups.add(first.leader);
    const victim = workers.find((w) => w.pid === first.worker)!;
    const survivor = workers.find((w) => w.pid !== first.worker)!;
    victim.child.kill('SIGKILL');
    await victim.exited;
    const killedAt = Date.now();
    const after = (): string => `${((Date.now() - killedAt) / 1000).toFixed(1)} s after the kill`;
    log(`impl agent (group ${first.leader}, ${first.program}) ran under worker ${first.worker}; killed that worker with SIGKILL at ${since()}`);
    // Nobody is left to kill the dead worker's agent: inside bubblewrap --die-with-parent ends it;
    // a plain process group (sandbox none/process) lives on until its command ends by itself.
    await waitFor(() => (groupAlive(first.leader) ? undefined : true), 120_000, 'the dead worker\'s agent group to end');
    log(`dead worker's agent group ${first.leader} gone ${after()}`);

    // The survivor picks the activity up after the heartbeat timeout (10 s) and goes on. (The
    // waits in this file are hang guards: each condition holds within seconds, more when busy.)
    const retry = await waitFor(() => agentAt([survivor.pid]), 120_000, 'impl to be retried on the other worker');
    agentGroups.add(retry.leader);
    log(`impl attempt 1 retried on worker ${survivor.pid} (group ${retry.leader}) ${after()}`);

    await poll(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
    log(`at the merge gate at ${since()}`);
    await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
    const outcome = await handle.result();
    log(`merged at ${since()}`);
    expect(outcome.status).toBe('merged');
    expect(survivor.child.exitCode).toBeNull(); // still running
    expect(victim.child.signalCode).toBe('SIGKILL');

    // git: one merge, each stage attempt committed once (below the lineage ref), no worktree left
    expect(git(repo, 'rev-parse', 'main')).toBe(outcome.mergedCommit);
    expect(git(repo, 'log', '--merges', '--format=%H', 'main').split('\n').filter(Boolean)).toEqual([outcome.mergedCommit]);
    const subjects = git(repo, 'log', '--format=%s', `refs/warden/lineage/${id}`).split('\n');
    const stageCommits = subjects.filter((s) => new RegExp(`^warden\\(${id}\\): [a-z]+ attempt \\d+$`).test(s));
    expect([...stageCommits].sort()).toEqual(
      ['triage', 'lld', 'spec', 'impl', 'impl', 'review'].map((s, i) => `warden(${id}): ${s} attempt ${i === 4 ? 2 : 1}`).sort(),
    );
    expect(new Set(stageCommits).size).toBe(stageCommits.length);
    expect(git(repo, 'worktree', 'list').split('\n')).toHaveLength(1);
    const worktrees = path.join(home, 'worktrees');
    expect(worktreeFoldersLeft(worktrees)).toEqual([]);

    // the ledger: every event of a merged intent, each once
    const { rows: events } = await database.pool.query<{ id: string; event_type: string }>('SELECT id, event_type FROM safety_events WHERE intent_id = $1', [id]);
    const count = (type: string): number => events.filter((e) => e.event_type === type).length;
    expect(count('INTENT_STARTED')).toBe(1);
    expect(count('STAGE_COMPLETED')).toBe(stageCommits.length);
    expect(count('STAGE_COMPLETED')).toBeGreaterThanOrEqual(6);
    expect(count('GATE_REQUESTED')).toBe(1);
    expect(count('GATE_DECIDED')).toBe(1);
    expect(count('INTENT_MERGED')).toBe(1);
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
    // the killed attempt never answered, so it costs nothing: one cost row per finished attempt
    const { rows: costs } = await database.pool.query<{ stage: string; attempt: number }>('SELECT stage, attempt FROM cost_events WHERE intent_id = $1 ORDER BY timestamp', [id]);
    expect(costs.map((c) => `${c.stage}#${c.attempt}`)).toEqual(['triage#1', 'lld#1', 'spec#1', 'impl#1', 'impl#2', 'review#1']);
    // the books: what the budget tables settled is what cost_events count, to the cent
    const [books] = await new Ledger(database.pool).budget.books({ intentId: id });
    expect(books!.budgetUsd).toBe(books!.costEventsUsd);
    log(`ledger: ${events.length} safety events (${[...new Set(events.map((e) => e.event_type))].join(', ')})`);

    expect(groupAlive(first.leader)).toBe(false);
    expect(groupAlive(retry.leader)).toBe(false);
  } catch (error) {
    for (const worker of spawned) log(`worker ${worker.pid} output:\n${worker.output()}`);
    throw error;
  } finally {
    await connection.close();
    await database.drop();
  }
});

test('dev server restart mid-run: the server goes away during lld, comes back on the same db file, the intent completes', async () => {
  const t0 = Date.now();
  const since = (): string => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
  const dir = mkdtempSync(path.join(tmpdir(), 'warden-restart-'));
  const dbFile = path.join(dir, 'temporal.db');
  const port = await findFreePort();
  const options = { cliPath: process.env.WARDEN_TEST_CLI_PATH!, port, uiPort: false as const, dbFile, logFile: path.join(dir, 'server.log') };
  let server = await startDevServer(options);
  servers.add(server);
  let world: TestWorld | undefined;
  let worker: WardenWorker | undefined;
  let running: Promise<void> | undefined;
  let workerError: unknown;
  try {
    world = await createTestWorld('restart', server.address);
    const lldStarts: number[] = [];
    const lldEnds: number[] = [];
    worker = await world.worker({
      wrap: (activities: WardenActivities) => ({
        ...activities,
        async runAgentStage(input) {
          if (input.stage !== 'lld') return activities.runAgentStage(input);
          lldStarts.push(Date.now());
          try {
            return await activities.runAgentStage(input);
          } finally {
            lldEnds.push(Date.now());
          }
        },
      }),
    });
    running = worker.run().catch((error: unknown) => {
      workerError = error;
    });
    log(`server ${server.address} (pid ${server.pid}) and in-process worker up at ${since()}`);

    const repo = makeSampleRepo();
    const id = `restart-${Date.now()}`;
    const script = demoScript({ lld: [{ ...demoStages().lld![0]!, delayMs: 4000 }] });
    const handle = await startIntent(
      world.client,
      { id, goal: 'Add slugify', repoPath: repo, paths: ['lib/**'], agent: { kind: 'scripted', scriptPath: script }, limits: { cooldown: '0s' } },
      world.taskQueue,
    );
    const { runId } = await handle.describe();

    await waitFor(() => (lldStarts.length > 0 ? true : undefined), 120_000, 'lld to start');
    await new Promise((r) => setTimeout(r, 1000));
    const firstPid = server.pid;
    const downAt = Date.now();
    await server.stop();
    log(`server stopped while lld ran, at ${since()}`);
    // lld finishes its 4 s while nobody listens: its completion has to wait for the server
    await waitFor(() => (lldEnds.length > 0 ? true : undefined), 120_000, 'lld to finish');
    log(`lld returned in the worker with the server down, at ${since()}`);
    server = await startDevServer(options);
    servers.add(server);
    log(`server back (pid ${server.pid}) after ${((Date.now() - downAt) / 1000).toFixed(1)} s down, at ${since()}`);
    expect(server.pid).not.toBe(firstPid);

    await poll(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 180_000, 'the merge gate');
    log(`at the merge gate at ${since()}`);
    await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
    const outcome = await handle.result();
    log(`merged at ${since()}; lld ran ${lldStarts.length} time(s)`);
    expect(outcome.status).toBe('merged');
    expect(workerError).toBeUndefined();
    expect((await handle.describe()).runId).toBe(runId); // the same run went on
    const history = await handle.fetchHistory();
    const lldScheduled = history.events!.find((e) => {
      const scheduled = e.activityTaskScheduledEventAttributes;
      const data = scheduled?.input?.payloads?.[0]?.data;
      return scheduled?.activityType?.name === 'runAgentStage' && data !== undefined && data !== null && Buffer.from(data).toString().includes('"stage":"lld"');
    });
    const lldStarted = history.events!.find((e) => String(e.activityTaskStartedEventAttributes?.scheduledEventId) === String(lldScheduled?.eventId));
    log(`lld activity: started attempt ${lldStarted?.activityTaskStartedEventAttributes?.attempt}; ${history.events!.length} history events`);

    expect(git(repo, 'rev-parse', 'main')).toBe(outcome.mergedCommit);
    expect(git(repo, 'log', '--merges', '--format=%H', 'main').split('\n').filter(Boolean)).toEqual([outcome.mergedCommit]);
    const subjects = git(repo, 'log', '--format=%s', `refs/warden/lineage/${id}`).split('\n');
    expect(subjects.filter((s) => s === `warden(${id}): lld attempt 1`)).toHaveLength(1);
    const stageCommits = subjects.filter((s) => s.startsWith(`warden(${id}): `) && / attempt \d+$/.test(s));
    expect(new Set(stageCommits).size).toBe(stageCommits.length);
    expect(git(repo, 'worktree', 'list').split('\n')).toHaveLength(1);
    // the books: lld's call, settled while the server was away, is counted once in both tables
    const [books] = await world.ledger.budget.books({ intentId: id });
    expect(books).toMatchObject({ budgetUsd: books!.costEventsUsd, openReservations: 0 });
  } finally {
    if (worker && worker.getState() === 'RUNNING') worker.shutdown();
    await running;
    await world?.close();
    await server.stop();
  }
});
