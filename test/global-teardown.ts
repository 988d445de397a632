import type { DevServer } from '../src/runtime/dev-server';
import { DEV_SERVER_GLOBAL, stopTestPostgres } from './global-setup';

/** Stops the servers that globalSetup started, if it started them. */
export default async function globalTeardown(): Promise<void> {
  await stopTestPostgres();
  const holder = globalThis as Record<string, unknown>;
  const server = holder[DEV_SERVER_GLOBAL] as DevServer | undefined;
  if (!server) return;
  delete holder[DEV_SERVER_GLOBAL];
  await server.stop();
  // So a later globalSetup in this process (watch mode) starts a new server instead of reusing this one.
  delete process.env.TEMPORAL_ADDRESS;
  delete process.env.TEMPORAL_NAMESPACE;
}
