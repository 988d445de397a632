import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freshDatabase, type FreshDatabase } from '../helpers/database';
import { prepareNamespace } from '../../src/runtime/temporal-cluster';
import { git, makeSampleRepo, testDatabaseUrl } from '../helpers/env';

/**
 * Warden as a user gets it: the tarball `npm pack` makes, installed into an empty folder outside
 * this checkout, run with `npx warden` against the test's Temporal server and a ledger database
 * of its own. Packing builds the compiled code (prepack) and installing fetches the dependencies
 * from the npm registry, so this file takes a few minutes.
 */
jest.setTimeout(15 * 60_000);

const ROOT = path.resolve(__dirname, '../..');
const user = mkdtempSync(path.join(tmpdir(), 'warden-user-'));
const home = path.join(user, 'warden-home');
let database: FreshDatabase;
let tarball: string;

/** `npx warden ARGS` in the user's project; in another folder (their repository), the installed bin by its path, as a global install runs. */
function npx(cwd: string, ...args: string[]) {
  const [file, prefix] = cwd === user ? ['npx', ['--no-install', 'warden']] : [path.join(user, 'node_modules', '.bin', 'warden'), []];
  const result = spawnSync(file, [...prefix, ...args], {
    cwd,
    env: { ...process.env, WARDEN_HOME: home, DATABASE_URL: database.url, WARDEN_APPROVER_KEYS: path.join(home, 'keys'), USER: 'package-user', TEMPORAL_NAMESPACE: NAMESPACE },
    encoding: 'utf8',
    timeout: 10 * 60_000,
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/**
 * A namespace of this file's own on the shared test server: its worker obeys a config with its own
 * approver key, and would refuse (rightly) the intents other files' `warden run`s start on the
 * default namespace's queue if it took them.
 */
const NAMESPACE = `package-${process.pid}`;

beforeAll(async () => {
  await prepareNamespace(process.env.TEMPORAL_ADDRESS!, NAMESPACE, () => undefined);
  database = await freshDatabase(testDatabaseUrl());
  const packs = mkdtempSync(path.join(tmpdir(), 'warden-pack-'));
  execFileSync('npm', ['pack', '--pack-destination', packs], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  tarball = path.join(packs, readdirSync(packs).find((f) => f.endsWith('.tgz'))!);
  writeFileSync(path.join(user, 'package.json'), JSON.stringify({ name: 'a-users-project', version: '1.0.0', private: true }));
  execFileSync('npm', ['install', '--no-audit', '--no-fund', tarball], { cwd: user, stdio: ['ignore', 'ignore', 'pipe'] });
});

afterAll(async () => {
  await database?.drop();
});

test('the package holds compiled code only: no sources, tests or benchmarks, and no tsx to run it', () => {
  const files = execFileSync('tar', ['tzf', tarball], { encoding: 'utf8' }).trim().split('\n');
  expect(files).toContain('package/dist/client/cli.js');
  expect(files).toContain('package/dist/ledger/migrations/001_initial.sql');
  expect(files).toContain('package/dist/safety/held-out/cascade-held-out.json');
  expect(files.filter((f) => /^package\/(src|test|bench|scenarios)\//.test(f) || f.endsWith('.ts'))).toEqual([]);
  expect(existsSync(path.join(user, 'node_modules', 'warden', 'dist', 'client', 'cli.js'))).toBe(true);
  expect(existsSync(path.join(user, 'node_modules', 'tsx'))).toBe(false);
});

test('from a folder outside the checkout: npx warden doctor passes, warden init sets up a repository, and an intent runs to a merge', () => {
  const doctor = npx(user, 'doctor', '--json');
  expect(doctor.stderr).toBe('');
  expect(doctor.code).toBe(0);
  expect(JSON.parse(doctor.stdout)).toMatchObject({ ok: true });

  // Against a shared server a decision counts only when signed: the user makes a key and lists it,
  // in the config of their project folder, where warden finds it.
  const key = npx(user, 'approver', 'init', 'package-user');
  const publicKey = /public key: (ed25519:[0-9a-f]{64})/.exec(key.stdout)?.[1];
  expect(publicKey).toBeDefined();
  writeFileSync(path.join(user, 'warden.config.json'), JSON.stringify({ limits: { cooldown: '0s' }, approvers: { 'package-user': { publicKey } }, serve: { port: 0 } }));

  const repo = makeSampleRepo();
  // warden init in the user's repository: a config that checks, its schema beside it for editors.
  const init = npx(repo, 'init');
  expect(init.code).toBe(0);
  expect(init.stdout).toMatch(/^wrote warden\.config\.json/);
  const written = readFileSync(path.join(repo, 'warden.config.json'), 'utf8');
  expect(written).toContain('"$schema": "./.warden/warden.config.schema.json"');
  expect(JSON.parse(readFileSync(path.join(repo, '.warden', 'warden.config.schema.json'), 'utf8'))).toMatchObject({ type: 'object' });
  expect(npx(repo, 'config', 'check')).toMatchObject({ code: 0 });
  const script = path.join(user, 'node_modules', 'warden', 'examples', 'demo-agent.json');
  const run = npx(user, 'run', '--repo', repo, '--goal', 'Add slugify', '--id', `package-${Date.now()}`, '--script', script, '--paths', 'lib/**', '--approve', '--json');
  expect(run.stderr.split('\n').filter((l) => l.trim() && !l.startsWith('warning: '))).toEqual([]);
  // On a failure, what the run said (its JSON outcome) is the first thing to read.
  expect({ code: run.code, stdout: run.code === 0 ? '' : run.stdout }).toEqual({ code: 0, stdout: '' });
  const result = JSON.parse(run.stdout) as { outcome: { status: string; mergedCommit: string } };
  expect(result.outcome.status).toBe('merged');
  expect(git(repo, 'rev-parse', 'main')).toBe(result.outcome.mergedCommit);
  // Its state went to the Warden home it was given, not to the folder it ran from.
  expect(existsSync(path.join(user, '.warden'))).toBe(false);
  expect(existsSync(path.join(home, 'logs'))).toBe(true);
});

test('warden eval in the installed package measures the cascade detector on the held-out sets it ships', () => {
  const result = npx(user, 'eval', '--json');
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  const { heldOut } = JSON.parse(result.stdout) as { heldOut: Array<{ set: string; n: number; tp: number; tn: number }> };
  expect(heldOut.map((f) => [f.set, f.n])).toEqual([
    ['held-out-1', 200],
    ['held-out-2', 200],
    ['held-out-3', 200],
    ['held-out-4', 200],
  ]);
  for (const f of heldOut) expect(f.tp + f.tn).toBeGreaterThan(100);
});
