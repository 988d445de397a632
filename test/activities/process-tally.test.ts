import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { launch, stopLauncher } from '../../src/activities/launcher';
import { runProcess } from '../../src/activities/process';
import { createScriptedAgent } from '../../src/activities/agents/scripted-agent';
import { SpendMeter } from '../../src/gateway/spend-meter';
import { addChildTime, countLaunch, processTally, tallySince } from '../../src/activities/process-tally';

const cwd = (): string => mkdtempSync(path.join(tmpdir(), 'warden-tally-'));

afterEach(() => stopLauncher());

test('counts programs by base name and child time by kind, as the difference between two snapshots', () => {
  const before = processTally();
  countLaunch('git');
  countLaunch('/usr/bin/git');
  countLaunch('/usr/bin/bwrap');
  addChildTime('tests', 120);
  addChildTime('agent', 30);
  addChildTime('agent', 12.5);
  addChildTime('other', Number.NaN);
  addChildTime('other', -5);
  expect(tallySince(before)).toEqual({ launched: { git: 2, bwrap: 1 }, childMs: { agent: 42.5, tests: 120, other: 0 } });
  // Snapshots are copies: what happens later does not change them.
  const frozen = processTally();
  countLaunch('git');
  expect(tallySince(frozen).launched).toEqual({ git: 1 });
  expect(tallySince(before, frozen).launched).toEqual({ git: 2, bwrap: 1 });
});

test('every launch() is counted, failed or not', async () => {
  const before = processTally();
  await launch('git', ['--version'], { cwd: cwd(), env: process.env, maxBuffer: 1024 * 1024 });
  await launch('git', ['no-such-command'], { cwd: cwd(), env: process.env, maxBuffer: 1024 * 1024 }).catch(() => undefined);
  await Promise.all(Array.from({ length: 5 }, () => launch('sh', ['-c', 'true'], { cwd: cwd(), env: process.env, maxBuffer: 1024 })));
  expect(tallySince(before).launched).toEqual({ git: 2, sh: 5 });
});

test("runProcess counts what it starts and adds the child's time to the kind its caller names", async () => {
  const before = processTally();
  const tests = await runProcess({ command: 'sleep 0.2', cwd: cwd(), env: { PATH: process.env.PATH }, timeoutMs: 60_000, maxOutputBytes: 1024, kind: 'tests' });
  const afterTests = processTally();
  const unnamed = await runProcess({ command: 'true', exec: { file: '/bin/true', args: [] }, cwd: cwd(), env: {}, timeoutMs: 60_000, maxOutputBytes: 1024 });
  const spent = tallySince(before);
  expect(tests.durationMs).toBeGreaterThanOrEqual(200);
  expect(tallySince(before, afterTests).childMs).toEqual({ agent: 0, tests: tests.durationMs, other: 0 });
  expect(spent.childMs).toEqual({ agent: 0, tests: tests.durationMs, other: unnamed.durationMs });
  expect(spent.launched).toEqual({ sh: 1, true: 1 });
});

test("the scripted agent runs in this process: its script's delay is the agent's time, and nothing is launched", async () => {
  const dir = cwd();
  const scriptPath = path.join(dir, 'script.json');
  writeFileSync(scriptPath, JSON.stringify({ model: 'anything', stages: { lld: [{ output: 'ok', costUsd: 0, delayMs: 150 }] } }));
  const before = processTally();
  await createScriptedAgent(scriptPath).run({
    intentId: 'tally-1',
    stage: 'lld',
    attempt: 1,
    prompt: 'design it',
    worktreePath: dir,
    signal: new AbortController().signal,
    heartbeat: () => undefined,
    meter: new SpendMeter({ pricing: {}, declaredCapUsd: '0.50' }),
  });
  const spent = tallySince(before);
  expect(spent.childMs.agent).toBeGreaterThanOrEqual(149);
  expect(spent.childMs.tests).toBe(0);
  expect(spent.launched).toEqual({});
});
