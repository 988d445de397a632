import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { findRunningServer } from '../../src/ledger/embedded-server';
import { openDatabase } from '../../src/ledger/database';

/**
 * Read commands never start the embedded PostgreSQL: with it down they say so in one line,
 * naming how to start it, and exit non-zero; no postgres process is left behind (or started).
 */

const BIN = path.resolve(__dirname, '../../bin/warden.js');
const home = mkdtempSync(path.join(tmpdir(), 'warden-read-home-'));
const dataDir = path.join(home, 'postgres');
const env: NodeJS.ProcessEnv = { ...process.env, WARDEN_HOME: home, DATABASE_URL: '', WARDEN_LOG_LEVEL: 'warn' };

/** Postgres processes serving this home's data folder, from /proc. */
function postgresOfHome(): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        return path.basename(command[0] ?? '') === 'postgres' && command.some((arg) => arg.startsWith(home));
      } catch {
        return false; // gone meanwhile
      }
    })
    .map(Number);
}

beforeAll(async () => {
  // The home's embedded server, initialised and then stopped: the ledger is there, its server is down.
  const database = await openDatabase({ dataDir, port: 0 });
  expect(database.server?.startedHere).toBe(true);
  await database.close();
  expect(await findRunningServer(dataDir)).toBeUndefined();
  expect(postgresOfHome()).toEqual([]);
});

afterAll(() => {
  rmSync(home, { recursive: true, force: true });
});

test.each([
  ['audit', ['audit', 'some-intent']],
  ['status', ['status', 'some-intent']],
  ['costs', ['costs']],
  ['recording', ['recording', 'some-intent']],
  ['label', ['label', 'some-intent', 'risky']],
  ['label --suggest', ['label', '--suggest']],
  ['eval', ['eval']],
  ['eval --history', ['eval', '--history']],
  ['report', ['report']],
  ['notifications', ['notifications']],
  ['ladder', ['ladder']],
  ['ledger verify', ['ledger', 'verify']],
  ['ledger export', ['ledger', 'export', '--since', '7d', '--out', path.join(home, 'no-export')]],
  // not reads, but not the commands that own the server either
  ['db migrate', ['db', 'migrate']],
  ['unlock', ['unlock', '--reason', 'x']],
])('warden %s with the embedded PostgreSQL down: one line naming how to start it, a non-zero exit, no server started', async (_name, args) => {
  const result = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8', timeout: 120_000 });
  expect(result.status).toBe(1);
  expect(result.stderr.trimEnd().split('\n')).toEqual([
    expect.stringMatching(new RegExp(`^warden: the ledger's embedded PostgreSQL \\(data in ${dataDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\) is not running: start it with \`warden dev\``)),
  ]);
  expect(result.stdout).toBe('');
  expect(existsSync(path.join(dataDir, 'pgdata', 'postmaster.pid'))).toBe(false);
  expect(await findRunningServer(dataDir)).toBeUndefined();
  expect(postgresOfHome()).toEqual([]);
});
