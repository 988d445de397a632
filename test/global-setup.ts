import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { DevServer } from '../src/runtime/dev-server';
import { isTemporalReachable, startDevServer } from '../src/runtime/dev-server';
import { ensureTemporalCli } from '../src/runtime/temporal-cli';

/** Where globalTeardown finds the server; both run in jest's main process. */
export const DEV_SERVER_GLOBAL = '__wardenTestDevServer';

const log = (message: string): void => {
  process.stderr.write(`[global-setup] ${message}\n`);
};

/**
 * Starts one Temporal dev server for the whole run and publishes it through process.env, which
 * jest's workers inherit. An existing TEMPORAL_ADDRESS is used instead of starting one.
 */
export default async function globalSetup(): Promise<void> {
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
