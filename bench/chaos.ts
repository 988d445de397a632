/**
 * Chaos on the real Temporal server with two worker hosts. A bench script to run by hand, not a
 * timed test:
 *
 *   npm run chaos [-- --intents 50] [--seed N] [--timeout 2400] [--shared-home] [--smoke]
 *
 * Everything is its own: an embedded PostgreSQL in a temp folder holding both the ledger and the
 * Temporal server's databases; the real Temporal server (built once into the Warden home, see
 * src/runtime/temporal-server-install.ts) on free ports; two `warden worker` processes, the two
 * "hosts", on the same server and ledger; one sample repository per intent. The intents are
 * those of chaos:local (bench/chaos/common.ts): agents and test runs that sleep, so that kills
 * land in them; every gate is approved with a signed decision.
 *
 * Each host has a Warden home of its own (`--host host-a`, `--host host-b`): no shared disk. Each
 * intent's repository gets a bare `origin`, and the config's `placement` has the workers work from
 * their own clones of it and merge into it; one host vanishes (is killed and not started again)
 * and its intents move to the other. With `--shared-home` the two workers share one home (one
 * host, the repositories' own paths, no placement) and none vanishes.
 *
 * While they run, in an order and at moments drawn from the printed seed: SIGKILL to a worker five
 * times (a new one starts 2 s later), the Temporal server restarted once, PostgreSQL stopped for
 * 30 s once (the one PostgreSQL: the server's databases and the ledger), and the vanishing host.
 *
 * At the end: intents merged / failed (why) / still running; duplicate merges; ledger rows lost or
 * doubled against the workflows' histories (bench/chaos/ledger-vs-history.ts); worktrees, intent
 * branches and processes left (what an intent that moved left on the live host it moved from,
 * for that host's sweep, counted apart, as the vanished host's disk is); the books' difference; the highest rate of activity starts over a
 * sliding second (from the histories' ActivityTaskStarted times, all task queues) against
 * `worker.rateLimits.globalActivitiesPerSecond`. Then one JSON line, also written to
 * bench/results/chaos.json. Exit 1 unless every figure that must be 0 is.
 *
 * --smoke: 4 intents, one kill, no server restart, no PostgreSQL stop, no vanishing host, pauses a
 * tenth as long. The server must be built: the smoke builds it (or waits for the build .ci/run
 * started) and fails, never passes, when it cannot.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import pg from 'pg';
import { initApproverKey } from '../src/client/approver-keys';
import { quietSdkRuntime } from '../src/client/in-process-worker';
import { openDatabase, startEmbeddedPostgres, type EmbeddedPostgres } from '../src/ledger/database';
import { isAlive } from '../src/shared/build-lock';
import { branchForIntent, workBranchFor, workflowIdForIntent } from '../src/shared/ids';
import { startPrivateCluster, TEMPORAL_DATABASES, type TemporalDatabaseSettings } from '../src/runtime/temporal-cluster';
import { ensureTemporalServer } from '../src/runtime/temporal-server-install';
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
  seeded,
  settledBooks,
  startChaosIntents,
  stopGently,
  tallyOutcomes,
  TESTS_TAG,
  waitForClosed,
  waitForWork,
  worktreesLeft,
  writeChaosResult,
  type ChaosIntent,
} from './chaos/common';
import { activityStarts, highestRates, type ActivityStart } from './chaos/activity-rate';
import { ledgerAgainstHistory } from './chaos/ledger-vs-history';
import { endProgress, out, progress, runBenchmark, sleep } from './console';

const flags = chaosFlags({
  usage: 'usage: npm run chaos [-- --intents N (50; 4 with --smoke)] [--smoke] [--seed N (random)] [--timeout SECONDS (2400)] [--shared-home]',
  full: 50,
  small: 4,
  timeoutSeconds: 2400,
  switches: ['shared-home'],
});
const { intents: N, seed: SEED, timeoutMs: TIMEOUT_MS, paced } = flags;
const SEPARATE = flags.switches['shared-home'] !== true;

/** The rate the workers are configured with: low enough that 50 intents press against it. */
const GLOBAL_ACTIVITIES_PER_SECOND = 10;
/** How long a vanished host's intents wait before another host takes them. */
const MOVE_AFTER = '30s';
const KILLS = flags.smoke ? 1 : 5;

const random = seeded(SEED);

type Step = 'kill' | 'server' | 'postgres' | 'vanish';

/** The chaos's steps in a seeded order (Fisher–Yates). */
function chaosSteps(): Step[] {
  const steps: Step[] = [...Array<Step>(KILLS).fill('kill'), ...(flags.smoke ? [] : (['server', 'postgres'] as Step[])), ...(SEPARATE && !flags.smoke ? (['vanish'] as Step[]) : [])];
  for (let i = steps.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [steps[i], steps[j]] = [steps[j]!, steps[i]!];
  }
  return steps;
}

/** A worker host: its own process and (unless --shared-home) its own Warden home. */
interface Host {
  readonly name: string;
  readonly home: string;
  readonly env: NodeJS.ProcessEnv;
  readonly log: string;
  worker: ChildProcess;
  vanished: boolean;
}

/**
 * Branches of the given intents left in the git folders: `warden/<id>` (the intent's branch) and
 * `warden-work/<id>` (what a host pushed for another to take over), both deleted as an intent ends.
 */
function intentBranchesLeft(gitDirs: readonly string[], intentIds: readonly string[]): number {
  const wanted = new Set(intentIds.flatMap((id) => [`refs/heads/${branchForIntent(id)}`, `refs/heads/${workBranchFor(id)}`]));
  let left = 0;
  for (const dir of gitDirs) {
    const refs = spawnSync('git', ['-C', dir, 'for-each-ref', '--format=%(refname)', 'refs/heads/'], { encoding: 'utf8' }).stdout.split('\n');
    left += refs.filter((ref) => wanted.has(ref)).length;
  }
  return left;
}

/** The bare clones a host made of the intents' remotes (placement), under its home. */
/** Worktrees under `worktreeRoot` (`<repository>/<intent id>`) of the given intents. */
function worktreesOfIntents(worktreeRoot: string, intentIds: readonly string[]): number {
  if (!existsSync(worktreeRoot) || intentIds.length === 0) return 0;
  return readdirSync(worktreeRoot)
    .filter((d) => d !== '.trash')
    .flatMap((d) => readdirSync(path.join(worktreeRoot, d)))
    .filter((name) => intentIds.includes(name)).length;
}

function hostClones(home: string): string[] {
  const root = path.join(home, 'clones');
  return existsSync(root) ? readdirSync(root).filter((name) => name.endsWith('.git')).map((name) => path.join(root, name)) : [];
}

async function main(): Promise<number> {
  const say = (message: string) => {
    endProgress();
    out(`[server] ${message}`);
  };
  quietSdkRuntime(); // the replay at the end runs an SDK worker: its warnings only
  const install = await ensureTemporalServer({ log: say });
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'warden-chaos-real-'));
  chmodSync(tmp, 0o755); // the embedded PostgreSQL may run as another user
  const { lines: log, note } = chaosLog();

  // One PostgreSQL for the ledger and the Temporal server's databases, started here so that this
  // script may stop it (the workers reach it through DATABASE_URL and never start it themselves).
  const pgDir = path.join(tmp, 'postgres');
  let postgres: EmbeddedPostgres = await startEmbeddedPostgres({ dataDir: pgDir, port: 0 });
  const pgPort = postgres.port;
  const admin = new pg.Client({ connectionString: postgres.url });
  await admin.connect();
  await admin.query('CREATE DATABASE warden');
  await admin.end();
  const ledgerUrl = Object.assign(new URL(postgres.url), { pathname: '/warden' }).toString();
  const database = await openDatabase({ databaseUrl: ledgerUrl, dataDir: pgDir });
  const db: TemporalDatabaseSettings = { adminUrl: postgres.url, user: 'temporal', password: randomBytes(12).toString('hex'), ...TEMPORAL_DATABASES };
  // Quiet after the start: a restart's namespace check says nothing new.
  let serverLog = say;
  const cluster = await startPrivateCluster({ install, db, dir: tmp, log: (message) => serverLog(message) });
  serverLog = () => undefined;
  const namespace = 'default';

  // The config every host reads (each its own copy with separate homes), and the approver's key.
  const clientHome = path.join(tmp, 'client');
  const keys = path.join(clientHome, 'approver-keys');
  mkdirSync(clientHome, { recursive: true });
  const approver = initApproverKey(keys, 'approver');
  const config = {
    limits: { cooldown: '0s' },
    approvers: { approver: { publicKey: approver.publicKey } },
    // Day budgets and the per-agent and per-model call buckets off: every intent here uses the one
    // command agent, whose calls reserve their declared most, and 50 intents pass its default $100
    // a day and its requests a minute (a budget or bucket stop is not what this run is about).
    worker: {
      rateLimits: { globalActivitiesPerSecond: GLOBAL_ACTIVITIES_PER_SECOND, perAgent: { requestsPerMinute: 1_000_000, tokensPerMinute: 1_000_000_000 }, perModel: { requestsPerMinute: 1_000_000, tokensPerMinute: 1_000_000_000 } },
      dayBudgetUsd: '0',
      agentDayBudgetUsd: '0',
    },
    ...(SEPARATE ? { placement: { remote: 'origin', moveAfter: MOVE_AFTER } } : {}),
  };
  const envFor = (home: string): NodeJS.ProcessEnv => {
    mkdirSync(home, { recursive: true });
    writeFileSync(path.join(home, 'warden.config.json'), JSON.stringify(config));
    const env: NodeJS.ProcessEnv = { ...process.env, WARDEN_HOME: home, WARDEN_CONFIG: path.join(home, 'warden.config.json'), WARDEN_APPROVER_KEYS: keys, TEMPORAL_ADDRESS: cluster.server.address, TEMPORAL_NAMESPACE: namespace, DATABASE_URL: ledgerUrl, WARDEN_LOG_LEVEL: 'warn', USER: 'approver' };
    return env;
  };
  const clientEnv = envFor(clientHome);

  let stopping = false;
  const hosts: Host[] = [];
  // Like a service manager: a worker that exits by itself (it cannot reach a server that is being
  // restarted, say) is started again a second later. A SIGKILL from the chaos is restarted by the chaos.
  const startWorker = (host: Host): ChildProcess => {
    const child = spawn(process.execPath, [BIN, 'worker', ...(SEPARATE ? ['--host', host.name] : [])], { env: host.env, stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr?.on('data', (d: Buffer) => writeFileSync(host.log, d, { flag: 'a' }));
    child.once('exit', (code) => {
      if (stopping || host.vanished || code === null || child !== host.worker) return;
      note(`host ${host.name}'s worker exited (${code}) by itself: started again`);
      setTimeout(() => {
        if (!stopping && !host.vanished && child === host.worker) host.worker = startWorker(host);
      }, 1_000);
    });
    return child;
  };
  const sharedHome = path.join(tmp, 'home');
  for (const name of ['host-a', 'host-b']) {
    const home = SEPARATE ? path.join(tmp, name) : sharedHome;
    const host: Host = { name, home, env: envFor(home), log: path.join(tmp, `${name}.log`), worker: undefined as unknown as ChildProcess, vanished: false };
    host.worker = startWorker(host);
    hosts.push(host);
  }

  // Like a service manager for the server too: one that ends by itself (its database gone, say)
  // is started again; while PostgreSQL is down that fails, and is tried again a second later.
  let restartingServer = false;
  const serverWatch = setInterval(() => {
    if (stopping || restartingServer || isAlive(cluster.server.pid)) return;
    restartingServer = true;
    cluster.startServer().then(
      () => note('the Temporal server ended by itself: started again'),
      () => undefined,
    ).finally(() => (restartingServer = false));
  }, 1_000);

  let connection = await Connection.connect({ address: cluster.server.address });
  let client = new Client({ connection, namespace });
  out(`chaos: ${N} intents on the real Temporal server, two worker hosts (${SEPARATE ? 'separate homes' : 'one shared home'}), seed ${SEED} (again: npm run chaos -- --seed ${SEED} --intents ${N}${SEPARATE ? '' : ' --shared-home'}); files in ${tmp}`);

  try {
    const began = Date.now();
    let closed = false;
    const intents: ChaosIntent[] = [];
    const approving = approveAll(() => client, intents, keys, () => closed || Date.now() - began >= TIMEOUT_MS);
    const chaos = makeChaos();
    // With separate hosts each repository gets a bare origin: the workers clone it, and merge into it.
    const origins = new Map<string, string>();
    const prepareRepo = SEPARATE
      ? (repo: string) => {
          const origin = `${repo}-origin.git`;
          for (const args of [['clone', '--bare', '--quiet', repo, origin], ['-C', repo, 'remote', 'add', 'origin', origin]]) {
            const done = spawnSync('git', args, { encoding: 'utf8' });
            if (done.status !== 0) throw new Error(`git ${args.join(' ')}: ${done.stderr}`);
          }
          origins.set(repo, origin);
        }
      : undefined;
    startChaosIntents({ count: N, prefix: `chaos-${SEED}`, reposDir: path.join(tmp, 'repos'), env: clientEnv, random, prepareRepo, started: intents });

    async function makeChaos(): Promise<void> {
      const live = () => hosts.filter((h) => !h.vanished);
      await sleep(paced(5_000 + random() * 10_000));
      for (const step of chaosSteps()) {
        // Each step lands while agents or tests run, not in a lull.
        await waitForWork(paced(120_000));
        if (step === 'kill') {
          const host = live()[Math.floor(random() * live().length)]!;
          const running = { agents: processesWith(AGENT_TAG), tests: processesWith(TESTS_TAG) };
          await killHard(host.worker);
          note(`SIGKILL to ${host.name}'s worker (${running.agents} agent and ${running.tests} test processes running on both hosts)`);
          await sleep(paced(2_000));
          host.worker = startWorker(host);
          note(`${paced(2_000) / 1000} s later: ${host.name}'s worker started again`);
        } else if (step === 'server') {
          restartingServer = true;
          await cluster.stopServer();
          note('Temporal server stopped');
          await sleep(paced(3_000));
          await cluster.startServer();
          restartingServer = false;
          note('Temporal server started again');
        } else if (step === 'postgres') {
          await postgres.stop();
          note(`PostgreSQL stopped (the ledger's and the Temporal server's) for ${paced(30_000) / 1000} s`);
          await sleep(paced(30_000));
          postgres = await startEmbeddedPostgres({ dataDir: pgDir, port: pgPort });
          note('PostgreSQL started again');
        } else {
          const host = live()[Math.floor(random() * live().length)]!;
          host.vanished = true;
          await killHard(host.worker);
          note(`host ${host.name} vanished (its worker killed, not started again)`);
        }
        await sleep(paced(10_000 + random() * 15_000));
      }
    }

    const statuses = await waitForClosed(() => client, intents, { began, timeoutMs: TIMEOUT_MS, count: N });
    closed = true;
    await Promise.all([chaos, approving]);
    // A fresh connection: the old one may still be reconnecting after the server's restart.
    await connection.close().catch(() => undefined);
    connection = await Connection.connect({ address: cluster.server.address });
    client = new Client({ connection, namespace });

    // The tally.
    const outcomes = await tallyOutcomes(client, intents, statuses);
    const closedIds = intents.filter((i) => statuses.has(i.id)).map((i) => i.id);
    progress('replaying the histories against the ledger');
    const ledgerCheck = await ledgerAgainstHistory(client, database.pool, closedIds);
    endProgress();
    const starts: ActivityStart[] = [];
    for (const { id } of intents) {
      for await (const execution of client.workflow.list({ query: `WorkflowId = '${workflowIdForIntent(id)}'` })) {
        const history = await client.workflow.getHandle(execution.workflowId, execution.runId).fetchHistory();
        starts.push(...activityStarts(history.events ?? []));
      }
    }
    const rates = highestRates(starts);
    // A moment for the workers' own cleanup, then what is left on the machine.
    await sleep(3_000);
    const processesLeft = chaosProcessesLeft();
    // A vanished host's disk went with it: what it held is counted apart, as gone, not as left.
    const homes = [...new Set(hosts.filter((h) => !h.vanished).map((h) => h.home))];
    const goneHomes = hosts.filter((h) => h.vanished).map((h) => h.home);
    const worktreesIn = (dirs: readonly string[]) => dirs.reduce((sum, home) => sum + worktreesLeft(path.join(home, 'worktrees')), 0);
    const repos = intents.map((i) => i.repo);
    // An intent that moved left its copy on the host it moved from, which waits for that host's
    // sweep (its INTENT_MOVED row says so): counted apart, as the vanished host's disk is.
    const moves = (await database.pool.query<{ intent_id: string; from: string }>(`SELECT intent_id, metadata->>'from' AS from FROM safety_events WHERE event_type = 'INTENT_MOVED'`)).rows;
    const movedFrom = (home: string): string[] => moves.filter((m) => hosts.some((h) => h.home === home && h.name === m.from)).map((m) => m.intent_id);
    const behind = {
      worktrees: homes.reduce((sum, home) => sum + worktreesOfIntents(path.join(home, 'worktrees'), movedFrom(home)), 0),
      branches: homes.reduce((sum, home) => sum + intentBranchesLeft(hostClones(home), movedFrom(home).filter((id) => outcomes.mergedIds.includes(id))), 0),
    };
    const worktrees = worktreesIn(homes) - behind.worktrees;
    // A failed intent keeps its branch (docs/intents.md); a merged one's branches are leftovers.
    const branches = intentBranchesLeft([...repos, ...origins.values(), ...homes.flatMap(hostClones)], outcomes.mergedIds) - behind.branches;
    const gone = { worktrees: worktreesIn(goneHomes), branches: intentBranchesLeft(goneHomes.flatMap(hostClones), outcomes.mergedIds) };
    const books = await settledBooks(database.pool);
    const duplicates = duplicateMerges(SEPARATE ? repos.map((repo) => origins.get(repo)!) : repos);

    const result = {
      seed: SEED,
      intents: N,
      hosts: SEPARATE ? 'separate' : 'shared',
      merged: outcomes.merged,
      failed: outcomes.failed.length,
      failures: outcomes.failed,
      running: outcomes.running,
      workflowTaskFailures: outcomes.workflowTaskFailures,
      wedged: outcomes.wedged,
      duplicateMerges: duplicates,
      ledgerRowsInHistories: ledgerCheck.inHistories,
      ledgerRowsLost: ledgerCheck.lost.length,
      ledgerRowsDoubled: ledgerCheck.doubled.length,
      unreplayableHistories: ledgerCheck.unreplayable.length,
      worktreesLeft: worktrees,
      branchesLeft: branches,
      onVanishedHost: gone,
      leftByMoves: behind,
      processesLeft,
      booksDifferenceCents: books.differenceCents,
      openReservations: books.openReservations,
      activityStarts: starts.length,
      highestActivityStartsPerSecond: rates.all,
      highestActivityStartsPerSecondByQueue: rates.byQueue,
      globalActivitiesPerSecond: GLOBAL_ACTIVITIES_PER_SECOND,
      seconds: Math.round((Date.now() - began) / 1000),
      chaos: log,
    };
    printOutcomes(outcomes);
    out(`duplicate merges                            ${duplicates}`);
    out(`ledger rows lost / doubled                  ${ledgerCheck.lost.length} / ${ledgerCheck.doubled.length} (of ${ledgerCheck.inHistories} the histories wrote; ${closedIds.length} closed intents)`);
    for (const line of [...ledgerCheck.lost.map((l) => `lost: ${l}`), ...ledgerCheck.doubled.map((d) => `doubled: ${d}`), ...ledgerCheck.unreplayable.map((u) => `did not replay: ${u}`)].slice(0, 20)) out(`  ${line}`);
    out(`worktrees / branches / processes left       ${worktrees} / ${branches} / ${processesLeft} (branches: of merged intents; a failed one keeps its own)`);
    if (goneHomes.length > 0) out(`  on the vanished host's disk, gone with it: ${gone.worktrees} worktree(s), ${gone.branches} branch(es) of merged intents`);
    if (behind.worktrees + behind.branches > 0) out(`  on a live host an intent moved away from, for its sweep: ${behind.worktrees} worktree(s), ${behind.branches} branch(es) of merged intents`);
    out(`books difference                            ${books.differenceCents} cent(s); ${books.openReservations} reservation(s) still open`);
    out(`activity starts, highest in a sliding 1 s   ${rates.all} on all ${Object.keys(rates.byQueue).length} task queues (${starts.length} starts); the setting: ${GLOBAL_ACTIVITIES_PER_SECOND}/s a queue`);
    for (const [queue, rate] of Object.entries(rates.byQueue)) out(`  ${queue}: ${rate}`);
    out(`time                                        ${result.seconds} s`);
    out(JSON.stringify(result));
    writeChaosResult('chaos', result);
    const clean =
      outcomes.running === 0 &&
      outcomes.wedged === 0 &&
      duplicates === 0 &&
      ledgerCheck.lost.length === 0 &&
      ledgerCheck.doubled.length === 0 &&
      ledgerCheck.unreplayable.length === 0 &&
      worktrees === 0 &&
      branches === 0 &&
      processesLeft === 0 &&
      books.differenceCents === 0;
    return clean ? 0 : 1;
  } finally {
    stopping = true;
    clearInterval(serverWatch);
    await Promise.all(hosts.map((h) => stopGently(h.worker)));
    await connection.close().catch(() => undefined);
    await database.close().catch(() => undefined);
    await cluster.stopServer().catch(() => undefined);
    await postgres.stop().catch(() => undefined);
  }
}

runBenchmark('chaos', main);
