import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/ledger/database';
import type { DevServer } from '../src/runtime/dev-server';
import { isTemporalReachable, startDevServer } from '../src/runtime/dev-server';
import { ensureTemporalCli } from '../src/runtime/temporal-cli';
import { WORKFLOW_INTERCEPTOR_MODULES } from '../src/workers/warden-worker';
import { bundleWorkflowsApart } from '../src/workers/workflow-bundle';
import { missingEnv, programEnv } from './setup/prerequisites';
import { describeStatus, ensureSystemPrograms, isCi, type ProgramStatus } from './setup/system-packages';

/** Where globalTeardown finds the server; both run in jest's main process. */
export const DEV_SERVER_GLOBAL = '__wardenTestDevServer';
/** Where globalTeardown finds the embedded PostgreSQL and its temp folder. */
export const POSTGRES_GLOBAL = '__wardenTestPostgres';
/** Where globalTeardown finds the second PostgreSQL (Debian's build) and its temp folder. */
export const SERVER_POSTGRES_GLOBAL = '__wardenTestServerPostgres';

export interface TestPostgres {
  readonly server: EmbeddedPostgres;
  readonly dir: string;
}

const log = (message: string): void => {
  process.stderr.write(`[global-setup] ${message}\n`);
};

/**
 * Finds (or installs) the system programs some tests need, starts one embedded PostgreSQL, a
 * second PostgreSQL from Debian's package, and one Temporal dev server for the whole run, and
 * publishes them through process.env, which jest's workers inherit. Each test file makes its own
 * database on a PostgreSQL (test/helpers/database.ts). An existing TEMPORAL_ADDRESS is used
 * instead of starting a dev server, and an existing WARDEN_TEST_DATABASE_URL instead of the
 * second PostgreSQL.
 */
export default async function globalSetup(): Promise<void> {
  const programs = await findSystemPrograms();
  await startTestPostgres();
  try {
    await startServerPostgres(programs.find((p) => p.program === 'postgresql')!);
    await Promise.all([setupTemporal(), bundleForTheRun()]);
  } catch (error) {
    await stopTestPostgres();
    throw error;
  }
}

/**
 * Publishes each program's path, or why it is missing. In CI a missing program fails the run:
 * CI must not pass by skipping what it did not run.
 */
async function findSystemPrograms(): Promise<ProgramStatus[]> {
  const statuses = await ensureSystemPrograms({ log });
  for (const status of statuses) {
    log(describeStatus(status));
    if (status.available) {
      process.env[programEnv(status.program)] = status.path;
      delete process.env[missingEnv(status.program)];
    } else {
      process.env[missingEnv(status.program)] = describeStatus(status);
      delete process.env[programEnv(status.program)];
    }
  }
  // Every intent's tests are agent-written code and run only inside bubblewrap: without it nearly
  // every integration test would fail, so the tier stops here with the one line that says why.
  const bubblewrap = statuses.find((s) => s.program === 'bubblewrap');
  if (bubblewrap && !bubblewrap.available) {
    throw new Error(`the integration tests need bubblewrap: every intent runs its repo's tests inside it. ${describeStatus(bubblewrap)} (npm run test:unit needs none of this)`);
  }
  const missing = statuses.filter((s) => !s.available);
  if (missing.length > 0 && isCi()) {
    throw new Error(`CI is set and tests would be skipped for want of: ${missing.map((s) => s.program).join(', ')}. ${missing.map(describeStatus).join(' ')}`);
  }
  return statuses;
}

/** A fresh embedded PostgreSQL in a temp folder, on a free port. */
async function startTestPostgres(): Promise<void> {
  if (process.env.WARDEN_TEST_EMBEDDED_DATABASE_URL) return;
  const dir = await mkdtemp(path.join(tmpdir(), 'warden-test-pg-'));
  const started = Date.now();
  const server = await startEmbeddedPostgres({ dataDir: dir, port: 0 }).catch(async (error: unknown) => {
    await rm(dir, { recursive: true, force: true });
    throw error;
  });
  log(`embedded PostgreSQL on port ${server.port} (pid ${server.pid}) ready in ${Date.now() - started} ms`);
  (globalThis as Record<string, unknown>)[POSTGRES_GLOBAL] = { server, dir } satisfies TestPostgres;
  process.env.WARDEN_TEST_EMBEDDED_DATABASE_URL = server.url;
}

/**
 * Unless WARDEN_TEST_DATABASE_URL names one, a second PostgreSQL for the ledger tests: Debian's
 * build, started the embedded way in a temp folder, reached as an ordinary role (CREATEDB, no
 * superuser) with a password over TCP, as a shared server would be.
 */
async function startServerPostgres(postgresql: ProgramStatus): Promise<void> {
  if (process.env.WARDEN_TEST_DATABASE_URL || !postgresql.available) return;
  const dir = await mkdtemp(path.join(tmpdir(), 'warden-test-pg-server-'));
  const started = Date.now();
  const bin = postgresql.path;
  const server = await startEmbeddedPostgres({
    dataDir: dir,
    port: 0,
    binaries: { initdb: path.join(bin, 'initdb'), postgres: path.join(bin, 'postgres') },
  }).catch(async (error: unknown) => {
    await rm(dir, { recursive: true, force: true });
    throw error;
  });
  (globalThis as Record<string, unknown>)[SERVER_POSTGRES_GLOBAL] = { server, dir } satisfies TestPostgres;
  const password = randomBytes(18).toString('hex');
  const admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
  try {
    await admin.query(`CREATE ROLE warden LOGIN CREATEDB PASSWORD '${password}'`);
    await admin.query('CREATE DATABASE warden OWNER warden');
  } finally {
    await admin.end();
  }
  const url = new URL(server.url);
  url.username = 'warden';
  url.password = password;
  url.pathname = '/warden';
  process.env.WARDEN_TEST_DATABASE_URL = url.toString();
  log(`${postgresql.detail} on port ${server.port} (pid ${server.pid}) as role warden, ready in ${Date.now() - started} ms`);
}

/** Stops the PostgreSQL servers that the setup started and removes their folders. */
export async function stopTestPostgres(): Promise<void> {
  const holder = globalThis as Record<string, unknown>;
  for (const key of [POSTGRES_GLOBAL, SERVER_POSTGRES_GLOBAL]) {
    const postgres = holder[key] as TestPostgres | undefined;
    if (!postgres) continue;
    delete holder[key];
    await postgres.server.stop();
    await rm(postgres.dir, { recursive: true, force: true });
    delete process.env[key === POSTGRES_GLOBAL ? 'WARDEN_TEST_EMBEDDED_DATABASE_URL' : 'WARDEN_TEST_DATABASE_URL'];
  }
}

/**
 * Bundles the workflow code with Warden's interceptors once, before any test file asks for it:
 * the bundle cache (src/workers/workflow-bundle.ts) then answers every test file's world.
 */
async function bundleForTheRun(): Promise<void> {
  const started = Date.now();
  await bundleWorkflowsApart(WORKFLOW_INTERCEPTOR_MODULES);
  log(`workflow code bundled (or found in the cache) in ${Date.now() - started} ms`);
}

async function setupTemporal(): Promise<void> {
  const repoRoot = path.resolve(__dirname, '..');
  const wardenHome = path.join(repoRoot, '.warden');
  const existing = process.env.TEMPORAL_ADDRESS;

  let cliPath: string | undefined;
  try {
    cliPath = await ensureTemporalCli({ wardenHome, env: process.env, log });
    process.env.WARDEN_TEST_CLI_PATH = cliPath;
  } catch (err) {
    // Without our own server the CLI is only needed by the tests that start servers themselves.
    if (!existing) throw err;
    log(`No Temporal CLI (${err instanceof Error ? err.message : String(err)}); tests that need it will fail`);
  }

  if (existing) {
    if (!(await isTemporalReachable(existing, 60_000))) { // a hang guard, not a figure
      throw new Error(`TEMPORAL_ADDRESS is set to ${existing}, but no Temporal server answers there`);
    }
    process.env.TEMPORAL_NAMESPACE ??= 'default';
    return;
  }

  const logFile = path.join(wardenHome, 'logs', 'test-dev-server.log');
  await rm(logFile, { force: true });
  const server: DevServer = await startDevServer({
    cliPath: cliPath!,
    port: 0,
    uiPort: false,
    namespace: 'default',
    logFile,
  });
  (globalThis as Record<string, unknown>)[DEV_SERVER_GLOBAL] = server;
  process.env.TEMPORAL_ADDRESS = server.address;
  process.env.TEMPORAL_NAMESPACE = server.namespace;
}
