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
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { initApproverKey } from '../src/client/approver-keys';
import { openDatabase } from '../src/ledger/database';
import { startEmbeddedPostgres } from '../src/ledger/embedded-server';
import { startDevServer, type DevServer } from '../src/runtime/dev-server';
import { ensureTemporalCli } from '../src/runtime/temporal-cli';
import { workflowIdForIntent } from '../src/shared/ids';
import { findFreePort } from '../src/shared/ports';
import {
  AGENT_TAG,
  approveAll,
  BIN,
  chaosFlags,
  chaosLog,
  chaosProcessesLeft,
  duplicateMerges,
  killHard,
  printOutcomes,
  processesWith,
  REPO_ROOT,
  seeded,
  settledBooks,
  startChaosIntents,
  tallyOutcomes,
  TESTS_TAG,
  waitForClosed,
  waitForWork,
  worktreesLeft,
  writeChaosResult,
  type ChaosIntent,
} from './chaos/common';
import { out, runBenchmark, sleep } from './console';

const flags = chaosFlags({ usage: 'usage: npm run chaos:local [-- --intents N (20; 2 with --smoke)] [--smoke] [--seed N (random)] [--timeout SECONDS (1200)]', full: 20, small: 2, timeoutSeconds: 1200 });
const { intents: N, seed: SEED, timeoutMs: TIMEOUT_MS, paced } = flags;

const random = seeded(SEED);
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;

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
  const { lines: log, note } = chaosLog();
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
  out(`chaos-local: ${N} intents, seed ${SEED} (again: npm run chaos:local -- --seed ${SEED} --intents ${N}); files in ${tmp}`);

  try {
    const began = Date.now();
    let closed = false;
    const intents: ChaosIntent[] = [];
    let fuzzed = 0;
    const approving = approveAll(() => client, intents, keys, () => closed || Date.now() - began >= TIMEOUT_MS);
    const chaos = makeChaos();
    const fuzzing = fuzz();
    // The intents: started like a user would, through the CLI (the chaos has begun already).
    startChaosIntents({ count: N, prefix: `chaos-${SEED}`, reposDir: path.join(tmp, 'repos'), env, random, started: intents });

    // The chaos, in order, at seeded moments.
    async function makeChaos(): Promise<void> {
      const killWorker = async (during: 'agent' | 'tests' | 'any') => {
        await waitForWork(paced(120_000), during);
        const running = { agents: processesWith(AGENT_TAG), tests: processesWith(TESTS_TAG) };
        await killHard(worker);
        note(`SIGKILL to the worker (${running.agents} agent and ${running.tests} test processes running)`);
        await sleep(paced(2_000));
        note(`${paced(2_000) / 1000} s later: ${chaosProcessesLeft()} of their processes alive; worker started again`);
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
        if (intents.length === 0) continue;
        const workflowId = workflowIdForIntent(pick(intents).id);
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
    const statuses = await waitForClosed(() => client, intents, { began, timeoutMs: TIMEOUT_MS, count: N, status: () => `${fuzzed} fuzzed signals sent` });
    closed = true;
    await Promise.all([chaos, fuzzing, approving]);

    // The tally.
    const outcomes = await tallyOutcomes(client, intents, statuses);
    // A moment for the worker's own cleanup, then what is left on the machine.
    await sleep(3_000);
    const processesLeft = chaosProcessesLeft();
    const worktrees = worktreesLeft(path.join(home, 'worktrees'));
    // Read where the home's server is now: the worker may have started it again on another port.
    const now = await openDatabase({ dataDir: path.join(home, 'postgres'), port: 0, migrate: false });
    const books = await settledBooks(now.pool).finally(() => now.close());
    const duplicates = duplicateMerges(intents.map((i) => i.repo));

    const result = {
      seed: SEED,
      intents: N,
      merged: outcomes.merged,
      failed: outcomes.failed.length,
      running: outcomes.running,
      workflowTaskFailures: outcomes.workflowTaskFailures,
      wedged: outcomes.wedged,
      processesLeft,
      worktreesLeft: worktrees,
      booksDifferenceCents: books.differenceCents,
      openReservations: books.openReservations,
      duplicateMerges: duplicates,
      fuzzedSignals: fuzzed,
      seconds: Math.round((Date.now() - began) / 1000),
      chaos: log,
    };
    printOutcomes(outcomes);
    out(`processes left                              ${processesLeft}`);
    out(`worktrees left                              ${worktrees}`);
    out(`books difference                            ${books.differenceCents} cent(s); ${books.openReservations} reservation(s) still open`);
    out(`duplicate merges                            ${duplicates}`);
    out(`time                                        ${result.seconds} s`);
    out(JSON.stringify(result));
    writeChaosResult('chaos-local', result);
    const clean = outcomes.running === 0 && outcomes.wedged === 0 && processesLeft === 0 && worktrees === 0 && books.differenceCents === 0 && duplicates === 0;
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
