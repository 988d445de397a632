import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { answeringDesignStages } from '../../src/client/sample-repo';
import { startDevServer, type DevServer } from '../../src/runtime/dev-server';
import { freshDatabase, type FreshDatabase } from '../helpers/database';
import { makeSampleRepo, testDatabaseUrl, waitFor } from '../helpers/env';
import { processesWith } from '../helpers/processes';

/**
 * A worker killed with SIGKILL takes every process of its intents with it, at every sandbox
 * level, whether an agent or a test run was going, and the processes that left the process
 * group (setsid) too. The restarted worker's retry then runs alone: one attempt's processes,
 * never two.
 */

const BIN = path.resolve(__dirname, '../../bin/warden.js');
const LEVELS = ['none', 'process', 'bubblewrap'] as const;
const KINDS = ['agent', 'tests'] as const;

/** Two sleeps per attempt, one of them in a session of its own; only the sleeps' command lines hold `<tag>-42`. */
function sleepers(tag: string): string {
  const sleeper = `bash -c "exec -a ${tag}-\\$((40+2)) sleep 300"`;
  return `setsid ${sleeper} & ${sleeper} & wait`;
}

let server: DevServer;
let database: FreshDatabase;
const home = mkdtempSync(path.join(tmpdir(), 'warden-crash-home-'));
const env: NodeJS.ProcessEnv = { ...process.env, WARDEN_HOME: home, WARDEN_LOG_LEVEL: 'warn', USER: 'crash-tester', WARDEN_APPROVER_KEYS: path.join(home, 'keys') };

beforeAll(async () => {
  server = await startDevServer({ cliPath: process.env.WARDEN_TEST_CLI_PATH!, port: 0, uiPort: false });
  database = await freshDatabase(testDatabaseUrl());
  const config = path.join(home, 'warden.config.json');
  writeFileSync(config, JSON.stringify({ limits: { cooldown: '0s' } }));
  Object.assign(env, { TEMPORAL_ADDRESS: server.address, DATABASE_URL: database.url, WARDEN_CONFIG: config });
});

afterAll(async () => {
  spawnSync('pkill', ['-KILL', '-f', 'crash-[a-z]+-[a-z]+-42']); // whatever a failed run left
  await server?.stop();
  await database?.drop();
});

function warden(...args: string[]) {
  const result = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8', timeout: 120_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

function startWorker(): ChildProcess {
  return spawn(process.execPath, [BIN, 'worker'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
}

test('kill -9 of the worker mid-agent and mid-test at every sandbox level: nothing of theirs lives on; each retry runs alone', async () => {
  let worker = startWorker();
  const tags: string[] = [];
  const ids = new Map<string, string>();
  try {
    for (const level of LEVELS) {
      for (const kind of KINDS) {
        const tag = `crash-${level}-${kind}`;
        tags.push(tag);
        ids.set(tag, `${tag}-${Date.now()}`);
        // The agent hangs in impl, or writes its change and the tests hang.
        const impl = kind === 'agent' ? sleepers(tag) : 'echo change >> crash.txt';
        const started = warden(
          'run',
          '--repo', makeSampleRepo(),
          '--goal', `crash during ${kind}`,
          '--id', ids.get(tag)!,
          '--agent', 'command',
          '--cmd', answeringDesignStages(`if grep -q '^# Warden: impl'; then ${impl}; else echo ok; fi`),
          '--sandbox', level,
          ...(level === 'bubblewrap' ? [] : ['--allow-unconfined-code']),
          '--test-cmd', kind === 'tests' ? sleepers(tag) : 'true',
          '--detach',
        );
        expect(started.stderr).toBe('');
        expect(started.code).toBe(0);
      }
    }
    const all = () => tags.map((tag) => processesWith(`${tag}-42`).length);
    await waitFor(() => (all().every((n) => n === 2) ? true : undefined), 180_000, 'every agent and test run to be sleeping');

    worker.kill('SIGKILL');
    await new Promise((resolve) => worker.on('close', resolve));
    // The sleeps would run for minutes: that they end at all is the worker's doing. A hang guard,
    // not a figure (about a second on an idle machine).
    await waitFor(() => (all().every((n) => n === 0) ? true : undefined), 120_000, 'every agent and test run of the killed worker to end').catch(() => undefined);
    expect(Object.fromEntries(tags.map((tag) => [tag, processesWith(`${tag}-42`)]))).toEqual(Object.fromEntries(tags.map((tag) => [tag, []])));

    // The retry after the heartbeat timeout: one attempt's two sleeps each, and still two a moment later.
    worker = startWorker();
    await waitFor(() => (all().every((n) => n === 2) ? true : undefined), 180_000, 'every retry to be sleeping');
    // A moment later still one attempt each: no second retry runs alongside.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(all()).toEqual(tags.map(() => 2));

    const stop = warden('stop', '--all', '--reason', 'crash test over', '--json');
    expect(stop.code).toBe(0);
    expect((JSON.parse(stop.stdout) as { outcomes: Array<{ outcome: string }> }).outcomes.map((o) => o.outcome)).toEqual(tags.map(() => 'stopped'));
    expect(all()).toEqual(tags.map(() => 0));

    // The books: the killed attempts' reservations are released once their attempts are over
    // (a worker start looks, as does every running worker each minute), and budget tables and
    // cost_events agree to the cent.
    worker.kill('SIGTERM');
    await new Promise((resolve) => worker.on('close', resolve));
    worker = startWorker();
    type Books = { balanced: boolean; differenceCents: number; intents: Array<{ intentId: string; openReservations: number }> };
    const books = await waitFor(() => {
      const checked = JSON.parse(warden('audit', '--books', '--json').stdout) as Books;
      return checked.intents.every((i) => i.openReservations === 0) ? checked : undefined;
    }, 120_000, 'every reservation to be settled or released');
    expect(books).toMatchObject({ balanced: true, differenceCents: 0 });
    expect(warden('audit', '--books').stdout).toMatch(/the books balance/);
    for (const level of LEVELS) {
      const timeline = JSON.parse(warden('audit', ids.get(`crash-${level}-agent`)!, '--json').stdout) as Array<{ type: string; summary: string }>;
      expect(timeline.filter((e) => e.type === 'COST_WARNING' && /was released: attempt 1 of activity .* stopped before the call reported its cost/.test(e.summary))).toHaveLength(1);
    }
  } finally {
    worker.kill('SIGKILL');
  }
}, 600_000); // a hang guard: a few minutes on a busy machine
