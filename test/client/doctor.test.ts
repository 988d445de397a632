import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { findExecutable } from '../../src/shared/executables';
import { freshDatabase, type FreshDatabase } from '../helpers/database';
import { testDatabaseUrl } from '../helpers/env';

/**
 * `warden doctor` run as a user would, as a process: on this machine (bubblewrap, the test's
 * Temporal server and PostgreSQL), and on the same machine seen without bubblewrap (a PATH that
 * holds only node and git) and with a Temporal address nothing answers at.
 */
const BIN = path.resolve(__dirname, '../../bin/warden.js');
const home = mkdtempSync(path.join(tmpdir(), 'warden-doctor-home-'));
const PLANTED_KEY = 'sk-doctor-planted-0123456789abcdef';
let database: FreshDatabase;

interface Report {
  ok: boolean;
  checks: Array<{ name: string; status: 'ok' | 'warn' | 'fail'; detail: string; fix?: string }>;
}

beforeAll(async () => {
  database = await freshDatabase(testDatabaseUrl());
});

afterAll(async () => {
  await database.drop();
});

function doctor(changes: NodeJS.ProcessEnv, ...args: string[]) {
  const env = { ...process.env, WARDEN_HOME: home, WARDEN_APPROVER_KEYS: path.join(home, 'keys'), DATABASE_URL: database.url, OPENAI_API_KEY: PLANTED_KEY, ...changes };
  const result = spawnSync(process.execPath, [BIN, 'doctor', ...args], { env, encoding: 'utf8', timeout: 120_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

const check = (report: Report, name: string) => report.checks.find((c) => c.name === name)!;

test('on a machine that can run an intent: every required check passes, exit 0, and no key is printed', () => {
  const run = doctor({}, '--json');
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  const report = JSON.parse(run.stdout) as Report;
  expect(report.ok).toBe(true);
  expect(check(report, 'sandbox')).toMatchObject({ status: 'ok' });
  expect(check(report, 'temporal')).toMatchObject({ status: 'ok', detail: expect.stringContaining(process.env.TEMPORAL_ADDRESS!) });
  expect(check(report, 'postgresql')).toMatchObject({ status: 'ok' });
  expect(check(report, 'git')).toMatchObject({ status: 'ok' });
  expect(check(report, 'provider keys')).toMatchObject({ status: 'ok', detail: expect.stringContaining('OPENAI_API_KEY') });
  const text = doctor({});
  expect(text.code).toBe(0);
  expect(text.stdout).toMatch(/^ok +sandbox +bubblewrap works here/m);
  expect(text.stdout).toMatch(/an intent can run here/);
  expect(`${run.stdout}${text.stdout}`).not.toContain(PLANTED_KEY);
});

test('without bubblewrap, doctor names the fix and exits non-zero', () => {
  const bin = path.join(mkdtempSync(path.join(tmpdir(), 'warden-doctor-path-')), 'bin');
  mkdirSync(bin);
  for (const program of ['git', 'node']) symlinkSync(findExecutable(program)!, path.join(bin, program));
  const run = doctor({ PATH: bin });
  expect(run.code).toBe(1);
  expect(run.stdout).toMatch(/^FAIL +sandbox +bubblewrap is not installed/m);
  expect(run.stdout).toMatch(/fix: .*bubblewrap.*apt-get install bubblewrap/);
  expect(run.stdout).toMatch(/an intent cannot run here until the FAIL lines are fixed/);
});

test('a Temporal address nothing answers at fails the temporal check, naming the address', async () => {
  const run = doctor({ TEMPORAL_ADDRESS: '127.0.0.1:1' }, '--json');
  expect(run.code).toBe(1);
  const report = JSON.parse(run.stdout) as Report;
  expect(check(report, 'temporal')).toMatchObject({ status: 'fail', detail: expect.stringContaining('cannot reach 127.0.0.1:1') });
  expect(check(report, 'temporal').fix).toMatch(/TEMPORAL_ADDRESS/);
});
