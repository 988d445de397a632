import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runProcess } from '../../src/activities/process';
import { classifyTestRun, feedbackTail, instructionForTestRun, TEST_RUN_INSTRUCTIONS, type TestRunClass } from '../../src/activities/test-results';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'warden-test-results-'));
  mkdirSync(path.join(dir, 'test'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** Runs `node --test test/` on the given test file for real, and classifies the outcome. */
async function nodeRun(testFile: string, timeoutMs = 30_000): Promise<TestRunClass> {
  writeFileSync(path.join(dir, 'test/a.test.js'), testFile);
  const outcome = await runProcess({ command: 'node --test test/', cwd: dir, env: process.env, timeoutMs, maxOutputBytes: 1_000_000 });
  return classifyTestRun({ exitCode: outcome.exitCode, termination: outcome.termination, output: outcome.stdout + outcome.stderr });
}

describe('classifyTestRun on real node --test runs', () => {
  test('passing tests', async () => {
    expect(await nodeRun("const test = require('node:test');\ntest('a', () => {});\n")).toBe('passed');
  });
  test('a failing assertion', async () => {
    expect(await nodeRun("const test = require('node:test');\nconst assert = require('node:assert');\ntest('a', () => assert.equal(1, 2));\ntest('b', () => {});\n")).toBe('failed');
  });
  test('a hallucinated import: the file never loads', async () => {
    expect(await nodeRun("const x = require('./does-not-exist');\nconst test = require('node:test');\ntest('a', () => {});\n")).toBe('collection-error');
  });
  test('a syntax error', async () => {
    expect(await nodeRun("const test = require('node:test');\ntest('a', () => { if ( });\n")).toBe('collection-error');
  });
  test('a test that throws "Cannot find module" while running is a failure, not a collection error', async () => {
    const file = "const test = require('node:test');\ntest('ok', () => {});\ntest('lazy', () => { require('./missing'); });\n";
    expect(await nodeRun(file)).toBe('failed');
  });
  test('a runaway test is stopped by the timeout', async () => {
    expect(await nodeRun("const test = require('node:test');\ntest('loop', () => { for (;;) {} });\n", 1500)).toBe('timed-out');
  });
});

describe('classifyTestRun on recorded runner output', () => {
  const cases: [string, number | null, string, string, TestRunClass][] = [
    ['pytest import error (exit 2)', 2, 'exited', '__________ ERROR collecting test_a.py __________\nImportError while importing test module \'/tmp/pt/test_a.py\'.\nE   ModuleNotFoundError: No module named \'nope\'\n!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!\n1 error in 0.08s\n', 'collection-error'],
    ['pytest usage error (exit 4)', 4, 'exited', 'ERROR: file or directory not found: nothere.py\n\nno tests ran in 0.00s\n', 'collection-error'],
    ['pytest nothing collected (exit 5)', 5, 'exited', '\nno tests ran in 0.00s\n', 'collection-error'],
    ['pytest failure', 1, 'exited', 'F.\nFAILED test_a.py::test_a - assert 1 == 2\n1 failed, 1 passed in 0.01s\n', 'failed'],
    ['pytest failure mentioning ImportError in a test', 1, 'exited', 'FAILED test_a.py::test_lazy - ImportError: cannot import name x\n1 failed, 3 passed in 0.2s\n', 'failed'],
    ['unittest import failure', 1, 'exited', 'E\nERROR: test_a (unittest.loader._FailedTest)\nImportError: Failed to import test module: test_a\n', 'collection-error'],
    ['jest suite that failed to run', 1, 'exited', 'FAIL ./a.test.js\n  ● Test suite failed to run\n\n    Cannot find module \'./nope\' from \'a.test.js\'\n\nTests:       1 failed, 1 passed, 2 total\n', 'collection-error'],
    ['jest failing test', 1, 'exited', 'FAIL ./b.test.js\n  ● b\n    expect(received).toBe(expected)\nTests:       1 failed, 1 passed, 2 total\n', 'failed'],
    ['TypeScript compile error before tests', 2, 'exited', "src/a.ts(1,19): error TS2307: Cannot find module './nope' or its corresponding type declarations.\n", 'collection-error'],
    ['exit 0 is a pass whatever is printed', 0, 'exited', 'SyntaxError in a log line\n', 'passed'],
    ['output cap (runaway output)', null, 'output-cap', 'x'.repeat(100), 'timed-out'],
    ['the seed\'s -1', -1, 'exited', '', 'timed-out'],
    ['aborted (cancelled) run', null, 'aborted', '', 'failed'],
    ['a plain non-zero exit with no output', 1, 'exited', '', 'failed'],
  ];
  test.each(cases)('%s', (_name, exitCode, termination, output, expected) => {
    expect(classifyTestRun({ exitCode, termination, output })).toBe(expected);
  });
});

test('one instruction per class for the next impl prompt', () => {
  expect(instructionForTestRun('collection-error')).toMatch(/^Re-scaffold/);
  expect(instructionForTestRun('failed')).toMatch(/^Re-implement/);
  expect(instructionForTestRun('timed-out')).toMatch(/^Stop the runaway test/);
  expect(instructionForTestRun('passed')).toMatch(/pass/);
  for (const line of Object.values(TEST_RUN_INSTRUCTIONS)) expect(line).not.toContain('\n');
});

describe('feedbackTail: what the next impl attempt is shown of a test run', () => {
  /** Five failing tests, each printing its time and a stack through the worktree. */
  const failing = `const test = require('node:test');\nconst assert = require('node:assert');\n${[1, 2, 3, 4, 5].map((n) => `test('case ${n}', () => assert.strictEqual(${n}, 0));`).join('\n')}\n`;

  async function tailIn(worktree: string): Promise<string> {
    mkdirSync(path.join(worktree, 'test'), { recursive: true });
    writeFileSync(path.join(worktree, 'test/a.test.js'), failing);
    const outcome = await runProcess({ command: 'node --test test/', cwd: worktree, env: process.env, timeoutMs: 30_000, maxOutputBytes: 1_000_000 });
    const output = outcome.stdout + outcome.stderr;
    expect(output).toContain(worktree);
    return feedbackTail(output, worktree);
  }

  test('the same run in a worktree with a longer path, with other times, gives the same lines', async () => {
    const short = await tailIn(path.join(dir, 'wt'));
    const long = await tailIn(path.join(dir, 'a-much-longer-worktree-path-as-a-replay-has-it'));
    const timesMasked = (tail: string): string => tail.replace(/\d+(\.\d+)?/g, 'N');
    expect(timesMasked(long)).toBe(timesMasked(short));
    expect(short).not.toContain(dir);
    expect(short).toContain('# fail 5');
    expect(short.split('\n').length).toBeLessThanOrEqual(30);
  });

  test('a long line is cut', () => {
    expect(feedbackTail(`ok\n${'x'.repeat(500)}\n`, '/wt')).toBe(`ok\n${'x'.repeat(200)}…`);
  });
});
