import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/ledger/database';
import type { DevServer } from '../src/runtime/dev-server';
import { isTemporalReachable, startDevServer } from '../src/runtime/dev-server';
import { ensureTemporalCli } from '../src/runtime/temporal-cli';

/** Where globalTeardown finds the server; both run in jest's main process. */
export const DEV_SERVER_GLOBAL = '__wardenTestDevServer';
/** Where globalTeardown finds the embedded PostgreSQL and its temp folder. */
export const POSTGRES_GLOBAL = '__wardenTestPostgres';

export interface TestPostgres {
  readonly server: EmbeddedPostgres;
  readonly dir: string;
}

const log = (message: string): void => {
  process.stderr.write(`[global-setup] ${message}\n`);
};

/**
 * Starts one embedded PostgreSQL and one Temporal dev server for the whole run and publishes them
 * through process.env, which jest's workers inherit. Each test file makes its own database on the
 * PostgreSQL (test/helpers/database.ts). An existing TEMPORAL_ADDRESS is used instead of starting
 * a dev server; WARDEN_TEST_DATABASE_URL, when set, is a second PostgreSQL the ledger tests also use.
 */
export default async function globalSetup(): Promise<void> {
  await startTestPostgres();
  try {
    await setupTemporal();
  } catch (error) {
    await stopTestPostgres();
    throw error;
  }
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

/** Stops what startTestPostgres started and removes its folder. */
export async function stopTestPostgres(): Promise<void> {
  const holder = globalThis as Record<string, unknown>;
  const postgres = holder[POSTGRES_GLOBAL] as TestPostgres | undefined;
  if (!postgres) return;
  delete holder[POSTGRES_GLOBAL];
  await postgres.server.stop();
  await rm(postgres.dir, { recursive: true, force: true });
  delete process.env.WARDEN_TEST_EMBEDDED_DATABASE_URL;
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
    if (!(await isTemporalReachable(existing, 10_000))) {
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
