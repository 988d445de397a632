/**
 * Chaos on one machine: intents run to the end while their worker is killed, their server
 * restarted, their database stopped and their signals fuzzed. A bench script to run by hand,
 * not a timed test:
 *
 *   npm run chaos:local [-- --intents 20] [--seed N] [--timeout 1200]
 *
 * Everything is its own: a Temporal dev server on a file (so it can restart), the embedded
 * PostgreSQL in a temp Warden home (this script starts it, so it can stop it), a worker in a
 * separate process (`warden worker`, so it can be killed), one sample repository per intent.
 * Each intent's agent answers the design stages at once, writes a change in impl and sleeps,
 * and its tests sleep too, so that the kills land during agent calls and test runs. This script
 * approves every gate an intent waits at, with a signed decision.
 *
 * While they run, with times drawn from the printed seed: SIGKILL to the worker 3 times (during
 * an agent call, during a test run, then whenever), each time starting a new one 2 s later; the
 * Temporal server stopped and started once; PostgreSQL stopped for 30 s once; and 100 fuzzed
 * `decide` signals (JSON of any shape, and undecodable payloads) to random intents.
 *
 * At the end it prints intents merged / failed (with why) / still running, workflow tasks that
 * failed, processes left, worktrees left, the books' difference in cents, and duplicate merges;
 * then one JSON line, also written to bench/results/chaos-local.json.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { initApproverKey } from '../src/client/approver-keys';
import { sendDecision } from '../src/client/intents';
import { answeringDesignStages, createSampleRepo } from '../src/client/sample-repo';
import { openDatabase } from '../src/ledger/database';
import { startEmbeddedPostgres } from '../src/ledger/embedded-server';
import { booksDifferenceCents, Ledger } from '../src/ledger/ledger';
import { startDevServer, type DevServer } from '../src/runtime/dev-server';
import { ensureTemporalCli } from '../src/runtime/temporal-cli';
import { workflowIdForIntent } from '../src/shared/ids';
import { stateQuery } from '../src/shared/messages';
import { findFreePort } from '../src/shared/ports';
import { endProgress, out, progress, runBenchmark, secs, sized, sleep } from './console';

const REPO_ROOT = path.resolve(__dirname, '..');
const BIN = path.join(REPO_ROOT, 'bin', 'warden.js');
const RESULT_FILE = path.join(REPO_ROOT, 'bench', 'results', 'chaos-local.json');
/** The server's own force-close under a flood of events (flow control, not a failure of the workflow). */
const WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND = 17;

const { values: flags } = parseArgs({
  options: {
    intents: { type: 'string' },
    smoke: { type: 'boolean', default: false },
    seed: { type: 'string' },
    timeout: { type: 'string', default: '1200' },
    help: { type: 'boolean', default: false },
  },
});
if (flags.help) {
  out('usage: npm run chaos:local [-- --intents N (20; 2 with --smoke)] [--smoke] [--seed N (random)] [--timeout SECONDS (1200)]');
  process.exit(0);
}
const N = sized(flags.intents, flags.smoke, 20, 2);
/** The chaos's pauses: a tenth as long in a smoke run, which shows the run works, not that Warden holds. */
const paced = (ms: number): number => Math.round(flags.smoke ? ms / 10 : ms);
const SEED = flags.seed !== undefined ? Number(flags.seed) : randomBytes(4).readUInt32BE(0);
const TIMEOUT_MS = Number(flags.timeout) * 1000;
if (!Number.isInteger(N) || N < 1) throw new Error(`--intents must be a positive whole number, not ${flags.intents}`);
if (!Number.isInteger(SEED) || SEED < 0) throw new Error(`--seed must be a whole number, not ${flags.seed}`);

/** mulberry32: a small seeded generator, so a run can be told again from its seed. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}
const random = seeded(SEED);
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;

/** Live processes whose command line holds `tag` (zombies left out). */
function processesWith(tag: string): number {
  let count = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue;
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(tag)) count++;
    } catch {
      // gone
    }
  }
  return count;
}

/** A fuzzed decide payload: any JSON, or something shaped like a decision with junk in it. */
function fuzzedDecision(): unknown {
  const junk = (): unknown => pick<() => unknown>([() => '', () => 'a'.repeat(Math.floor(random() * 3000)), () => Math.floor(random() * 1e9), () => null, () => [1, 'x', {}], () => ({ deep: { deeper: [random()] } }), () => '\u0000\ud800'])();
  return pick<() => unknown>([
    () => junk(),
    () => ({ gate: pick(['merge', 'lld', 'nope', junk()]), decision: pick(['approve', 'reject', junk()]), by: pick(['mallory', junk()]) }),
    () => ({ gate: 'merge', decision: 'approve', by: 'approver', proof: { nonce: junk(), signature: 'ff'.repeat(64), signedAt: new Date().toISOString() } }),
  ])();
}

async function main(): Promise<number> {
  const cliPath = await ensureTemporalCli({ wardenHome: path.join(REPO_ROOT, '.warden'), env: process.env });
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'warden-chaos-'));
  const home = path.join(tmp, 'home');
  const keys = path.join(home, 'approver-keys');
  mkdirSync(home, { recursive: true });
  const approver = initApproverKey(keys, 'approver');
  const config = path.join(home, 'warden.config.json');
  writeFileSync(config, JSON.stringify({ limits: { cooldown: '0s' }, approvers: { approver: { publicKey: approver.publicKey } } }));
  const temporalPort = await findFreePort();
  const dbFile = path.join(tmp, 'temporal.db');
  const startServer = () => startDevServer({ cliPath, port: temporalPort, uiPort: false, dbFile, logFile: path.join(tmp, 'temporal.log') });
  let server: DevServer = await startServer();
  // This script starts the embedded PostgreSQL, so it owns it and may stop and start it.
  const database = await openDatabase({ dataDir: path.join(home, 'postgres'), port: 0 });
  const env: NodeJS.ProcessEnv = { ...process.env, WARDEN_HOME: home, WARDEN_CONFIG: config, WARDEN_APPROVER_KEYS: keys, TEMPORAL_ADDRESS: server.address, WARDEN_LOG_LEVEL: 'warn', USER: 'approver' };
  delete env.DATABASE_URL;
  const workerLog = path.join(tmp, 'worker.log');
  // Like a service manager: a worker that exits by itself (it cannot reach a server that is being
  // restarted, say) is started again a second later. A SIGKILL from the chaos is restarted by the chaos.
  let stopping = false;
  const startWorker = (): ChildProcess => {
    const child = spawn(process.execPath, [BIN, 'worker'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr?.on('data', (d: Buffer) => writeFileSync(workerLog, d, { flag: 'a' }));
    child.once('exit', (code) => {
      if (stopping || code === null || child !== worker) return;
      note(`the worker exited (${code}) by itself: started again`);
      setTimeout(() => {
        if (!stopping && child === worker) worker = startWorker();
      }, 1_000);
    });
    return child;
  };
  let worker = startWorker();
  const connection = await Connection.connect({ address: server.address });
  const client = new Client({ connection, namespace: server.namespace });
  const log: string[] = [];
  const note = (line: string) => {
    log.push(line);
    endProgress();
    out(`  ${line}`);
  };
  out(`chaos-local: ${N} intents, seed ${SEED} (again: npm run chaos:local -- --seed ${SEED} --intents ${N}); files in ${tmp}`);

  try {
    const began = Date.now();
    let closed = 0;
    const ids: string[] = [];
    const repos = new Map<string, string>();
    let fuzzed = 0;
    const approving = approveAll();
    const chaos = makeChaos();
    const fuzzing = fuzz();
    // The intents: started like a user would, through the CLI (the chaos has begun already).
    for (let i = 0; i < N; i++) {
      const id = `chaos-${SEED}-${i}`;
      const repo = createSampleRepo(path.join(tmp, 'repos', `r${i}`));
      const impl = `echo "change ${i}" >> chaos.txt; bash -c "exec -a chaos-agent-\\$((40+2)) sleep ${15 + Math.floor(random() * 30)}"`;
      const tests = `bash -c "exec -a chaos-tests-\\$((40+2)) sleep ${10 + Math.floor(random() * 20)}"`;
      const started = spawnSync(process.execPath, [BIN, 'run', '--repo', repo, '--goal', `chaos ${i}`, '--id', id, '--agent', 'command', '--cmd', answeringDesignStages(`if grep -q '^# Warden: impl'; then ${impl}; else echo ok; fi`), '--test-cmd', tests, '--detach'], { env, encoding: 'utf8' });
      if (started.status !== 0) throw new Error(`warden run failed for ${id}: ${started.stderr}`);
      ids.push(id);
      repos.set(id, repo);
      progress(`started ${i + 1}/${N} intents`);
    }
    endProgress();

    // The approver: every gate an intent waits at is approved, signed.
    async function approveAll(): Promise<void> {
      while (closed < N && Date.now() - began < TIMEOUT_MS) {
        for (const id of ids) {
          const state = await client.workflow.getHandle(workflowIdForIntent(id)).query(stateQuery).catch(() => undefined);
          if (!state?.pendingGate) continue;
          await sendDecision(client, id, { gate: state.pendingGate.gate, decision: 'approve', by: 'approver', reason: 'chaos run' }, { keysDir: keys }).catch(() => undefined);
        }
        await sleep(2_000);
      }
    }

    // The chaos, in order, at seeded moments.
    async function makeChaos(): Promise<void> {
      const killWorker = async (during: 'agent' | 'tests' | 'any') => {
        const tag = during === 'any' ? 'chaos-' : `chaos-${during}-42`;
        const deadline = Date.now() + paced(120_000);
        while (processesWith(tag) === 0 && Date.now() < deadline) await sleep(paced(200));
        const running = { agents: processesWith('chaos-agent-42'), tests: processesWith('chaos-tests-42') };
        worker.kill('SIGKILL');
        await new Promise((resolve) => worker.once('close', resolve));
        note(`SIGKILL to the worker (${running.agents} agent and ${running.tests} test processes running)`);
        await sleep(paced(2_000));
        note(`${paced(2_000) / 1000} s later: ${processesWith('chaos-agent-42') + processesWith('chaos-tests-42')} of their processes alive; worker started again`);
        worker = startWorker();
      };
      await sleep(paced(5_000 + random() * 10_000));
      await killWorker('agent');
      await sleep(paced(10_000 + random() * 10_000));
      await killWorker('tests');
      await sleep(paced(10_000 + random() * 10_000));
      await server.stop();
      note('Temporal server stopped');
      await sleep(paced(3_000));
      server = await startServer();
      note('Temporal server started again');
      await sleep(paced(10_000 + random() * 10_000));
      const pg = database.server!;
      process.kill(pg.pid, 'SIGINT');
      note(`PostgreSQL stopped (pid ${pg.pid}) for ${paced(30_000) / 1000} s`);
      await sleep(paced(30_000));
      // The worker owns the embedded server too, and may have started it again first (on a port
      // of its choosing, so the data folder's lock is what tells).
      const restarted = await startEmbeddedPostgres({ dataDir: path.join(home, 'postgres'), port: pg.port }).then(
        () => 'PostgreSQL started again',
        (error: unknown) => {
          if (String(error).includes('"postmaster.pid" already exists')) return 'PostgreSQL was started again by the worker';
          throw error;
        },
      );
      note(restarted);
      await sleep(paced(5_000 + random() * 10_000));
      await killWorker('any');
    }

    // 100 fuzzed signals at random moments over the first minutes.
    async function fuzz(): Promise<void> {
      for (let i = 0; i < 100; i++) {
        await sleep(random() * 1_500);
        if (ids.length === 0) continue;
        const workflowId = workflowIdForIntent(pick(ids));
        const sent = random() < 0.7
          ? client.workflow.getHandle(workflowId).signal('decide', fuzzedDecision())
          : client.workflowService.signalWorkflowExecution({
              namespace: server.namespace,
              workflowExecution: { workflowId },
              signalName: 'decide',
              identity: 'chaos',
              requestId: randomBytes(16).toString('hex'),
              input: { payloads: [{ metadata: { encoding: new TextEncoder().encode(pick(['json/plain', 'binary/plain', 'json/protobuf', 'nonsense'])) }, data: randomBytes(Math.floor(random() * 64)) }] },
            });
        if (await sent.then(() => true, () => false)) fuzzed++;
      }
    }

    // Until every intent has closed (or the time is up).
    const statuses = new Map<string, string>();
    while (Date.now() - began < TIMEOUT_MS) {
      for (const id of ids) {
        if (statuses.has(id)) continue;
        const description = await client.workflow.getHandle(workflowIdForIntent(id)).describe().catch(() => undefined);
        if (description && description.status.name !== 'RUNNING') statuses.set(id, description.status.name);
      }
      closed = statuses.size;
      progress(`${secs(Date.now() - began)}: ${closed}/${N} intents closed, ${fuzzed} fuzzed signals sent`);
      if (closed === N) break;
      await sleep(2_000);
    }
    endProgress();
    await Promise.all([chaos, fuzzing, approving]);

    // The tally.
    const outcomes = { merged: 0, failed: [] as string[], running: 0 };
    let workflowTaskFailures = 0;
    let wedged = 0;
    for (const id of ids) {
      const handle = client.workflow.getHandle(workflowIdForIntent(id));
      const history = await handle.fetchHistory();
      const events = history.events ?? [];
      const failures = events.filter((e) => e.workflowTaskFailedEventAttributes && e.workflowTaskFailedEventAttributes.cause !== WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND);
      workflowTaskFailures += failures.length;
      const status = statuses.get(id);
      if (!status) {
        outcomes.running++;
        if (events.at(-1)?.workflowTaskFailedEventAttributes) wedged++;
        continue;
      }
      const result = await handle.result().then(
        (r: { status?: string; reason?: string }) => r,
        (error: Error) => ({ status: 'failed', reason: (error.cause as Error | undefined)?.message ?? error.message }),
      );
      if (result.status === 'merged') outcomes.merged++;
      else outcomes.failed.push(`${id}: ${result.status}${result.reason ? ` (${result.reason.slice(0, 160)})` : ''}`);
    }
    // A moment for the worker's own cleanup, then what is left on the machine.
    await sleep(3_000);
    const processesLeft = processesWith('chaos-agent-42') + processesWith('chaos-tests-42');
    const worktreeRoot = path.join(home, 'worktrees');
    const worktreesLeft = existsSync(worktreeRoot)
      ? readdirSync(worktreeRoot).filter((d) => d !== '.trash').flatMap((d) => readdirSync(path.join(worktreeRoot, d))).length
      : 0;
    // Reservations of killed attempts are released within a minute of their attempt ending.
    const deadline = Date.now() + 150_000;
    // Read where the home's server is now: the worker may have started it again on another port.
    const now = await openDatabase({ dataDir: path.join(home, 'postgres'), port: 0, migrate: false });
    const ledger = new Ledger(now.pool);
    let books = await ledger.books();
    while (books.some((b) => b.openReservations > 0) && Date.now() < deadline) {
      progress(`waiting for ${books.reduce((s, b) => s + b.openReservations, 0)} open reservation(s) to be reconciled`);
      await sleep(5_000);
      books = await ledger.books();
    }
    await now.close();
    endProgress();
    const differenceCents = booksDifferenceCents(books);
    const openReservations = books.reduce((sum, b) => sum + b.openReservations, 0);
    let duplicateMerges = 0;
    for (const repo of repos.values()) {
      const merges = spawnSync('git', ['-C', repo, 'rev-list', '--merges', '--count', 'main'], { encoding: 'utf8' }).stdout.trim();
      duplicateMerges += Math.max(0, Number(merges) - 1);
    }

    const result = {
      seed: SEED,
      intents: N,
      merged: outcomes.merged,
      failed: outcomes.failed.length,
      running: outcomes.running,
      workflowTaskFailures,
      wedged,
      processesLeft,
      worktreesLeft,
      booksDifferenceCents: differenceCents,
      openReservations,
      duplicateMerges,
      fuzzedSignals: fuzzed,
      seconds: Math.round((Date.now() - began) / 1000),
      chaos: log,
    };
    out('');
    out(`intents merged / failed / still running   ${outcomes.merged} / ${outcomes.failed.length} / ${outcomes.running}`);
    for (const failure of outcomes.failed) out(`  failed: ${failure}`);
    out(`workflow tasks failed (wedged workflows)    ${workflowTaskFailures} (${wedged})`);
    out(`processes left                              ${processesLeft}`);
    out(`worktrees left                              ${worktreesLeft}`);
    out(`books difference                            ${differenceCents} cent(s); ${openReservations} reservation(s) still open`);
    out(`duplicate merges                            ${duplicateMerges}`);
    out(`time                                        ${result.seconds} s`);
    out(JSON.stringify(result));
    mkdirSync(path.dirname(RESULT_FILE), { recursive: true });
    writeFileSync(RESULT_FILE, `${JSON.stringify(result, null, 2)}\n`);
    const clean = outcomes.running === 0 && wedged === 0 && processesLeft === 0 && worktreesLeft === 0 && differenceCents === 0 && duplicateMerges === 0;
    return clean ? 0 : 1;
  } finally {
    stopping = true;
    worker.kill('SIGTERM');
    await new Promise((resolve) => (worker.exitCode !== null || worker.signalCode !== null ? resolve(undefined) : worker.once('close', resolve)));
    await connection.close().catch(() => undefined);
    await database.close().catch(() => undefined);
    await server.stop().catch(() => undefined);
  }
}

runBenchmark('chaos-local', main);
