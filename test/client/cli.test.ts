import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { isTemporalReachable, startDevServer, type DevServer } from '../../src/runtime/dev-server';
import { findFreePort } from '../../src/shared/ports';
import { freshDatabase, type FreshDatabase } from '../helpers/database';
import { DEMO_SCRIPT, demoScript, demoStages, git, makeSampleRepo, testDatabaseUrl, waitFor } from '../helpers/env';

/** The demo with its pauses taken out, for runs that need no time to act while the agent works. */
const FAST_SCRIPT = demoScript();
/**
 * The demo whose impl passes at its first attempt: for runs on Warden's default limits, where a
 * failed attempt waits out a 60 s cooldown before the next.
 */
const FIRST_TRY_SCRIPT = demoScript({ impl: [demoStages().impl![1]!] });
import { groupAlive } from '../../src/activities/process';
import { answeringDesignStages } from '../../src/client/sample-repo';
import { loadMigrations, migrate } from '../../src/ledger/migrate';
import { Ledger } from '../../src/ledger/ledger';
import type { SafetyEventType } from '../../src/shared/safety-events';
import { intentHandle, startIntent } from '../../src/client/intents';
import { decideSignal } from '../../src/shared/messages';
import { workflowIdForIntent } from '../../src/shared/ids';
import { WardenStage, WardenStatus } from '../../src/shared/search-attributes';
import { Client, Connection } from '@temporalio/client';
import { PRINT_HOST_GROUP } from '../helpers/processes';
import { hiddenOf, post } from '../helpers/gate-forms';
import { startReceiver } from '../helpers/webhook-receiver';

const BIN = path.resolve(__dirname, '../../bin/warden.js');
const home = mkdtempSync(path.join(tmpdir(), 'warden-cli-home-'));
const env: NodeJS.ProcessEnv = { ...process.env, WARDEN_HOME: home, WARDEN_LOG_LEVEL: 'warn', USER: 'cli-tester', WARDEN_APPROVER_KEYS: path.join(home, 'approver-keys') };
let database: FreshDatabase;

beforeAll(async () => {
  // the ledger of these CLI runs: a database of their own in the test PostgreSQL
  database = await freshDatabase(testDatabaseUrl());
  env.DATABASE_URL = database.url;
  // the scripted agent answers at once: no need for the default cooldown between impl attempts
  // cli-tester decides with a key: against this (not embedded) server unsigned decisions do not count
  const created = spawnSync(process.execPath, [BIN, 'approver', 'init', 'cli-tester'], { env, encoding: 'utf8', timeout: 60_000 });
  const publicKey = /public key: (ed25519:[0-9a-f]{64})/.exec(created.stdout)?.[1];
  if (!publicKey) throw new Error(`warden approver init printed no key: ${created.stdout}${created.stderr}`);
  const config = path.join(home, 'warden.config.json');
  // The web app warden run serves while it follows: on a free port, so parallel runs never collide.
  writeFileSync(config, JSON.stringify({ limits: { cooldown: '0s' }, approvers: { 'cli-tester': { publicKey } }, serve: { port: 0 } }));
  env.WARDEN_CONFIG = config;
});

afterAll(async () => {
  await database.drop();
});

function warden(...args: string[]) {
  return wardenWith({}, ...args);
}

/** `warden` with some variables of its environment changed (e.g. another DATABASE_URL or config). */
function wardenWith(changes: NodeJS.ProcessEnv, ...args: string[]) {
  const result = spawnSync(process.execPath, [BIN, ...args], { env: { ...env, ...changes }, encoding: 'utf8', timeout: 120_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** `warden check cascade ARGS` with `answer` on its stdin. */
function checkCascade(answer: string, ...args: string[]) {
  const result = spawnSync(process.execPath, [BIN, 'check', 'cascade', ...args], { env, encoding: 'utf8', input: answer, timeout: 120_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** A git repository with one commit and nothing that says how to run its tests. */
function repoWithoutTests(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'no-tests-'));
  execFileSync('git', ['init', '-q', '-b', 'main', dir]);
  writeFileSync(path.join(dir, 'notes.txt'), 'no tests here\n');
  execFileSync('git', ['-C', dir, 'add', '.']);
  execFileSync('git', ['-C', dir, '-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'init']);
  return dir;
}

describe('bad input gets one line naming the problem, exit code 2, and starts nothing', () => {
  const repo = makeSampleRepo();
  const cases: [string, string[], RegExp][] = [
    ['missing repo', ['--repo', '/nonexistent/repo', '--goal', 'x', '--script', DEMO_SCRIPT], /repository not found: \/nonexistent\/repo/],
    ['not a git repo', ['--repo', mkdtempSync(path.join(tmpdir(), 'plain-')), '--goal', 'x', '--script', DEMO_SCRIPT], /not a git repository/],
    ['empty goal', ['--repo', repo, '--goal', '   ', '--script', DEMO_SCRIPT], /--goal is required and must not be empty/],
    ['unknown agent', ['--repo', repo, '--goal', 'x', '--agent', 'robot'], /'robot' is invalid. Allowed choices are scripted, command/],
    ['scripted agent without a script', ['--repo', repo, '--goal', 'x', '--agent', 'scripted'], /--agent scripted needs --script FILE/],
    ['malformed script', ['--repo', repo, '--goal', 'x', '--script', writeTemp('{"stages": {"impl": [{"edits": 3}]}}')], /agent script .* is invalid: stages\.impl\.0/],
    ['script that is not JSON', ['--repo', repo, '--goal', 'x', '--script', writeTemp('not json')], /cannot read agent script/],
    ['a repo with no test command', ['--repo', repoWithoutTests(), '--goal', 'x', '--script', DEMO_SCRIPT], /no test command for .*: its main branch has no package\.json test script; give one with --test-cmd/],
    ['unknown base branch', ['--repo', repo, '--goal', 'x', '--script', DEMO_SCRIPT, '--base', 'nope'], /base branch nope does not exist/],
    ['bad intent id', ['--repo', repo, '--goal', 'x', '--script', DEMO_SCRIPT, '--id', 'has space'], /invalid intent: id: an intent id is/],
    ['a glob that does not parse', ['--repo', repo, '--goal', 'x', '--script', DEMO_SCRIPT, '--paths', '['], /^warden: --paths "\[" is not a valid glob \(Missing closing: "\]"\)$/],
    ['an absolute path glob', ['--repo', repo, '--goal', 'x', '--script', DEMO_SCRIPT, '--paths', 'src/**', '/etc/**'], /^warden: --paths "\/etc\/\*\*" is an absolute path: paths are relative to the repository root$/],
    ['a path glob reaching out of the repository', ['--repo', repo, '--goal', 'x', '--script', DEMO_SCRIPT, '--paths', '../**'], /^warden: --paths "\.\.\/\*\*" reaches outside the repository \(\.\.\)$/],
    ['a goal with a terminal escape sequence', ['--repo', repo, '--goal', 'make it \x1b[31mred', '--script', DEMO_SCRIPT], /^warden: --goal holds control characters \(\\x1b\); only newline and tab are allowed$/],
    ['a goal with a carriage return', ['--repo', repo, '--goal', 'approved\rrejected', '--script', DEMO_SCRIPT], /^warden: --goal holds control characters \(\\r\)/],
    ['bad attempt cap', ['--repo', repo, '--goal', 'x', '--script', DEMO_SCRIPT, '--impl-attempts', 'zero'], /--impl-attempts must be a positive whole number/],
    ['unknown option', ['--repo', repo, '--goal', 'x', '--script', DEMO_SCRIPT, '--aprove'], /unknown option '--aprove' .*\(see warden run --help\)/],
    ['bad sandbox choice', ['--repo', repo, '--goal', 'x', '--cmd', 'true', '--sandbox', 'jail'], /argument 'jail' is invalid/],
    ['option without its value', ['--repo', repo, '--goal'], /option '--goal <text>' argument missing/],
    ['command agent not on PATH', ['--repo', repo, '--goal', 'x', '--agent', 'command', '--cmd', 'no-such-agent-binary -p'], /--cmd runs no-such-agent-binary, which is not on PATH/],
    ['command agent path that is not there', ['--repo', repo, '--goal', 'x', '--cmd', './agents/missing.sh'], /--cmd runs \.\/agents\/missing\.sh, which is not an executable file/],
    [
      'a model with no price',
      ['--repo', repo, '--goal', 'x', '--agent', 'codex', '--model', 'some-unpriced-model'],
      /^warden: --model: no price for model "some-unpriced-model": add it to the config's worker\.pricing, e\.g\. "worker": \{ "pricing": \{ "some-unpriced-model": \{ "inputUsdPerMillion"/,
    ],
  ];
  test.each(cases)('%s', (_name, args, message) => {
    const result = warden('run', ...args);
    expect(result.code).toBe(2);
    expect(oneLine(result.stderr)).toMatch(message);
    expect(result.stdout).not.toMatch(/started intent/);
  });

  test('a worker host name that could not name a task queue', () => {
    const result = warden('worker', '--host', 'my laptop');
    expect(result.code).toBe(2);
    expect(oneLine(result.stderr)).toBe('warden: --host must be 1-64 letters, digits, dots, dashes or underscores, not "my laptop"');
    expect(result.stdout).not.toMatch(/worker running/);
  });

  test('a --limit of warden list that is not a count', () => {
    for (const limit of ['x', '0', '-3', '2.5']) {
      const result = warden('list', '--limit', limit);
      expect(result.code).toBe(2);
      expect(oneLine(result.stderr)).toBe(`warden: --limit must be a whole number from 1, not ${JSON.stringify(limit)}`);
      expect(result.stdout).toBe('');
    }
  });

  test('a goal whose bytes are not UTF-8, as a shell passes them', () => {
    // printf writes the byte 0xE9 (Latin-1 é) alone: Node decodes it as U+FFFD, which is refused rather than kept.
    const script = `exec "$0" "$1" run --repo "$2" --goal "$(printf 'fix caf\\351 menu')" --script "$3"`;
    const result = spawnSync('/bin/sh', ['-c', script, process.execPath, BIN, repo, DEMO_SCRIPT], { env, encoding: 'utf8', timeout: 120_000 });
    expect(result.status).toBe(2);
    expect(oneLine(result.stderr)).toBe('warden: --goal is not valid UTF-8 text');
    expect(result.stdout).not.toMatch(/started intent/);
  });

  test.each([
    ['run.paths', { run: { paths: ['src/**', '../**'] } }, /run\.paths\.1: "\.\.\/\*\*" reaches outside the repository \(\.\.\)/],
    ['a custom gate\'s when.paths', { customGates: [{ id: 'infra', after: 'impl', prompt: 'Infra change?', when: { paths: ['/etc/**'] } }] }, /when\.paths\.0: "\/etc\/\*\*" is an absolute path/],
  ])('a paths glob in the config file (%s) is refused the same way', (_name, content, message) => {
    const config = path.join(mkdtempSync(path.join(tmpdir(), 'paths-config-')), 'warden.config.json');
    writeFileSync(config, JSON.stringify(content));
    const result = wardenWith({ WARDEN_CONFIG: config }, 'run', '--repo', repo, '--goal', 'x', '--script', DEMO_SCRIPT);
    expect(result.code).toBe(2);
    // A config file's problems: its name, then one line per problem, each at its line and column.
    expect(result.stderr.trimEnd().split('\n')).toEqual([`warden: ${config} is invalid:`, expect.stringMatching(message)]);
    expect(result.stdout).not.toMatch(/started intent/);
  });

  test.each([
    ['missing argument', ['status'], /^warden: missing required argument 'id' \(see warden status --help\)$/],
    ['unknown command', ['stauts', 'x'], /^warden: unknown command 'stauts' \(Did you mean status\?\) \(see warden --help\)$/],
    ['bad choice', ['list', '--status', 'done'], /^warden: option '--status <status>' argument 'done' is invalid\. Allowed choices are running, waiting/],
  ])('commander: %s', (_name, args, message) => {
    const result = warden(...args);
    expect(result.code).toBe(2);
    expect(oneLine(result.stderr)).toMatch(message);
  });

  test.each([
    ['a client certificate without its key', { TEMPORAL_TLS_CLIENT_CERT_PATH: '/etc/hostname' }, /TEMPORAL_TLS_CLIENT_CERT_PATH is set but no client key/],
    ['TEMPORAL_TLS that is not a boolean', { TEMPORAL_TLS: 'maybe' }, /TEMPORAL_TLS must be true or false/],
  ])('Temporal settings: %s', (_name, extra, message) => {
    const result = spawnSync(process.execPath, [BIN, 'list'], { env: { ...env, ...extra }, encoding: 'utf8', timeout: 60_000 });
    expect(result.status).toBe(2);
    expect(oneLine(result.stderr)).toMatch(message);
  });

  test('dirty base branch', () => {
    const dirty = makeSampleRepo();
    writeFileSync(path.join(dirty, 'README.md'), 'changed\n');
    const result = warden('run', '--repo', dirty, '--goal', 'x', '--script', DEMO_SCRIPT);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/base branch main has uncommitted changes/);
    expect(git(dirty, 'branch', '--list', 'warden/*')).toBe('');
  });

  test('reject without a reason', () => {
    const result = warden('reject', 'some-intent');
    expect(result.code).toBe(2);
    expect(oneLine(result.stderr)).toMatch(/^warden: required option '--reason <text>' not specified/);
  });
});

test('--help tells each command', () => {
  const top = warden('--help');
  expect(top.code).toBe(0);
  for (const command of ['dev', 'worker', 'run', 'status', 'list', 'approve', 'reject']) expect(top.stdout).toContain(command);
  const run = warden('run', '--help');
  expect(run.code).toBe(0);
  expect(run.stdout).toMatch(/--approve/);
  expect(run.stdout).toMatch(/--detach/);
});

test('warden run --approve drives an intent to a merge; status and list report it; its id is not used again', async () => {
  const repo = makeSampleRepo();
  const id = `cli-${Date.now()}`;
  const run = warden('run', '--repo', repo, '--goal', 'Add slugify', '--id', id, '--script', FAST_SCRIPT, '--paths', 'lib/**', '--approve', '--json');
  expect(beyondWarnings(run.stderr)).toEqual([]);
  // On a failure, what the run said (its JSON outcome) is the first thing to read.
  expect({ code: run.code, stdout: run.code === 0 ? '' : run.stdout }).toEqual({ code: 0, stdout: '' });
  const result = JSON.parse(run.stdout);
  expect(result).toMatchObject({ intentId: id, kind: 'completed', outcome: { status: 'merged' } });
  expect(git(repo, 'rev-parse', 'main')).toBe(result.outcome.mergedCommit);

  // finished: how it ended comes from its history, whether or not a worker answers the state query
  const status = warden('status', id, '--json');
  expect(status.code).toBe(0);
  expect(JSON.parse(status.stdout)).toMatchObject({
    intentId: id,
    workflowStatus: 'COMPLETED',
    wardenStatus: 'merged',
    outcome: { mergedCommit: result.outcome.mergedCommit, lineagePath: path.join(home, 'lineage', id), lineageRef: `refs/warden/lineage/${id}`, spendUsd: '0.051000' },
  });
  const text = warden('status', id).stdout;
  expect(text).toMatch(new RegExp(`^${id}: merged`));
  expect(text).toContain(`merged commit: ${result.outcome.mergedCommit}`);
  expect(text).toContain(`lineage: ${path.join(home, 'lineage', id)}`);
  expect(text).toContain(`lineage ref: refs/warden/lineage/${id} (in the repository: git show refs/warden/lineage/${id}:FILE)`);
  expect(text).toMatch(/spend \$0\.05/);

  // an id is used once: the finished one is refused up front, with what to do instead
  const again = warden('run', '--repo', repo, '--goal', 'Add slugify', '--id', id, '--script', FAST_SCRIPT, '--approve');
  expect(again.code).toBe(2);
  expect(oneLine(again.stderr)).toBe(
    `warden: intent ${id} already ran (merged; workflow intent-${id}): pick another --id, or run it again from a stage with warden resume ${id} --from STAGE`,
  );
  expect(again.stdout).not.toMatch(/started intent/);

  const list = waitForList(id);
  expect(list).toEqual(expect.arrayContaining([expect.objectContaining({ intentId: id, status: 'merged', goal: 'Add slugify' })]));

  const approveAgain = warden('approve', id);
  expect(approveAgain.code).toBe(2);
  expect(approveAgain.stderr).toMatch(new RegExp(`intent ${id} is not running \\(completed\\)`));

  const unknown = warden('status', 'no-such-intent');
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toMatch(/no intent with id no-such-intent/);

  // the server itself refuses the id (reuse policy), not only the CLI's check before the start
  await withClient(async (client) => {
    const input = { id, goal: 'Add slugify', repoPath: repo, baseBranch: 'main', agent: { kind: 'scripted' as const, scriptPath: DEMO_SCRIPT } };
    await expect(startIntent(client, input)).rejects.toThrow(new RegExp(`intent ${id} already ran \\(merged`));
  });
});

async function withClient<T>(use: (client: Client) => Promise<T>): Promise<T> {
  const connection = await Connection.connect({ address: env.TEMPORAL_ADDRESS });
  try {
    return await use(new Client({ connection }));
  } finally {
    await connection.close();
  }
}

test('without a TTY, warden run prints how to decide and waits; warden reject ends it with nothing merged', async () => {
  const repo = makeSampleRepo();
  const before = git(repo, 'rev-parse', 'main');
  const id = `cli-reject-${Date.now()}`;
  const child = spawn(process.execPath, [BIN, 'run', '--repo', repo, '--goal', 'Add slugify', '--id', id, '--script', FAST_SCRIPT], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  await waitFor(() => (out.includes(`warden reject ${id}`) ? true : undefined), 180_000, 'the gate instructions');
  expect(out).toContain(`warden approve ${id} --gate merge`);

  // While it follows, warden run serves the web app: its session link opens the inbox, which lists the gate.
  const entry = /review and decide in a browser: (http:\/\/127\.0\.0\.1:\d+\/\?key=[0-9a-f]+)/.exec(out)?.[1];
  expect(entry).toBeDefined();
  const session = await fetch(entry!, { redirect: 'manual' });
  expect(session.status).toBe(303);
  const cookie = session.headers.get('set-cookie')!.split(';')[0]!;
  const inbox = await waitFor(async () => {
    const html = await (await fetch(new URL('/', entry!), { headers: { cookie } })).text();
    return html.includes(`/gates/${id}/merge`) ? html : undefined;
  }, 120_000, 'the gate in the inbox of warden run');
  expect(inbox).toContain('Waiting for a decision');

  const wrongGate = warden('approve', id, '--gate', 'Deploy!');
  expect(wrongGate.code).toBe(2);
  expect(wrongGate.stderr).toMatch(/unknown gate "Deploy!"/);
  // A name a custom gate could have: it is simply not the gate the intent waits at.
  const otherGate = warden('approve', id, '--gate', 'deploy');
  expect(otherGate.code).toBe(2);
  expect(otherGate.stderr).toContain(`intent ${id} is not waiting at the deploy gate (it is at the merge gate)`);

  // the gate in full: its review package, as JSON and as text
  const pending = await waitFor(() => {
    const shown = JSON.parse(warden('gates', id, '--json').stdout) as { gate: string; package?: { goal: string; diffSummary: Array<{ path: string }>; review?: { verdict: string } } } | null;
    return shown?.package ? shown : undefined;
  }, 120_000, 'the review package');
  expect(pending).toMatchObject({ gate: 'merge', package: { goal: 'Add slugify', diffSummary: [{ path: 'lib/strings.js' }, { path: 'lib/strings.test.js' }], review: { verdict: 'APPROVE' } } });
  const text = warden('gates', id);
  expect(text.stdout).toMatch(/Predicted vs actual: files 2 → 2/);
  expect(text.stdout).toMatch(/Ledger trace:/);

  // a decision sent from inside an agent's process is refused (and recorded), whoever it claims to be
  const fromAgent = spawnSync(process.execPath, [BIN, 'approve', id, '--by', 'cli-tester'], { env: { ...env, WARDEN_AGENT_SESSION: `${id}/impl/2` }, encoding: 'utf8', timeout: 60_000 });
  expect(fromAgent.status).toBe(2);
  expect(fromAgent.stderr).toMatch(/refused the decision: sent from inside an agent's process/);

  // the name alone, as a local process or the Web UI would send it: this server is not the embedded one, so it does not count
  await withClient((client) => intentHandle(client, id).signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'cli-tester' }));
  await waitFor(() => (/DECISION_REFUSED .*unsigned decision refused: the merge gate takes only signed decisions/.test(warden('audit', id).stdout) ? true : undefined), 120_000, 'the refusal in the ledger');
  expect(warden('status', id).stdout).toMatch(/refused: \S+ merge gate, from "cli-tester": unsigned decision refused/);
  const reject = warden('reject', id, '--reason', 'not now');
  expect(reject.code).toBe(0);
  expect(reject.stdout).toMatch(/rejected the merge gate/);
  expect(await exited).toBe(1);
  expect(out).toMatch(/rejected: not now; nothing was merged/);
  expect(git(repo, 'rev-parse', 'main')).toBe(before);
  expect(warden('audit', id).stdout).toMatch(/DECISION_REFUSED .*sent from inside an agent's process/);
});

/** A Warden command as a child in a process group of its own, output collected. */
function spawnWarden(args: string[], options: { env: NodeJS.ProcessEnv; cwd?: string }) {
  const child = spawn(process.execPath, [BIN, ...args], { env: options.env, cwd: options.cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const run = { child, out: '', exited: new Promise<number | null>((resolve) => child.on('close', resolve)) };
  child.stdout.on('data', (d: Buffer) => (run.out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (run.out += d.toString()));
  return run;
}

test("a new user's warden run --notify, with no config: the link decides as the operator, its approval merges, and the same link is refused after", async () => {
  // As on a fresh machine: no config file (none named, none in the folder), no approver, no key;
  // Warden's own Temporal server and web app on their default ports, kept by warden dev.
  const home = mkdtempSync(path.join(tmpdir(), 'warden-cli-newcomer-'));
  const fresh: NodeJS.ProcessEnv = { ...env, WARDEN_HOME: home, WARDEN_APPROVER_KEYS: path.join(home, 'approvers'), TEMPORAL_ADDRESS: '', TEMPORAL_CLI_PATH: process.env.WARDEN_TEST_CLI_PATH, USER: 'newcomer' };
  delete fresh.WARDEN_CONFIG;
  delete fresh.WARDEN_USER;
  const cwd = mkdtempSync(path.join(tmpdir(), 'warden-cli-no-config-'));
  const receiver = await startReceiver();
  const dev = spawnWarden(['dev'], { env: fresh, cwd });
  try {
    await waitFor(() => (/review and decide in a browser: http:\/\/127\.0\.0\.1:7431\//.test(dev.out) ? true : undefined), 180_000, 'warden dev to serve the web app on its default port').catch((error: Error) => {
      throw new Error(`${error.message}; warden dev printed:\n${dev.out}`);
    });
    const repo = makeSampleRepo();
    const before = git(repo, 'rev-parse', 'main');
    const id = `cli-newcomer-${Date.now()}`;
    const run = spawnWarden(['run', '--repo', repo, '--goal', 'Add slugify', '--id', id, '--script', FIRST_TRY_SCRIPT, '--notify', receiver.url('/hook')], { env: fresh, cwd });

    const told = await waitFor(() => receiver.on('/hook').find((r) => r.json.intentId === id && r.json.kind === 'gate.opened'), 120_000, 'the gate.opened notification');
    expect(told.json).toMatchObject({ gate: 'merge', linkKind: 'decide', linkNote: expect.stringMatching(/^The link decides once, as newcomer, the operator \(no approver is named for this channel\), until /) });
    const link = String(told.json.link);
    expect(link.startsWith(`http://127.0.0.1:7431/gates/${id}/merge?t=`)).toBe(true);

    // The link opens the page with the change, and says whom it decides as.
    const page = await fetch(link);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('Deciding as <strong>newcomer</strong> (from a link made for newcomer, this Warden’s operator, as no approver is named');
    expect(html).toMatch(/<h2>Files changed<\/h2><table><tr><td>lib\/strings\.js/);
    expect(html).toMatch(/<span class="add">\+.*slugify/);

    const decided = await post(link, { ...hiddenOf(html), decision: 'approve' });
    expect(decided).toMatchObject({ status: 200, text: expect.stringContaining(`The merge gate of ${id} is approved by newcomer.`) });
    expect(await run.exited).toBe(0);
    expect(run.out).toMatch(/merged [0-9a-f]{40}/);
    expect(git(repo, 'rev-parse', 'main')).not.toBe(before);

    // The same link again: it decided already, and decides nothing more; the attempt is on record.
    expect(await (await fetch(link)).text()).toContain('This link decided already (approve at ');
    const again = await post(link, { ...hiddenOf(html), decision: 'reject', reason: 'once more' });
    expect(again).toMatchObject({ status: 409, text: expect.stringContaining('is not waiting for a decision') });
    const { rows } = await database.pool.query("SELECT reason FROM safety_events WHERE event_type = 'DECISION_LINK_REFUSED' AND intent_id = $1", [id]);
    expect(rows).toEqual([{ reason: 'a decision from a link for the merge gate, which is not waiting (the intent is merged): nothing was decided' }]);
    const decisions = await database.pool.query("SELECT decision, decided_by FROM gate_decisions WHERE intent_id = $1 AND gate = 'merge'", [id]);
    expect(decisions.rows).toEqual([{ decision: 'approve', decided_by: 'newcomer' }]);
  } finally {
    process.kill(-dev.child.pid!, 'SIGINT');
    await dev.exited;
    await receiver.close();
  }
}, 300_000);

/** `warden run …` as a child in a process group of its own (as a terminal runs it), output collected. */
function follow(args: string[], extraEnv: NodeJS.ProcessEnv = {}) {
  const child = spawn(process.execPath, [BIN, 'run', ...args], { env: { ...env, ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const run = { child, out: '', exited: new Promise<number | null>((resolve) => child.on('close', resolve)) };
  child.stdout.on('data', (d: Buffer) => (run.out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (run.out += d.toString()));
  return run;
}

test('--approve answers the merge gate only: a production gate still waits for a person', async () => {
  const repo = makeSampleRepo();
  const id = `cli-prod-${Date.now()}`;
  const run = follow(['--repo', repo, '--goal', 'Add slugify', '--id', id, '--script', FAST_SCRIPT, '--env', 'production', '--approve']);
  await waitFor(() => (run.out.includes(`warden approve ${id} --gate production`) ? true : undefined), 180_000, 'the production gate instructions');
  expect(run.out).not.toMatch(/approved the production gate/);
  expect(JSON.parse(warden('gates', id, '--json').stdout)).toMatchObject({ gate: 'production', humanOnly: true });
  expect(warden('approve', id, '--gate', 'production').code).toBe(0);
  expect(await run.exited).toBe(0);
  expect(run.out).toMatch(/approved the merge gate as cli-tester \(--approve\)/);
  expect(run.out).toMatch(/merged [0-9a-f]{40}/);
  expect(warden('run', '--help').stdout.replace(/\s+/g, ' ')).toContain('--approve approve the merge gate without asking (any other gate is asked at a TTY, or waited on)');
});

describe('Ctrl-C while following', () => {
  test('the first one stops following, the intent goes on; the command stops what it started and says how to go on (exit 3)', async () => {
    // its own WARDEN_HOME and no DATABASE_URL: the command starts an embedded PostgreSQL of its own
    const ownHome = mkdtempSync(path.join(tmpdir(), 'warden-cli-sigint-'));
    const repo = makeSampleRepo();
    const id = `cli-sigint-${Date.now()}`;
    const run = follow(['--repo', repo, '--goal', 'Add slugify', '--id', id, '--script', DEMO_SCRIPT], { WARDEN_HOME: ownHome, DATABASE_URL: '' });
    await waitFor(() => (run.out.includes(`warden reject ${id}`) ? true : undefined), 120_000, 'the gate instructions');
    const postgresPid = Number(readFileSync(path.join(ownHome, 'postgres', 'pgdata', 'postmaster.pid'), 'utf8').split('\n')[0]);
    expect(processAlive(postgresPid)).toBe(true);

    process.kill(-run.child.pid!, 'SIGINT'); // the whole group, as a terminal's Ctrl-C
    expect(await run.exited).toBe(3);
    expect(run.out).toContain(`stopped following intent ${id}; the intent itself goes on (stage review, waiting at the merge gate)`);
    expect(run.out).toContain(`approve: warden approve ${id} --gate merge`);
    expect(run.out).toContain(`stop it: warden stop ${id} --reason`);
    expect(run.out).not.toMatch(/Failed to/);
    // nothing it started outlives it
    expect(groupAlive(run.child.pid!)).toBe(false);
    await waitFor(() => (processAlive(postgresPid) ? undefined : true), 120_000, 'its embedded PostgreSQL to stop');

    // the intent is still there, waiting; a worker (with the same home: its worktree is there) and a decision finish it
    const worker = spawn(process.execPath, [BIN, 'worker'], { env: { ...env, WARDEN_HOME: ownHome, DATABASE_URL: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let workerOut = '';
    worker.stdout.on('data', (d: Buffer) => (workerOut += d.toString()));
    worker.stderr.on('data', (d: Buffer) => (workerOut += d.toString()));
    const workerExited = new Promise<number | null>((resolve) => worker.on('close', resolve));
    try {
      await waitFor(() => (workerOut.includes('worker running') ? true : undefined), 180_000, 'the worker to start');
      const approve = warden('approve', id);
      expect(approve.stderr).toBe('');
      expect(approve.code).toBe(0);
      // status reads the intent's ledger: the embedded PostgreSQL of its home, which the worker runs
      const ownLedger = { WARDEN_HOME: ownHome, DATABASE_URL: '' };
      const status = await waitFor(() => {
        const shown = JSON.parse(wardenWith(ownLedger, 'status', id, '--json').stdout) as { wardenStatus: string; decisions: unknown[] };
        return shown.wardenStatus === 'merged' ? shown : undefined;
      }, 120_000, 'the intent to merge');
      // the decision from the ledger, signed as it was sent
      expect(status.decisions).toEqual([expect.objectContaining({ gate: 'merge', decision: 'approve', by: 'cli-tester', signed: true })]);
      expect(wardenWith(ownLedger, 'status', id).stdout).toMatch(/decision: merge gate: approve by cli-tester \(signed\) at /);
    } finally {
      worker.kill('SIGTERM');
      await workerExited;
    }
  });
});

test('warden status of a failed intent says why it failed and the stage it reached', () => {
  const repo = makeSampleRepo();
  const id = `cli-failed-${Date.now()}`;
  const run = warden('run', '--repo', repo, '--goal', 'Add slugify', '--id', id, '--script', FAST_SCRIPT, '--impl-attempts', '1');
  expect(run.code).toBe(1);
  const status = JSON.parse(warden('status', id, '--json').stdout) as Record<string, unknown>;
  expect(status).toMatchObject({ workflowStatus: 'FAILED', wardenStatus: 'failed', stage: 'impl', failure: expect.stringMatching(/^MAX_ITERATIONS_EXCEEDED: stage impl/) });
  const text = warden('status', id).stdout.split('\n');
  expect(text[0]).toBe(`${id}: failed (stage impl)`);
  expect(text[1]).toMatch(/^ {2}why: MAX_ITERATIONS_EXCEEDED: stage impl: attempt 2 would exceed the cap of 1/);
  expect(warden('run', '--repo', repo, '--goal', 'x', '--id', id, '--script', FAST_SCRIPT).stderr).toMatch(
    new RegExp(`intent ${id} already ran \\(failed; .*warden resume ${id} --from STAGE`),
  );
});

test('an intent that ended, merged or failed, shows its stage, spend, decisions and where its lineage is, with no worker running', async () => {
  const merged = { repo: makeSampleRepo(), id: `cli-ended-${Date.now()}` };
  expect(warden('run', '--repo', merged.repo, '--goal', 'Add slugify', '--id', merged.id, '--script', FAST_SCRIPT, '--paths', 'lib/**', '--approve').code).toBe(0);
  const failed = { repo: makeSampleRepo(), id: `cli-ended-failed-${Date.now()}` };
  expect(warden('run', '--repo', failed.repo, '--goal', 'Add slugify', '--id', failed.id, '--script', FAST_SCRIPT, '--impl-attempts', '1').code).toBe(1);

  // Each run's worker lived in its own process, now exited. The server may list such a worker as
  // a poller for a minute after it went: none of the processes it lists is alive.
  const { pollers } = await withClient((client) => client.workflowService.describeTaskQueue({ namespace: 'default', taskQueue: { name: 'warden' }, taskQueueType: 1 }));
  const listed = (pollers ?? []).map((poller) => poller.identity ?? '');
  expect(listed.filter((identity) => !/^\d+@/.test(identity) || processAlive(Number(identity.split('@')[0])))).toEqual([]);

  const mergedStatus = warden('status', merged.id);
  expect(mergedStatus.code).toBe(0);
  expect(mergedStatus.stdout.split('\n')[0]).toBe(`${merged.id}: merged`);
  expect(mergedStatus.stdout).toContain('  attempts {"triage":1,"lld":1,"spec":1,"impl":2,"review":1,"merge":1}, spend $0.05\n');
  expect(mergedStatus.stdout).toMatch(/\n {2}decision: merge gate: approve by cli-tester \(signed\) at \S+\n/);
  // The lineage stays out of the base branch: the worker's copy, and the repository's ref.
  expect(mergedStatus.stdout).toContain(`\n  lineage: ${path.join(home, 'lineage', merged.id)}\n`);
  expect(mergedStatus.stdout).toContain(`\n  lineage ref: refs/warden/lineage/${merged.id} (in the repository: git show refs/warden/lineage/${merged.id}:FILE)\n`);
  expect(mergedStatus.stdout).not.toMatch(/note:/);

  // A failed intent kept its lineage where the ledger's INTENT_FAILED row says; status and audit show that place.
  const recorded = await database.pool.query<{ lineage: string }>("SELECT metadata->>'lineagePath' AS lineage FROM safety_events WHERE intent_id = $1 AND event_type = 'INTENT_FAILED'", [failed.id]);
  const lineage = recorded.rows[0]?.lineage;
  expect(lineage).toEqual(expect.stringContaining(failed.id));
  const failedStatus = JSON.parse(warden('status', failed.id, '--json').stdout) as Record<string, unknown>;
  expect(failedStatus).toMatchObject({ wardenStatus: 'failed', workflowStatus: 'FAILED', stage: 'impl', spendUsd: '0.031000', lineagePath: lineage, decisions: [] });
  const failedText = warden('status', failed.id).stdout;
  expect(failedText.split('\n')[0]).toBe(`${failed.id}: failed (stage impl)`);
  expect(failedText).toContain('  attempts {"triage":1,"lld":1,"spec":1,"impl":2}, spend $0.03\n');
  expect(failedText).toMatch(/\n {2}tests: impl attempt 1: tests failed/);
  expect(failedText).toContain(`\n  lineage: ${lineage}\n`);

  const mergedAudit = warden('audit', merged.id).stdout.trimEnd().split('\n');
  expect(mergedAudit.filter((line) => / STAGE_STARTED \[/.test(line))).toHaveLength(7);
  expect(mergedAudit.findIndex((line) => line.includes(' GATE_REQUESTED '))).toBeLessThan(mergedAudit.findIndex((line) => line.includes(' GATE_DECISION: merge gate: approve by cli-tester')));
  expect(mergedAudit.slice(-2)).toEqual(['total spend: $0.051000 over 6 agent calls', `lineage: ${path.join(home, 'lineage', merged.id)}`]);
  const failedAudit = warden('audit', failed.id).stdout.trimEnd().split('\n');
  expect(failedAudit.filter((line) => / STAGE_STARTED \[/.test(line)).map((line) => /\[(\w+)\]/.exec(line)![1])).toEqual(['triage', 'lld', 'spec', 'impl', 'impl']);
  expect(failedAudit.slice(-2)).toEqual(['total spend: $0.031000 over 4 agent calls', `lineage: ${lineage}`]);
});

test('warden audit lists a gate\'s request before its decision, though the decision was stamped earlier: the ledger\'s order, not the clocks\'', async () => {
  await migrate(database.pool);
  const ledger = new Ledger(database.pool);
  const id = `cli-order-${Date.now()}`;
  const at = (ms: number) => new Date(Date.UTC(2031, 0, 1, 12, 0, 0, ms));
  const event = (eventType: SafetyEventType, ms: number, reason: string, details: { stage?: string; metadata?: Record<string, unknown> } = {}) =>
    ledger.audit.recordSafetyEvent({ id: randomUUID(), timestamp: at(ms), eventType, severity: 'info', reason, intentId: id, ...details });
  await event('INTENT_STARTED', 0, 'Add slugify');
  await event('GATE_REQUESTED', 500, 'Merge?', { stage: 'review', metadata: { gate: 'merge' } });
  // accepted while the workflow was still writing the request
  await ledger.audit.recordGateDecision({ id: randomUUID(), intentId: id, gate: 'merge', decision: 'approve', by: 'cli-tester', requestedAt: at(200), decidedAt: at(300), timedOut: false });
  const audit = warden('audit', id);
  expect(audit.code).toBe(0);
  expect(audit.stdout.split('\n').slice(0, 3)).toEqual([
    `${at(0).toISOString()} safety   INTENT_STARTED: Add slugify`,
    `${at(500).toISOString()} safety   GATE_REQUESTED [review]: Merge?`,
    `${at(300).toISOString()} gate     GATE_DECISION: merge gate: approve by cli-tester`,
  ]);
});

test('text an intent or an agent wrote reaches the terminal with its escape sequences shown, never sent: list, status, audit', async () => {
  // Such a goal is refused at warden run now; one that got in another way (an older Warden, a start by hand) is still shown safely.
  const id = `cli-escape-${Date.now()}`;
  const goal = 'make it \x1b[31mred\x1b]0;pwned\x07\r\u009b2J\nsecond line';
  await withClient(async (client) => {
    // On a task queue no worker polls: it stays as started.
    await client.workflow.start('intentWorkflow', {
      taskQueue: `nobody-${id}`,
      workflowId: workflowIdForIntent(id),
      args: [{ id, goal }],
      memo: { goal },
      typedSearchAttributes: [
        { key: WardenStatus, value: 'running' },
        { key: WardenStage, value: 'triage' },
      ],
    });
  });
  await migrate(database.pool);
  const ledger = new Ledger(database.pool);
  await ledger.audit.recordSafetyEvent({ id: randomUUID(), timestamp: new Date(), eventType: 'INTENT_STARTED', severity: 'info', reason: goal, intentId: id });
  await ledger.audit.recordSafetyEvent({ id: randomUUID(), timestamp: new Date(), eventType: 'STAGE_STARTED', severity: 'info', reason: 'the agent said \x1b[2J\x1b[H all clear', intentId: id, stage: 'triage' });
  /** Control characters other than the line ends the command itself writes. */
  // eslint-disable-next-line no-control-regex -- looking for control characters
  const raw = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;
  try {
    const list = await waitFor(() => {
      const listed = warden('list', '--limit', '500');
      return listed.stdout.includes(id) ? listed : undefined;
    }, 60_000, 'the intent in warden list');
    expect(list.stdout).not.toMatch(raw);
    // one row, the goal's escapes and newline written out
    expect(list.stdout.split('\n').find((line) => line.startsWith(id))).toMatch(/ make it \\x1b\[31mred\\x1b\]0;pwned\\x07\\r\\x9b2J\\nsecond line$/);
    // JSON keeps the value, escaped as JSON
    expect(warden('list', '--limit', '500', '--json').stdout).not.toMatch(raw);

    const audit = warden('audit', id);
    expect(audit.code).toBe(0);
    expect(audit.stdout).not.toMatch(raw);
    expect(audit.stdout).toContain('INTENT_STARTED: make it \\x1b[31mred');
    expect(audit.stdout).toContain('the agent said \\x1b[2J\\x1b[H all clear');

    const status = warden('status', id);
    expect(status.code).toBe(0);
    expect(status.stdout).not.toMatch(raw);
  } finally {
    await withClient((client) => intentHandle(client, id).terminate('test over'));
  }
});

describe('warden run --detach refuses what a worker would refuse: one line, exit 2, nothing started', () => {
  test.each([
    ['--sandbox process without the opt-in', ['--sandbox', 'process'], /^warden: the triage agent \(command\) would run at sandbox 'process', outside bubblewrap, .* It was not started: use sandbox 'auto' or 'bubblewrap', or accept that with --allow-unconfined-code/],
    ['--sandbox none without the opt-in', ['--sandbox', 'none'], /^warden: the triage agent \(command\) would run at sandbox 'none', outside bubblewrap/],
  ])('%s', async (_name, flags, message) => {
    const id = `cli-detach-refused-${randomUUID().slice(0, 8)}`;
    const result = warden('run', '--repo', makeSampleRepo(), '--goal', 'x', '--id', id, '--agent', 'command', '--cmd', 'true', ...flags, '--detach');
    expect(result.code).toBe(2);
    expect(oneLine(result.stderr)).toMatch(message);
    expect(result.stdout).not.toMatch(/started intent/);
    await withClient(async (client) => {
      await expect(intentHandle(client, id).describe()).rejects.toMatchObject({ name: 'WorkflowNotFoundError' });
    });
  });
});

test('a Temporal server without Warden\'s search attributes: warden run names them and the command that registers them', async () => {
  const port = await findFreePort();
  const address = `127.0.0.1:${port}`;
  const cli = process.env.WARDEN_TEST_CLI_PATH!;
  const server = spawn(cli, ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(port), '--headless', '--log-level', 'error'], { stdio: 'ignore' });
  const serverExited = new Promise((resolve) => server.on('close', resolve));
  try {
    await waitFor(async () => ((await isTemporalReachable(address)) ? true : undefined), 120_000, 'a plain dev server');
    const bare = { ...env, TEMPORAL_ADDRESS: address };
    const args = ['run', '--repo', makeSampleRepo(), '--goal', 'x', '--id', `cli-nosa-${Date.now()}`, '--script', DEMO_SCRIPT, '--detach'];
    const refused = spawnSync(process.execPath, [BIN, ...args], { env: bare, encoding: 'utf8', timeout: 60_000 });
    expect(refused.status).toBe(2);
    const line = oneLine(refused.stderr);
    expect(line).toMatch(/the Temporal namespace default lacks Warden's search attributes WardenStage, WardenStatus, WardenGate, WardenRepo: register them once with: /);
    // the commands it gives work
    const commands = line.slice(line.indexOf('temporal operator')).split(' && ');
    expect(commands).toHaveLength(4);
    for (const command of commands) {
      const [, ...words] = command.split(' ');
      const created = spawnSync(cli, [...words, '--address', address], { encoding: 'utf8' });
      expect(created.stderr).toBe('');
    }
    // the server takes a moment to see attributes it has just added
    const started = await waitFor(() => {
      const attempt = spawnSync(process.execPath, [BIN, ...args], { env: bare, encoding: 'utf8', timeout: 60_000 });
      return attempt.status === 0 || !/lacks Warden's search attribute/.test(attempt.stderr) ? attempt : undefined;
    }, 120_000, 'the start to be accepted');
    expect(started.stderr).toBe('');
    expect(started.status).toBe(0);
    expect(started.stdout).toMatch(/started intent cli-nosa-/);
  } finally {
    server.kill('SIGTERM');
    await serverExited;
  }
});

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('warden ladder shows each profile\'s level and what the next needs; ladder set pins one', () => {
  const repo = makeSampleRepo();
  const id = `cli-ladder-${Date.now()}`;
  expect(warden('run', '--repo', repo, '--goal', 'Add slugify', '--id', id, '--script', FAST_SCRIPT, '--agent-name', 'ladder-cli', '--approve', '--json').code).toBe(0);
  const shown = JSON.parse(warden('ladder', '--agent', 'ladder-cli', '--json').stdout) as Array<Record<string, unknown>>;
  expect(shown).toEqual([
    expect.objectContaining({ agent: 'ladder-cli', level: 0, pinned: false, metrics: expect.objectContaining({ totalRuns: 1, successfulRuns: 1 }), next: { level: 1, name: 'AI Suggests', needs: ['runs 1 < 10'] } }),
  ]);
  const set = warden('ladder', 'set', 'L3', '--agent', 'ladder-cli', '--reason', 'proven elsewhere');
  expect(set.code).toBe(0);
  expect(set.stdout).toMatch(/^ladder-cli: L3 AI Autonomous \(pinned\)/);
  expect(warden('ladder').stdout).toMatch(/ladder-cli: L3/);
  expect(warden('ladder', 'set', '7', '--agent', 'ladder-cli').stderr).toMatch(/a level is 0-4/);
  expect(warden('audit', id).stdout).toMatch(/RISK_ASSESSED/);
});

function waitForList(id: string): Array<Record<string, unknown>> {
  // visibility is eventually consistent: give it a few tries
  for (let i = 0; i < 20; i++) {
    const list = warden('list', '--json');
    const rows = JSON.parse(list.stdout) as Array<Record<string, unknown>>;
    if (rows.some((r) => r.intentId === id && r.status === 'merged')) return rows;
    spawnSync('sleep', ['0.5']);
  }
  return JSON.parse(warden('list', '--json').stdout);
}

/** Stderr lines other than the worker's one-line warnings (e.g. a behaviour monitor finding): errors, stack traces. */
function beyondWarnings(stderr: string): string[] {
  return stderr.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('warning: '));
}

/** The one line of an error: fails when there is more than one. */
function oneLine(stderr: string): string {
  const lines = stderr.split('\n').filter((l) => l.trim() !== '');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^warden: /);
  return lines[0]!;
}

function writeTemp(content: string): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'script-')), 'script.json');
  writeFileSync(file, content);
  return file;
}

test('the ledger commands read what an intent wrote: audit, costs, report, cleanup', () => {
  const repo = makeSampleRepo();
  const id = `cli-ledger-${Date.now()}`;
  expect(warden('run', '--repo', repo, '--goal', 'Add slugify', '--id', id, '--script', FAST_SCRIPT, '--approve', '--json').code).toBe(0);

  const audit = warden('audit', id, '--json');
  expect(audit.code).toBe(0);
  const timeline = JSON.parse(audit.stdout) as Array<{ type: string }>;
  expect(timeline[0]!.type).toBe('INTENT_STARTED');
  expect(timeline.at(-1)!.type).toBe('INTENT_MERGED');
  expect(timeline.filter((e) => e.type === 'COST')).toHaveLength(6);
  const text = warden('audit', id);
  expect(text.stdout).toMatch(/GATE_DECIDED \[review\]: merge gate: approve by cli-tester/);
  // Stage starts, each impl attempt's test result (the demo's first attempt fails its tests), and the total.
  const lines = text.stdout.trimEnd().split('\n');
  expect(lines.filter((line) => / STAGE_STARTED \[/.test(line)).map((line) => /\[(\w+)\]: (.*)$/.exec(line)!.slice(1).join(' '))).toEqual([
    'triage triage attempt 1',
    'lld lld attempt 1',
    'spec spec attempt 1',
    'impl impl attempt 1',
    'impl impl attempt 2',
    'review review attempt 1',
    'merge merge attempt 1',
  ]);
  expect(text.stdout).toMatch(/ TESTS_FAILED \[impl\] \(medium\): impl attempt 1: tests /);
  expect(text.stdout).toMatch(/ TESTS_PASSED \[impl\]: impl attempt 2: tests /);
  expect(lines.findIndex((line) => line.includes('TESTS_FAILED'))).toBeLessThan(lines.findIndex((line) => line.includes('impl attempt 2')));
  expect(lines.slice(-2)).toEqual(['total spend: $0.051000 over 6 agent calls', `lineage: ${path.join(home, 'lineage', id)}`]);
  // --activities adds the worker's record of each activity attempt.
  const activities = JSON.parse(warden('audit', id, '--activities', '--json').stdout) as Array<{ kind: string; type: string; stage?: string; summary: string }>;
  expect(activities.filter((e) => e.kind === 'activity' && e.type === 'runAgentStage').map((e) => e.stage)).toEqual(['triage', 'lld', 'spec', 'impl', 'impl', 'review']);
  expect(activities.filter((e) => e.kind === 'activity' && e.type === 'runTests').map((e) => e.summary)).toEqual([
    expect.stringMatching(/^attempt 1 completed after /),
    expect.stringMatching(/^attempt 1 completed after /),
  ]);
  expect(warden('audit', id, '--activities').stdout).toMatch(/ activity runAgentStage \[impl\]( \$\d+\.\d{6})?: attempt 1 completed after \d+\.\d s/);
  const prompts = warden('audit', id, '--prompts');
  expect(prompts.stdout).toContain(`prompts of ${id}, from refs/warden/lineage/${id} in ${repo}:`);
  expect(prompts.stdout).toMatch(/===== 01-triage\.prompt\.md =====\n# Warden: triage \(attempt 1\)/);
  expect(prompts.stdout).toMatch(/===== 04-impl-attempt-2\.prompt\.md =====[\s\S]*## Result of the previous attempt/);
  expect(JSON.parse(warden('audit', id, '--prompts', '--json').stdout)).toHaveLength(6);

  const costs = JSON.parse(warden('costs', '--by', 'stage', '--json').stdout) as { rows: Array<{ key: string; usd: string }>; totalUsd: string };
  expect(costs.rows.find((r) => r.key === 'impl')?.usd).toMatch(/^\d+\.\d{6}$/);
  const byIntent = JSON.parse(warden('costs', '--by', 'intent', '--json').stdout) as { rows: Array<{ key: string; usd: string }> };
  expect(byIntent.rows.find((r) => r.key === id)?.usd).toBe('0.051000');

  const report = JSON.parse(warden('report', '--budget', '10', '--json').stdout) as { health: string; rule: string; layers: { limits: { budgetUsd: string } } };
  expect(report.health).toBe('GREEN');
  expect(report.rule).toMatch(/RED if/);
  expect(report.layers.limits.budgetUsd).toBe('10');
  const today = warden('report');
  expect(today.stdout).toMatch(/### Overall Health: GREEN/);
  // Without --budget: the config's worker.dayBudgetUsd (the default profile's $200); 0 is no limit.
  expect(today.stdout).toMatch(/- Budget remaining: \$\d+\.\d{6} \(\d+(\.\d)?%\) of \$200\n/);
  expect(today.stdout).toMatch(/- State snapshots: OK \(lineage kept for \d+ of \d+ intents that ended/);
  const tight = path.join(home, 'tight.config.json');
  writeFileSync(tight, JSON.stringify({ limits: { cooldown: '0s' }, worker: { dayBudgetUsd: '0.01' } }));
  const over = JSON.parse(wardenWith({ WARDEN_CONFIG: tight }, 'report', '--json').stdout) as { health: string; rule: string };
  expect(over).toMatchObject({ health: 'RED', rule: expect.stringMatching(/over the \$0\.01 budget/) });
  const unlimited = path.join(home, 'unlimited.config.json');
  writeFileSync(unlimited, JSON.stringify({ limits: { cooldown: '0s' }, worker: { dayBudgetUsd: '0' } }));
  const free = wardenWith({ WARDEN_CONFIG: unlimited }, 'report');
  expect(free.stdout).toMatch(/- Budget remaining: unlimited/);
  expect(free.stdout).toMatch(/### Overall Health: GREEN/);

  // Gate statistics and breaker history over a period: the intent's merge gate, approved by cli-tester.
  const stats = JSON.parse(warden('report', '--gates', '--breakers', '--since', '1d', '--json').stdout) as {
    gates: { since: string; until: null; byApprover: Array<{ approver: string; decided: number; approved: number }> };
    breakers: { changes: unknown[]; rateLimits: unknown[] };
  };
  expect(stats.gates.until).toBeNull();
  expect(stats.gates.byApprover.find((a) => a.approver === 'cli-tester')).toMatchObject({ decided: expect.any(Number), approved: expect.any(Number) });
  expect(stats.gates.byApprover.find((a) => a.approver === 'cli-tester')!.approved).toBeGreaterThanOrEqual(1);
  expect(stats.breakers).toEqual({ since: stats.gates.since, until: null, changes: expect.any(Array), rateLimits: expect.any(Array) });
  const statsText = warden('report', '--gates', '--since', '1d').stdout;
  expect(statsText).toMatch(/^## Gate statistics from \S+ to now$/m);
  expect(statsText).toMatch(/^cli-tester +-? +\d+ +\d+\.\d%/m);
  expect(warden('report', '--breakers', '--until', new Date().toISOString().slice(0, 10)).stdout).toMatch(/^### Rate-limit refusals$/m);
  // A period goes with --gates / --breakers, and the daily report's flags do not.
  for (const args of [['--since', '1d'], ['--gates', '--date', '2026-01-01'], ['--gates', '--until', 'soon'], ['--breakers', '--since', '1d', '--until', '2d']]) {
    const refused = warden('report', ...args);
    expect([refused.code, refused.stderr.trimEnd().split('\n')]).toEqual([2, [expect.stringMatching(/^warden: --(since|date|until)/)]]);
  }

  const cleanup = warden('db', 'cleanup', '--retention', '90d', '--json');
  expect(cleanup.code).toBe(0);
  expect(JSON.parse(cleanup.stdout)).toMatchObject({ retentionDays: 90, deleted: { safety_events: 0, cost_events: 0 } });
  expect(JSON.parse(warden('audit', id, '--json').stdout)).toHaveLength(timeline.length); // nothing recent was deleted

  expect(warden('db', 'migrate').stdout).toMatch(/up to date/);
});

test('warden audit --with-history ties each ledger row of a real intent to its workflow history', async () => {
  const repo = makeSampleRepo();
  const id = `cli-history-${Date.now()}`;
  expect(warden('run', '--repo', repo, '--goal', 'Add slugify', '--id', id, '--script', FAST_SCRIPT, '--approve', '--json').code).toBe(0);
  const audit = warden('audit', id, '--with-history', '--json');
  expect(audit.code).toBe(0);
  type Entry = { kind: string; type: string; at: string; runId: string | null; activityId: string | null; history: { runId: string; eventId: number; eventType: string } | null };
  const entries = JSON.parse(audit.stdout) as Entry[];
  const events = await withClient(async (client) => (await client.workflow.getHandle(workflowIdForIntent(id)).fetchHistory()).events ?? []);
  const runId = await withClient(async (client) => (await client.workflow.getHandle(workflowIdForIntent(id)).describe()).runId);
  const byId = new Map(events.map((event) => [Number(event.eventId), event]));

  // Every row of this intent is tied, to its one run.
  expect(entries.filter((e) => !e.history)).toEqual([]);
  expect(new Set(entries.map((e) => e.history!.runId))).toEqual(new Set([runId]));
  // A row an activity wrote (its run, an agent's costs, the safety layers' events) is tied to the event that
  // scheduled that activity: ActivityTaskScheduled, or a local activity's marker.
  const activityIdOf = (event: (typeof events)[number]): string | undefined =>
    event.activityTaskScheduledEventAttributes?.activityId ??
    (JSON.parse(Buffer.from(event.markerRecordedEventAttributes!.details!.data!.payloads![0]!.data!).toString('utf8')) as { activity_id: string }).activity_id;
  const written = entries.filter((e) => e.activityId !== null);
  expect(written.filter((e) => e.kind === 'activity').length).toBeGreaterThan(5);
  expect(written.filter((e) => e.kind === 'cost')).toHaveLength(6);
  expect(new Set(written.map((e) => e.history!.eventType))).toEqual(new Set(['ActivityTaskScheduled', 'MarkerRecorded']));
  for (const e of written) expect(activityIdOf(byId.get(e.history!.eventId)!)).toBe(e.activityId);
  for (const e of written.filter((w) => w.history!.eventType === 'ActivityTaskScheduled' && w.kind === 'activity')) {
    expect(byId.get(e.history!.eventId)!.activityTaskScheduledEventAttributes!.activityType!.name).toBe(e.type);
  }
  // A row the workflow wrote is tied to the start of the workflow task that recorded it, and those
  // tasks come in the order the ledger received the rows.
  const recorded = entries.filter((e) => e.activityId === null);
  expect(recorded.map((e) => e.type)).toEqual(expect.arrayContaining(['INTENT_STARTED', 'STAGE_STARTED', 'GATE_REQUESTED', 'GATE_DECISION', 'GATE_DECIDED', 'INTENT_MERGED']));
  for (const e of recorded) {
    expect(e.history!.eventType).toBe('WorkflowTaskStarted');
    expect(byId.get(e.history!.eventId)!.workflowTaskStartedEventAttributes).toBeTruthy();
  }
  const taskIds = recorded.map((e) => e.history!.eventId);
  expect(taskIds).toEqual([...taskIds].sort((a, b) => a - b));
  // The merge activity was scheduled before the task that recorded INTENT_MERGED started.
  const merged = recorded.find((e) => e.type === 'INTENT_MERGED')!.history!.eventId;
  const mergeScheduled = events.find((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'mergeIntent');
  expect(Number(mergeScheduled!.eventId)).toBeLessThan(merged);

  const text = warden('audit', id, '--with-history').stdout.trimEnd().split('\n');
  expect(text.find((line) => line.includes('INTENT_MERGED'))).toMatch(new RegExp(`^run ${runId.slice(0, 8)} #\\d+ WorkflowTaskStarted +\\| \\S+ safety +INTENT_MERGED`));
  expect(text.at(-1)).toBe(`${entries.length} of ${entries.length} rows tied to the workflow history`);
});

test('warden db migrate reports the migrations it applied to a fresh database', async () => {
  const fresh = await freshDatabase(testDatabaseUrl());
  try {
    const first = wardenWith({ DATABASE_URL: fresh.url }, 'db', 'migrate', '--json');
    expect(first.code).toBe(0);
    expect(JSON.parse(first.stdout).applied).toEqual((await loadMigrations()).map((m) => m.name));
    const again = wardenWith({ DATABASE_URL: fresh.url }, 'db', 'migrate');
    expect(again.stdout).toBe('the ledger schema is up to date\n');
  } finally {
    await fresh.drop();
  }
});

describe('bad input to the ledger commands gets one line and exit code 2', () => {
  const cases: [string, string[], string][] = [
    ['an unknown intent', ['audit', 'never-ran'], 'the ledger has nothing for intent never-ran'],
    ['an unknown intent, as JSON', ['audit', 'never-ran', '--json'], 'the ledger has nothing for intent never-ran'],
    ['a --since that is neither', ['costs', '--since', 'yesterday'], '--since takes a date (YYYY-MM-DD) or a duration such as 7d, not yesterday'],
    ['a --since day that does not exist', ['costs', '--since', '2025-02-30'], '--since takes a date (YYYY-MM-DD) or a duration such as 7d, not 2025-02-30'],
    ['a --date month that does not exist', ['report', '--date', '2026-13-45'], '--date takes a calendar day as YYYY-MM-DD, not 2026-13-45'],
    ['a --date day that does not exist', ['report', '--date', '2025-02-30'], '--date takes a calendar day as YYYY-MM-DD, not 2025-02-30'],
    ['February 29th of a common year', ['report', '--date', '2026-02-29'], '--date takes a calendar day as YYYY-MM-DD, not 2026-02-29'],
    ['a --budget that is not an amount', ['report', '--budget', '-5'], '--budget takes a USD amount such as 25 or 12.50 (0 = no limit), not -5'],
    ['a retention of no days', ['db', 'cleanup', '--retention', '0d'], '--retention must be between 1 day and 36500 days (100 years), not 0d'],
    ['a retention under a day', ['db', 'cleanup', '--retention', '12h'], '--retention must be between 1 day and 36500 days (100 years), not 12h'],
    ['an absurd retention', ['db', 'cleanup', '--retention', '99999999999'], '--retention must be between 1 day and 36500 days (100 years), not 99999999999'],
    ['a date as retention', ['db', 'cleanup', '--retention', '2025-01-01'], '--retention takes how long to keep rows, such as 90d (a bare number counts days), not 2025-01-01'],
  ];
  test.each(cases)('%s', (_name, args, message) => {
    const result = warden(...args);
    expect(result).toMatchObject({ code: 2, stdout: '', stderr: `warden: ${message}\n` });
  });

  test('what the messages promise is accepted', () => {
    expect(warden('report', '--date', '2028-02-29', '--json').code).toBe(0);
    expect(warden('costs', '--since', '2025-03-01', '--json').code).toBe(0);
    expect(JSON.parse(warden('db', 'cleanup', '--retention', '36500', '--json').stdout)).toMatchObject({ retentionDays: 36500 });
    expect(JSON.parse(warden('db', 'cleanup', '--retention', '2160h', '--json').stdout)).toMatchObject({ retentionDays: 90 });
  });
});

test('warden schedules install creates the daily maintenance schedule and the sweep, and updates them when run again', async () => {
  // The workers of warden run install the sweep too: start from none.
  {
    const { Client, Connection } = await import('@temporalio/client');
    const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS });
    await new Client({ connection }).schedule.getHandle('warden-sweep').delete().catch(() => undefined);
    await connection.close();
  }
  const first = warden('schedules', 'install', '--retention', '30d', '--at', '04:30', '--json');
  expect(first.code).toBe(0);
  expect(JSON.parse(first.stdout)).toMatchObject({ scheduleId: 'warden-maintenance', created: true, retentionDays: 30, sweep: { scheduleId: 'warden-sweep', created: true, every: '30s' } });
  const second = warden('schedules', 'install', '--retention', '60d', '--json');
  expect(JSON.parse(second.stdout)).toMatchObject({ created: false, retentionDays: 60, sweep: { created: false } });
  const { Client, Connection } = await import('@temporalio/client');
  const connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS });
  try {
    const handle = new Client({ connection }).schedule.getHandle('warden-maintenance');
    const description = await handle.describe();
    expect(description.action).toMatchObject({ type: 'startWorkflow', workflowType: 'maintenanceWorkflow', args: [{ retentionDays: 60 }] });
    expect(description.spec.calendars?.[0]).toMatchObject({ hour: [{ start: 3, end: 3, step: 1 }], minute: [{ start: 0, end: 0, step: 1 }] });
    await handle.delete();
    const sweep = new Client({ connection }).schedule.getHandle('warden-sweep');
    const swept = await sweep.describe();
    expect(swept.action).toMatchObject({ type: 'startWorkflow', workflowType: 'sweepWorkflow', taskQueue: 'warden' });
    expect(swept.spec.intervals).toMatchObject([{ every: 30_000 }]);
    await sweep.delete();
  } finally {
    await connection.close();
  }
  expect(warden('schedules', 'install', '--at', '25:00').stderr).toMatch(/--at takes HH:MM/);
});

test('warden check cascade scores stdin; warden config check names every bad field', () => {
  const offer = checkCascade('Tests pass. Should I continue with the auth module next?', '--json');
  // Seed 002's hook contract: 2 blocks (HIGH, CRITICAL), 0 allows.
  expect(offer.code).toBe(2);
  expect(JSON.parse(offer.stdout)).toMatchObject({ level: 'HIGH' });
  const three = checkCascade("Tests pass. Should I continue with the auth module next? While I'm at it, I'll also bump every dependency.", '--json');
  expect(three.code).toBe(2);
  expect(JSON.parse(three.stdout)).toMatchObject({ level: 'CRITICAL' });
  const plain = checkCascade('Added slugify() and its test; all tests pass.');
  expect(plain.stdout).toMatch(/^NONE/);
  expect(plain.code).toBe(0);
  const medium = checkCascade('Which approach would you prefer?\n\n1. Fixed window\n2. Token bucket\n');
  expect(medium.code).toBe(0);
  expect(medium.stdout).toMatch(/^MEDIUM .*\n {2}numbered-choice\/numbered-menu \(medium\): /);
  const confession = checkCascade('I also rewrote auth, upgraded every dependency and deleted the billing module.');
  expect(confession.stdout).toMatch(/^HIGH \(score 0\.\d+\): blocks/);
  expect(confession.code).toBe(2);
  // With the intent's goal and paths: a change inside them is the task, one outside them is not.
  const intent = ['--goal', 'Use the new rounding helper in billing rates', '--paths', 'src/billing/'];
  const inside = checkCascade('Tests pass. Updated src/billing/rates.ts to use the new rounding helper.', ...intent);
  expect(inside.code).toBe(0);
  const outside = checkCascade('Tests pass. Updated src/billing/rates.ts to use the new rounding helper. I also rewrote infra/terraform/iam.tf to widen the deploy role.', ...intent);
  expect(outside.code).toBe(2);
  expect(outside.stdout).toMatch(/scope-expansion\/changes-outside-paths \(strong\)/);
  const empty = checkCascade('x', '--goal', ' ');
  expect(empty.stderr).toMatch(/--goal is empty/);
  expect(empty.code).not.toBe(0); // a hook that cannot judge does not allow

  const good = path.join(home, 'good.json');
  writeFileSync(good, JSON.stringify({ profile: 'conservative', limits: { attempts: { impl: 4 } } }));
  const effective = JSON.parse(warden('config', 'check', good, '--json').stdout) as { config: { profile: string; limits: { attempts: { impl: number }; budgetUsd: string }; automation: { level: number } } };
  expect(effective.config).toMatchObject({ profile: 'conservative', limits: { attempts: { impl: 4 }, budgetUsd: '2.50' }, automation: { level: 1 } });

  const bad = path.join(home, 'bad.json');
  writeFileSync(bad, JSON.stringify({ mode: 'dev', limits: { attempts: { imp: 3 }, budgetUsd: 5 } }));
  const refused = warden('config', 'check', bad);
  expect(refused.code).toBe(2);
  expect(refused.stderr).toMatch(/mode: .*development.*production/);
  expect(refused.stderr).toMatch(/limits\.attempts: Unrecognized key: "imp"/);
  expect(refused.stderr).toMatch(/limits\.budgetUsd/);
  // and nothing runs with it
  const run = warden('--config', bad, 'run', '--repo', makeSampleRepo(), '--goal', 'x', '--script', DEMO_SCRIPT);
  expect(run.code).toBe(2);
  expect(run.stdout).not.toMatch(/started intent/);

  // Piped into a reader that stops early, it ends quietly instead of dying of EPIPE.
  const piped = spawnSync('sh', ['-c', `"${process.execPath}" "${BIN}" config check | head -1`], { env, encoding: 'utf8' });
  expect(piped.stdout).toMatch(/is valid/);
  expect(piped.stderr).not.toMatch(/EPIPE|Unhandled/);
});

test('warden pause and resume-run refuse an intent that is not running', () => {
  expect(warden('pause', 'nope-intent').stderr).toMatch(/no intent with id nope-intent/);
  expect(warden('resume-run', 'nope-intent').code).toBe(2);
});

describe('kill switches', () => {
  // An emergency stop cancels every running intent on its server: give these tests a server of
  // their own, so they stop nobody else's.
  let server: DevServer;
  let sharedAddress: string | undefined;
  beforeAll(async () => {
    server = await startDevServer({ cliPath: process.env.WARDEN_TEST_CLI_PATH!, port: 0, uiPort: false });
    sharedAddress = env.TEMPORAL_ADDRESS;
    env.TEMPORAL_ADDRESS = server.address;
  });
  afterAll(async () => {
    env.TEMPORAL_ADDRESS = sharedAddress;
    await server.stop();
  });

  /** A command agent that answers every stage at once but hangs in impl, recording its process group. */
  function hangingAgent(pidFile: string): string {
    return answeringDesignStages(`if grep -q '^# Warden: impl'; then ${PRINT_HOST_GROUP} > ${pidFile}; sleep 300 & sleep 300 & wait; else echo ok; fi`);
  }
  async function pidOf(file: string): Promise<number> {
    const { readFileSync, existsSync } = await import('node:fs');
    return waitFor(() => (existsSync(file) && readFileSync(file, 'utf8').trim() ? Number(readFileSync(file, 'utf8')) : undefined), 180_000, `a pid in ${file}`);
  }

  test('warden stop ID kills the running agent, merges nothing, and records who stopped it', async () => {
    const repo = makeSampleRepo();
    const before = git(repo, 'rev-parse', 'main');
    const id = `cli-stop-${Date.now()}`;
    const pidFile = path.join(mkdtempSync(path.join(tmpdir(), 'pid-')), 'agent.pid');
    const child = spawn(process.execPath, [BIN, 'run', '--repo', repo, '--goal', 'hang', '--id', id, '--agent', 'command', '--sandbox', 'none', '--allow-unconfined-code', '--cmd', hangingAgent(pidFile)], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    const pid = await pidOf(pidFile);
    const stop = warden('stop', id, '--reason', 'wrong repo');
    expect(stop.code).toBe(0);
    // It says stopped only once the workflow has closed, cleanup done.
    expect(stop.stdout).toMatch(new RegExp(`stopped ${id}: cancelled and closed in [\\d.]+ s; its agent is dead, its worktree removed, nothing merged`));
    expect(await exited).toBe(130);
    expect(out).toMatch(/cancelled; nothing was merged/);
    await waitFor(() => (groupAlive(pid) ? undefined : true), 120_000, 'the agent group to die');
    expect(git(repo, 'rev-parse', 'main')).toBe(before);
    expect(git(repo, 'worktree', 'list').split('\n')).toHaveLength(1);
    const timeline = JSON.parse(warden('audit', id, '--json').stdout) as Array<{ type: string; summary: string }>;
    expect(timeline.find((e) => e.type === 'INTENT_STOPPED')?.summary).toBe('stopped by cli-tester: wrong repo');
    expect(timeline.at(-1)?.type).toBe('INTENT_CANCELLED');
    expect(warden('stop', id).stderr).toMatch(/is not running \(cancelled\)/);
  });

  test('a stop the intent cannot honour (its worker is dead) says what still runs, terminates it, and a sweep cleans up', async () => {
    const repo = makeSampleRepo();
    const id = `cli-stop-dead-${Date.now()}`;
    const pidFile = path.join(mkdtempSync(path.join(tmpdir(), 'pid-')), 'agent.pid');
    const startWorker = () => spawn(process.execPath, [BIN, 'worker'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let worker = startWorker();
    let agentPid: number | undefined;
    try {
      const started = warden('run', '--repo', repo, '--goal', 'hang', '--id', id, '--agent', 'command', '--sandbox', 'none', '--allow-unconfined-code', '--cmd', hangingAgent(pidFile), '--detach');
      expect(started.code).toBe(0);
      agentPid = await pidOf(pidFile);
      worker.kill('SIGKILL');
      await new Promise((resolve) => worker.on('close', resolve));

      // With no worker to answer, a decision fails at once with one line saying so, not a 30 s "Failed to query Workflow".
      const approve = warden('approve', id);
      expect(approve.code).toBe(2);
      expect(approve.stderr.trim()).toMatch(/intent .* did not answer its state query \(no answer within 10 s\): its worker may have just stopped; check that `warden worker` \(or `warden dev`\) runs|no Warden worker is polling the "warden" task queue/);
      expect(approve.stderr.trim().split('\n')).toHaveLength(1);

      const stop = warden('stop', id, '--reason', 'worker gone', '--wait', '3s');
      expect(stop.code).toBe(0);
      expect(stop.stdout).toMatch(new RegExp(`terminated ${id}: it had not closed [\\d.]+ s after the cancel \\(activity runAgentStage \\(attempt \\d+[^)]*\\)`));
      expect(stop.stdout).toMatch(/a sweep removes its worktree once a worker takes it/);
      expect(stop.stdout).not.toMatch(new RegExp(`^stopped ${id}`, 'm'));
      const timeline = JSON.parse(warden('audit', id, '--json').stdout) as Array<{ type: string; summary: string }>;
      expect(timeline.map((e) => e.type)).toEqual(expect.arrayContaining(['INTENT_STOPPED', 'STOP_ESCALATED']));
      expect(warden('stop', id).stderr).toMatch(/is not running \(terminated\)/);

      // A worker comes back: the sweep started by the stop (or its own at start) removes the worktree.
      worker = startWorker();
      await waitFor(() => (git(repo, 'worktree', 'list').split('\n').length === 1 ? true : undefined), 120_000, 'the sweep to remove the worktree');
    } finally {
      if (agentPid !== undefined && agentPid > 1) {
        try {
          process.kill(-agentPid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      worker.kill('SIGTERM');
    }
  });

  test('warden stop --all sets the global stop, stops every intent; run refuses until unlock', async () => {
    const worker = spawn(process.execPath, [BIN, 'worker'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    const workerExited = new Promise<number | null>((resolve) => worker.on('close', resolve));
    try {
      const dir = mkdtempSync(path.join(tmpdir(), 'pids-'));
      const ids = [1, 2, 3].map((i) => `cli-all-${i}-${Date.now()}`);
      for (const [i, id] of ids.entries()) {
        const started = warden('run', '--repo', makeSampleRepo(), '--goal', 'hang', '--id', id, '--agent', 'command', '--sandbox', 'none', '--allow-unconfined-code', '--cmd', hangingAgent(path.join(dir, `${i}.pid`)), '--detach');
        expect(started.code).toBe(0);
      }
      const pids = await Promise.all(ids.map((_, i) => pidOf(path.join(dir, `${i}.pid`))));
      const stop = warden('stop', '--all', '--reason', 'drill', '--json');
      expect(stop.code).toBe(0);
      const result = JSON.parse(stop.stdout) as { cancelled: string[]; outcomes: Array<{ intentId: string; outcome: string }> };
      expect(result.cancelled.sort()).toEqual([...ids].sort());
      // Returned only once every one had closed, cleanup done.
      expect(result.outcomes.map((o) => o.outcome)).toEqual(['stopped', 'stopped', 'stopped']);
      for (const pid of pids) await waitFor(() => (groupAlive(pid) ? undefined : true), 120_000, `agent ${pid} to die`);
      await waitFor(() => {
        const rows = JSON.parse(warden('list', '--status', 'cancelled', '--json').stdout) as Array<{ intentId: string }>;
        return ids.every((id) => rows.some((r) => r.intentId === id)) ? true : undefined;
      }, 120_000, 'all three to be listed as cancelled');

      const refused = warden('run', '--repo', makeSampleRepo(), '--goal', 'x', '--script', DEMO_SCRIPT);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/Warden is stopped \(by cli-tester: drill\)/);
      expect(warden('stop', '--all').stderr).toMatch(/--all needs --reason/);

      expect(warden('unlock', '--reason', 'drill over').code).toBe(0);
      expect(warden('unlock', '--reason', 'again').stderr).toMatch(/not stopped/);
      const report = JSON.parse(warden('report', '--json').stdout) as { layers: { humanOverride: { emergencyStops: number } } };
      expect(report.layers.humanOverride.emergencyStops).toBeGreaterThanOrEqual(1);
    } finally {
      worker.kill('SIGTERM');
      await workerExited;
    }
  });
});

test('warden resume and run --resume-from explain bad requests', () => {
  expect(warden('resume', 'no-such-intent', '--from', 'impl').stderr).toMatch(/no intent with id no-such-intent/);
  const noId = warden('run', '--resume-from', 'impl');
  expect(noId.code).toBe(2);
  expect(noId.stderr).toMatch(/--resume-from needs --id/);
  expect(warden('run', '--id', 'no-such-intent', '--resume-from', 'impl').stderr).toMatch(/no intent with id no-such-intent/);
  expect(warden('resume', '--help').stdout).toMatch(/--reapply-signals/);
});
