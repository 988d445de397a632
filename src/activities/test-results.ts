/** Counts read from a test runner's output, when it prints them in a form we know. */
export interface TestCounts {
  readonly passed?: number;
  readonly failed?: number;
}

/**
 * Reads pass/fail counts from the summary lines of node's test runner (`# pass 3`), jest
 * (`Tests: 1 failed, 2 passed`) and pytest (`1 failed, 2 passed in 0.1s`). Pure.
 */
export function readTestCounts(output: string): TestCounts {
  const tap = { pass: /^# pass (\d+)/m.exec(output), fail: /^# fail (\d+)/m.exec(output) };
  if (tap.pass || tap.fail) {
    return { passed: num(tap.pass), failed: num(tap.fail) ?? 0 };
  }
  const summary = /^(?:Tests:\s+|=+ )(.*(?:passed|failed).*)$/m.exec(output)?.[1];
  if (summary) {
    return {
      passed: num(/(\d+) passed/.exec(summary)) ?? 0,
      failed: num(/(\d+) failed/.exec(summary)) ?? 0,
    };
  }
  return {};
}

function num(match: RegExpExecArray | null): number | undefined {
  return match ? Number(match[1]) : undefined;
}

/** One line for people: `passed (3 passed)` / `failed: exit 1 (1 failed, 2 passed)`. */
export function describeTestRun(exitCode: number | null, termination: string, counts: TestCounts): string {
  const tally =
    counts.passed !== undefined || counts.failed !== undefined
      ? ` (${[counts.failed ? `${counts.failed} failed` : '', `${counts.passed ?? 0} passed`].filter(Boolean).join(', ')})`
      : '';
  if (termination === 'timed-out') return `timed out${tally}`;
  if (termination === 'output-cap') return `stopped: output too large${tally}`;
  return exitCode === 0 ? `passed${tally}` : `failed: exit ${exitCode}${tally}`;
}

/** Names of failing tests, where the runner prints them (node: `not ok N - name`, jest: `✕ name`, pytest: `FAILED id`). */
export function readFailingTests(output: string): string[] {
  const names = new Set<string>();
  for (const m of output.matchAll(/^\s*not ok \d+ - (.+)$/gm)) names.add(m[1]!.trim());
  for (const m of output.matchAll(/^\s*✕ (.+?)(?: \(\d+ ms\))?$/gm)) names.add(m[1]!.trim());
  for (const m of output.matchAll(/^FAILED (\S+)/gm)) names.add(m[1]!.trim());
  return [...names].sort();
}

/**
 * How a test run ended, for routing: each class sends the impl loop back with a different fix
 * in mind.
 * - `passed`: exit 0;
 * - `collection-error`: the tests could not even be loaded — pytest exit 4 (usage/collection
 *   error) or exit 5 with nothing collected, pytest's `ERROR collecting` / `errors during
 *   collection` / `ImportError while importing test module`, unittest's `Failed to import test
 *   module`, jest's `Test suite failed to run`, or `Cannot find module` / `ERR_MODULE_NOT_FOUND` /
 *   `SyntaxError` / `ModuleNotFoundError` when no test ran: an import the model hallucinated,
 *   route back to re-scaffold;
 * - `timed-out`: the run was killed for taking too long or printing too much (a runaway test;
 *   an exit code of -1, which wrappers commonly report for a run they killed, counts too);
 * - `failed`: anything else (a failing test, an aborted run): route back to re-implement.
 */
export type TestRunClass = 'passed' | 'failed' | 'collection-error' | 'timed-out';

export interface TestRunOutcome {
  /** Null when the process was killed by a signal. */
  readonly exitCode: number | null;
  /** `ProcessTermination` from process.ts: exited, timed-out, output-cap, aborted. */
  readonly termination: string;
  /** stdout and stderr of the run (the tail is enough if it holds the summary). */
  readonly output: string;
}

const COLLECTION_ALWAYS = [
  /\bERROR collecting\b/,
  /\b\d+ errors? during collection\b/,
  /ImportError while importing test module/,
  /Failed to import test module/,
  /Test suite failed to run/,
];
const COLLECTION_IF_NOTHING_RAN = [
  /Cannot find module/,
  /ERR_MODULE_NOT_FOUND/,
  /\bSyntaxError\b/,
  /\bModuleNotFoundError\b/,
  /\bImportError\b/,
  /error TS\d+:/,
];

/** Routes a finished test run (see {@link TestRunClass}). Pure. */
export function classifyTestRun(run: TestRunOutcome): TestRunClass {
  if (run.termination === 'timed-out' || run.termination === 'output-cap' || run.exitCode === -1) return 'timed-out';
  if (run.termination === 'exited' && run.exitCode === 0) return 'passed';
  const output = run.output;
  if (run.exitCode === 4) return 'collection-error';
  if (COLLECTION_ALWAYS.some((re) => re.test(output))) return 'collection-error';
  const ran = testsRan(output);
  if (run.exitCode === 5 && !ran && /no tests ran|collected 0 items/.test(output)) return 'collection-error';
  if (!ran && COLLECTION_IF_NOTHING_RAN.some((re) => re.test(output))) return 'collection-error';
  return 'failed';
}

/** True if the output shows at least one test that ran to a result (pass or fail). */
function testsRan(output: string): boolean {
  // TAP (node --test): a file that failed to load is reported as a failed "test" named by its absolute path
  if (/^\s*ok \d+ - /m.test(output) || /^\s*not ok \d+ - (?![/\\]|[A-Za-z]:\\)/m.test(output)) return true;
  if (/^\s*(?:✓|✔|√|✕|✖|×)\s/m.test(output) || /\b(?:PASSED|FAILED)\b/.test(output)) return true;
  if (/^# (?:pass|fail) \d+/m.test(output)) return false;
  const counts = readTestCounts(output);
  return (counts.passed ?? 0) > 0 || (counts.failed ?? 0) > 0;
}

/** One line for the next impl prompt, by how the tests ended. */
export const TEST_RUN_INSTRUCTIONS: Readonly<Record<TestRunClass, string>> = {
  passed: 'The tests pass: keep the behaviour they check, and change nothing they do not ask for.',
  failed: 'Re-implement: the tests ran and some failed. Read the failures below and fix the implementation, not the tests.',
  'collection-error':
    'Re-scaffold: the tests could not be loaded (a missing module, a bad import or a syntax error). Make every imported module and name exist and every file parse before changing any behaviour.',
  'timed-out':
    'Stop the runaway test: the run was killed for taking too long or printing too much. Find the infinite loop, the unbounded wait or the endless output and remove it.',
};

/** The instruction for the next impl prompt after a run of class `kind`. */
export function instructionForTestRun(kind: TestRunClass): string {
  return TEST_RUN_INSTRUCTIONS[kind];
}

/** How each test the runner printed by name ended; the worst wins when a name is printed twice. */
export type PrintedTestStatus = 'passed' | 'failed' | 'skipped';

const STATUS_WEIGHT: Readonly<Record<PrintedTestStatus, number>> = { passed: 0, skipped: 1, failed: 2 };

/**
 * The tests a run printed by name, and how each ended, from the lines the common runners print
 * per test: TAP (node --test when piped: `ok 3 - name # SKIP`), jest --verbose (`✓ name (3 ms)`,
 * `○ skipped name`), node's spec reporter and mocha (`✔ name`, `﹣ name # SKIP`), pytest -v or -rA
 * (`path::name PASSED`, `SKIPPED path::name`) and unittest -v (`test_x (mod.Case) ... ok`).
 * Empty when the runner printed no names (jest without --verbose, pytest without -v). Pure.
 */
export function readTestStatuses(output: string): Map<string, PrintedTestStatus> {
  const statuses = new Map<string, PrintedTestStatus>();
  const note = (name: string, status: PrintedTestStatus): void => {
    const clean = name.trim();
    if (!clean) return;
    const before = statuses.get(clean);
    if (!before || STATUS_WEIGHT[status] > STATUS_WEIGHT[before]) statuses.set(clean, status);
  };
  for (const m of output.matchAll(/^\s*(not )?ok \d+(?: - (.*?))?(?:\s+#\s*(SKIP|TODO)\b.*)?$/gim)) {
    if (m[2] === undefined) continue;
    note(m[2].replace(/\\#/g, '#').replace(/\\\\/g, '\\'), m[3] ? 'skipped' : m[1] ? 'failed' : 'passed');
  }
  const timing = String.raw`(?:\s+\(\d+(?:\.\d+)?\s*m?s\))?`;
  for (const m of output.matchAll(new RegExp(String.raw`^\s*(?:✓|√|✔)\s+(.+?)${timing}\s*$`, 'gm'))) note(m[1]!, 'passed');
  for (const m of output.matchAll(new RegExp(String.raw`^\s*(?:✕|×|✖)\s+(.+?)${timing}\s*$`, 'gm'))) note(m[1]!, 'failed');
  for (const m of output.matchAll(/^\s*(?:○ skipped|✎ todo|○)\s+(.+?)\s*$/gm)) note(m[1]!, 'skipped');
  for (const m of output.matchAll(new RegExp(String.raw`^\s*﹣\s+(.+?)${timing}\s*#\s*(?:SKIP|TODO)\b.*$`, 'gm'))) note(m[1]!, 'skipped');
  const pytestStatus = (word: string): PrintedTestStatus => (/^(PASSED|XPASS)$/.test(word) ? 'passed' : /^(SKIPPED|XFAIL)$/.test(word) ? 'skipped' : 'failed');
  const pytestName = (id: string): string => id.replace(/\[.*\]$/, '');
  for (const m of output.matchAll(/^(\S+::\S+?)(?:\[[^\]]*\])?\s+(PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR)\b/gm)) note(pytestName(m[1]!), pytestStatus(m[2]!));
  for (const m of output.matchAll(/^(PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR) (\S+::\S+)/gm)) note(pytestName(m[2]!), pytestStatus(m[1]!));
  for (const m of output.matchAll(/^(\w+) \([\w.]+\)(?: \.\.\.|\n.*\.\.\.) (ok|FAIL|ERROR|skipped|expected failure)\b/gm)) {
    note(m[1]!, m[2] === 'ok' ? 'passed' : m[2] === 'skipped' || m[2] === 'expected failure' ? 'skipped' : 'failed');
  }
  return statuses;
}

/** How much of a test run's output the next attempt is shown: its last lines, each cut to a length. */
const FEEDBACK_TAIL_LINES = 30;
const FEEDBACK_LINE_CHARS = 200;

/**
 * The end of a test run's output, as the next impl attempt's prompt shows it: the last
 * FEEDBACK_TAIL_LINES lines, each cut to FEEDBACK_LINE_CHARS, with paths in the worktree made
 * relative to it. Counted in lines, not characters: where the cut falls must not depend on how
 * long the worktree's path is or how many digits a test's time printed with, so that a replay
 * (another worktree, other times) shows its agent the same lines the original's was shown.
 */
export function feedbackTail(output: string, worktreePath: string): string {
  const lines = output.split(`${worktreePath}/`).join('').split(worktreePath).join('.').trimEnd().split('\n');
  return lines
    .slice(-FEEDBACK_TAIL_LINES)
    .map((line) => (line.length > FEEDBACK_LINE_CHARS ? `${line.slice(0, FEEDBACK_LINE_CHARS)}…` : line))
    .join('\n');
}
