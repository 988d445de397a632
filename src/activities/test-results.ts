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
