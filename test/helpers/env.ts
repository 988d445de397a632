import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { NativeConnection, Runtime, DefaultLogger } from '@temporalio/worker';
import type { WardenWorker } from '../../src/workers/host-worker';
import pino, { type Logger } from 'pino';
import type pg from 'pg';
import type { WardenActivities } from '../../src/activities';
import { trashOf } from '../../src/activities/trash';
import { startIntent } from '../../src/client/intents';
import { createSampleRepo } from '../../src/client/sample-repo';
import { migrate } from '../../src/ledger/migrate';
import type { LadderDefaults } from '../../src/ledger/ladder-store';
import { Ledger } from '../../src/ledger/ledger';
import { createRedactor } from '../../src/shared/redact';
import type { IntentInput } from '../../src/shared/intent';
import type { AgentScript } from '../../src/shared/script';
import type { intentWorkflow } from '../../src/workflows';
import { WORKFLOW_INTERCEPTOR_MODULES, createWardenWorker, type WardenWorkerOptions } from '../../src/workers/warden-worker';
import { bundleWorkflowsApart } from '../../src/workers/workflow-bundle';
import { freshDatabase, testBackends } from './database';
import { resolveConfig } from '../../src/config/load';
import type { WorkerSafetyConfig } from '../../src/config/schema';
import type { KillSwitchOptions } from '../../src/workers/interceptors/agent-safety';

/** The dev server started by test/global-setup.ts. */
export function temporalAddress(): string {
  const address = process.env.TEMPORAL_ADDRESS;
  if (!address) throw new Error('TEMPORAL_ADDRESS is not set: tests run against the dev server from global-setup');
  return address;
}

/**
 * The PostgreSQL the workflow tests write their ledgers to: the embedded one, as Warden uses by
 * default. The ledger's own tests also run on the server CI gives (see testBackends).
 */
export function testDatabaseUrl(): string {
  const [[, url]] = testBackends();
  return url;
}

let runtimeInstalled = false;

export interface TestWorld {
  readonly client: Client;
  readonly connection: NativeConnection;
  /** The workflow code with Warden's interceptors (from the bundle cache the global setup filled). */
  readonly bundle: { readonly code: string };
  readonly taskQueue: string;
  readonly worktreeRoot: string;
  readonly lineageRoot: string;
  /** This file's own ledger database (a fresh one in the test PostgreSQL). */
  readonly pool: pg.Pool;
  /** That database's URL (for a CLI run against the same ledger). */
  readonly databaseUrl: string;
  readonly ledger: Ledger;
  /** A worker on this file's task queue; `wrap` may replace activities (fault injection). */
  worker(options?: WorkerOptions): Promise<WardenWorker>;
  close(): Promise<void>;
}

export interface WorkerOptions {
  readonly wrap?: (activities: WardenActivities) => WardenActivities;
  readonly logger?: Logger;
  /** Another ledger (e.g. one whose server the test stops and restarts). */
  readonly ledger?: Ledger;
  readonly safety?: WorkerSafetyConfig;
  /** The automation ladder's start; by default L0 with no level-up, so run counts never change a test's gates. */
  readonly automation?: LadderDefaults;
  readonly mode?: 'development' | 'production';
  /** Another task queue than the world's (a second worker beside the world's own). */
  readonly taskQueue?: string;
  /** Another host than the world's: its own name, and its own folders (a host with a disk of its own). */
  readonly host?: { readonly name: string; readonly dir: string };
  /** WARDEN_ENABLED and the EMERGENCY_STOP file (default: enabled, the file under the cwd's .warden/). */
  readonly killSwitch?: KillSwitchOptions;
  /** The worker's notification channels and how its dispatcher polls and retries. */
  readonly notify?: WardenWorkerOptions['notify'];
  readonly notifications?: WardenWorkerOptions['notifications'];
  readonly gateLink?: WardenWorkerOptions['gateLink'];
  /** The config intents are completed from (default none: only the schema is checked). */
  readonly intentRules?: WardenWorkerOptions['intentRules'];
  /** Install and keep the task queue's sweep schedule, as a real worker does (default off: most tests sweep by hand, or not at all). */
  readonly sweepSchedule?: boolean;
}

/** The default profile, with no cooldown so tests do not wait a minute between impl attempts. */
export const TEST_CONFIG = resolveConfig({ limits: { cooldown: '0s' } });

/**
 * Connects to the test server (or to `address`, a server the test started itself), with the
 * workflow code bundled once for the run.
 */
export async function createTestWorld(name: string, address?: string): Promise<TestWorld> {
  if (!runtimeInstalled) {
    Runtime.install({ logger: new DefaultLogger('ERROR') });
    runtimeInstalled = true;
  }
  address ??= temporalAddress();
  const connection = await NativeConnection.connect({ address });
  const clientConnection = await Connection.connect({ address });
  const client = new Client({ connection: clientConnection });
  // From the bundle cache, which the global setup filled: bundling in every test file cost two
  // seconds of CPU each.
  const bundle = await bundleWorkflowsApart(WORKFLOW_INTERCEPTOR_MODULES);
  const dir = mkdtempSync(path.join(tmpdir(), `warden-${name}-`));
  const worktreeRoot = path.join(dir, 'worktrees');
  const lineageRoot = path.join(dir, 'lineage');
  const taskQueue = `test-${name}-${process.pid}-${Date.now()}`;
  const database = await freshDatabase(testDatabaseUrl());
  await migrate(database.pool);
  const ledger = new Ledger(database.pool);
  return {
    client,
    connection,
    bundle,
    taskQueue,
    worktreeRoot,
    lineageRoot,
    pool: database.pool,
    databaseUrl: database.url,
    ledger,
    async worker(options = {}) {
      return createWardenWorker({
        connection,
        taskQueue: options.taskQueue ?? taskQueue,
        workflowBundle: bundle,
        ...(options.host
          ? { host: options.host.name, worktreeRoot: path.join(options.host.dir, 'worktrees'), lineageRoot: path.join(options.host.dir, 'lineage') }
          : { worktreeRoot, lineageRoot }),
        ledger: options.ledger ?? ledger,
        logger: options.logger ?? pino({ level: 'silent' }),
        redact: createRedactor(process.env),
        safety: options.safety ?? TEST_CONFIG.worker,
        automation: options.automation ?? { level: 0, allowLevelUp: false },
        mode: options.mode,
        wrapActivities: options.wrap,
        killSwitch: options.killSwitch,
        notify: options.notify,
        notifications: options.notifications,
        gateLink: options.gateLink,
        sweepSchedule: options.sweepSchedule ?? false,
        intentRules: options.intentRules,
      });
    },
    async close() {
      await clientConnection.close();
      await connection.close();
      await database.drop();
    },
  };
}

/** A fresh sample repository (see src/client/sample-repo.ts) in a temp folder. */
export function makeSampleRepo(): string {
  return createSampleRepo(path.join(mkdtempSync(path.join(tmpdir(), 'warden-repo-')), 'sample'));
}

/** Writes a scripted-agent script to a temp file and returns its path. */
export function writeScript(script: AgentScript | Record<string, unknown>): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'warden-script-')), 'script.json');
  writeFileSync(file, JSON.stringify(script));
  return file;
}

/** The bundled demo script: impl fails once, then passes. */
export const DEMO_SCRIPT = path.resolve(__dirname, '../../examples/demo-agent.json');

export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8' }).trim();
}

/**
 * Worktree folders left under `root` (one folder per repo, one per intent inside it). The trash
 * (see src/activities/trash.ts) holds removed worktrees until they are deleted in the background:
 * it is no worktree, and is not listed.
 */
export function worktreeFoldersLeft(root: string): string[] {
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .filter((entry) => path.join(root, entry) !== trashOf(root))
    .flatMap((repoFolder) => readdirSync(path.join(root, repoFolder)));
}

/**
 * Polls `check` until it returns a value (not undefined) or `timeoutMs` passes. The timeout is a
 * hang guard, not a bound on how long the condition may take: two minutes unless a test says
 * otherwise, since a busy machine takes several times what an idle one does.
 */
export async function waitFor<T>(check: () => Promise<T | undefined> | T | undefined, timeoutMs = 120_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * One world and one running worker for a test file: registers the beforeAll / afterAll that
 * make and tear them down, and returns a getter for the world.
 */
export function useTestWorld(name: string, options: WorkerOptions | (() => Promise<WorkerOptions>) = {}): () => TestWorld {
  let world: TestWorld | undefined;
  let worker: WardenWorker | undefined;
  let running: Promise<void> | undefined;
  beforeAll(async () => {
    world = await createTestWorld(name);
    worker = await world.worker(typeof options === 'function' ? await options() : options);
    running = worker.run();
  });
  afterAll(async () => {
    worker?.shutdown();
    await running;
    await world?.close();
  });
  return () => {
    if (!world) throw new Error('the test world is made in beforeAll');
    return world;
  };
}

type ScriptStages = Record<string, Array<Record<string, unknown>>>;

/** The bundled demo script's stages, every delay removed. */
export function demoStages(): ScriptStages {
  const stages = (JSON.parse(readFileSync(DEMO_SCRIPT, 'utf8')) as { stages: ScriptStages }).stages;
  for (const attempts of Object.values(stages)) for (const attempt of attempts) attempt.delayMs = 0;
  return stages;
}

/** A script file: the demo with no delays (impl fails once, then passes), `changes` replacing stages. */
export function demoScript(changes: ScriptStages = {}): string {
  return writeScript({ stages: { ...demoStages(), ...changes } });
}

let sampleIntents = 0;

/**
 * Starts an "Add slugify" intent on a fresh sample repo in `world`: the scripted demo agent
 * (no delays), declared paths `lib/**`, no cooldown; `overrides` replace any of it (limits are
 * merged). The id is `<prefix><n>-<time>`.
 */
export async function startSampleIntent(
  world: TestWorld,
  prefix: string,
  overrides: Partial<IntentInput> = {},
): Promise<{ handle: WorkflowHandle<typeof intentWorkflow>; repo: string; id: string; before: string }> {
  sampleIntents += 1;
  const repo = makeSampleRepo();
  const id = `${prefix}${sampleIntents}-${Date.now()}`;
  const handle = await startIntent(
    world.client,
    {
      id,
      goal: 'Add slugify',
      repoPath: repo,
      paths: ['lib/**'],
      agent: { kind: 'scripted', scriptPath: demoScript() },
      ...overrides,
      limits: { cooldown: '0s', ...overrides.limits },
    },
    world.taskQueue,
  );
  return { handle, repo, id, before: git(repo, 'rev-parse', 'main') };
}
