import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadRuntimeConfig } from '../../src/runtime/config';
import { connectTemporal, connectTemporalIfRunning, type TemporalTarget } from '../../src/runtime/temporal';
import { findFreePort, isPortFree } from '../../src/shared/ports';

/**
 * Two Warden homes on one machine must not share an embedded Temporal server: one home's worker
 * would run the other's intents with its own config and ledger. The home that starts the server
 * owns it; any process of another home that finds it refuses with one line naming the owner and
 * how to get a server of its own (WARDEN_TEMPORAL_PORT), which then works.
 */

const BIN = path.resolve(__dirname, '../../bin/warden.js');
const homes: string[] = [];
const targets: TemporalTarget[] = [];

/** A free port whose Web UI port (1000 above) is free too. */
async function freePortPair(): Promise<number> {
  for (;;) {
    const port = await findFreePort();
    if (port <= 64535 && (await isPortFree(port + 1000))) return port;
  }
}

/** The environment of a Warden process of `home`, with the embedded server on `port` (no TEMPORAL_ADDRESS: the embedded one). */
function envOf(home: string, port: number): NodeJS.ProcessEnv {
  const rest = { ...process.env };
  delete rest.TEMPORAL_ADDRESS;
  return { ...rest, WARDEN_HOME: home, WARDEN_TEMPORAL_PORT: String(port), TEMPORAL_CLI_PATH: process.env.WARDEN_TEST_CLI_PATH, WARDEN_LOG_LEVEL: 'warn' };
}

function newHome(name: string): string {
  const home = mkdtempSync(path.join(tmpdir(), `warden-home-${name}-`));
  homes.push(home);
  return home;
}

afterAll(async () => {
  for (const target of targets.reverse()) await target.close();
  for (const home of homes) rmSync(home, { recursive: true, force: true });
});

test("a second home refuses the first home's embedded server, naming it; on a port of its own it gets its own", async () => {
  process.env.TEMPORAL_CLI_PATH ??= process.env.WARDEN_TEST_CLI_PATH;
  const port = await freePortPair();
  const first = newHome('first');
  const second = newHome('second');

  // The first home starts the embedded server; another process of the same home reuses it.
  const owner = await connectTemporal(loadRuntimeConfig(envOf(first, port)), () => undefined);
  targets.push(owner);
  expect(owner.embedded).toBeDefined();
  const again = await connectTemporal(loadRuntimeConfig(envOf(first, port)), () => undefined);
  expect(again.embedded).toBeUndefined();
  await again.close();

  // The second home finds it: a worker, a command that starts intents, and a read command all refuse.
  const refusal = new RegExp(`^the embedded Temporal server on 127\\.0\\.0\\.1:${port} belongs to the Warden home ${first.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}, not to this one \\(${second.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\).*WARDEN_TEMPORAL_PORT`);
  await expect(connectTemporal(loadRuntimeConfig(envOf(second, port)), () => undefined)).rejects.toThrow(refusal);
  await expect(connectTemporalIfRunning(loadRuntimeConfig(envOf(second, port)))).rejects.toThrow(refusal);
  const gates = spawnSync(process.execPath, [BIN, 'gates'], { env: envOf(second, port), encoding: 'utf8', timeout: 120_000 });
  expect(gates.status).toBe(2);
  expect(gates.stderr.trim().split('\n')).toEqual([expect.stringMatching(new RegExp(`^warden: ${refusal.source.slice(1)}`))]);

  // On another port the second home has a server of its own, and the first home refuses that one.
  const otherPort = await freePortPair();
  const own = await connectTemporal(loadRuntimeConfig(envOf(second, otherPort)), () => undefined);
  targets.push(own);
  expect(own.embedded).toBeDefined();
  await expect(connectTemporal(loadRuntimeConfig(envOf(first, otherPort)), () => undefined)).rejects.toThrow(/belongs to the Warden home .*warden-home-second-/);
});

test('WARDEN_TEMPORAL_PORT takes a port, and refuses anything else with one line', () => {
  expect(loadRuntimeConfig({}).embeddedTemporalPort).toBe(7233);
  expect(loadRuntimeConfig({ WARDEN_TEMPORAL_PORT: '7300' }).embeddedTemporalPort).toBe(7300);
  for (const bad of ['0', '80', '65000', 'x', '7233.5', '-1']) {
    expect(() => loadRuntimeConfig({ WARDEN_TEMPORAL_PORT: bad })).toThrow(/^WARDEN_TEMPORAL_PORT must be a port from 1024 to 64535/);
  }
});
