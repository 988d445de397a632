import { judgeTestPlan, readTestPlan, skippedInFile, type PlannedTest } from '../../src/safety/test-plan';
import { readTestStatuses } from '../../src/activities/test-results';

const SPEC = [
  '# Test specification',
  '',
  '| Requirement | Test | File |',
  '|---|---|---|',
  '| slugify keeps digits | `slugify keeps digits` | `lib/slugify.test.js` |',
  '| capitalize unchanged | `capitalize upper-cases the first letter` | `test/strings.test.js` (existing) |',
  '',
].join('\n');

describe('readTestPlan', () => {
  test('reads each row: requirement, the backticked test name, the file and its "(existing)" mark', () => {
    expect(readTestPlan(SPEC)).toEqual([
      { requirement: 'slugify keeps digits', test: 'slugify keeps digits', file: 'lib/slugify.test.js', existing: false },
      { requirement: 'capitalize unchanged', test: 'capitalize upper-cases the first letter', file: 'test/strings.test.js', existing: true },
    ]);
  });

  test('a table without a File column plans nothing', () => {
    expect(readTestPlan('| Requirement | Test |\n|---|---|\n| a | `b` |\n')).toEqual([]);
  });
});

describe('readTestStatuses', () => {
  test('TAP from node --test: ok, not ok, # SKIP and # TODO, escaped #', () => {
    const tap = ['TAP version 13', '# Subtest: a', 'ok 1 - a', 'not ok 2 - b', 'ok 3 - c # SKIP', 'ok 4 - d # TODO', 'ok 5 - with \\# hash', '1..5', '# pass 2'].join('\n');
    expect(Object.fromEntries(readTestStatuses(tap))).toEqual({ a: 'passed', b: 'failed', c: 'skipped', d: 'skipped', 'with # hash': 'passed' });
  });

  test('jest --verbose, pytest -v and -rA, unittest -v', () => {
    const jest = ['  slugify', '    ✓ keeps digits (3 ms)', '    ✕ trims (1 ms)', '    ○ skipped handles unicode', '    ✎ todo later'].join('\n');
    expect(Object.fromEntries(readTestStatuses(jest))).toEqual({ 'keeps digits': 'passed', trims: 'failed', 'handles unicode': 'skipped', later: 'skipped' });
    const pytest = ['tests/test_s.py::test_keeps PASSED  [ 50%]', 'tests/test_s.py::test_param[1] SKIPPED (no)', 'SKIPPED tests/test_s.py::test_later', 'FAILED tests/test_s.py::test_trims - assert'].join('\n');
    expect(Object.fromEntries(readTestStatuses(pytest))).toEqual({
      'tests/test_s.py::test_keeps': 'passed',
      'tests/test_s.py::test_param': 'skipped',
      'tests/test_s.py::test_later': 'skipped',
      'tests/test_s.py::test_trims': 'failed',
    });
    expect(Object.fromEntries(readTestStatuses('test_keeps (tests.test_s.Case) ... ok\ntest_gone (tests.test_s.Case) ... skipped "no"\n'))).toEqual({ test_keeps: 'passed', test_gone: 'skipped' });
  });

  test('a run that prints no names gives none', () => {
    expect(readTestStatuses('Tests: 3 passed, 3 total\n').size).toBe(0);
  });
});

describe('judgeTestPlan', () => {
  const plan = readTestPlan(SPEC);
  const files: Record<string, string> = {
    'lib/slugify.test.js': "test('slugify keeps digits', () => {});\n",
    'test/strings.test.js': "test('capitalize upper-cases the first letter', () => {});\n",
  };
  const facts = (over: Partial<Parameters<typeof judgeTestPlan>[1]> = {}) => ({
    read: (f: string) => files[f],
    changedFiles: ['lib/slugify.test.js'],
    statuses: readTestStatuses('ok 1 - slugify keeps digits\nok 2 - capitalize upper-cases the first letter\n'),
    ...over,
  });

  test('kept: each test in its file, the new one in the change, both ran', () => {
    const verdict = judgeTestPlan(plan, facts());
    expect(verdict.ok).toBe(true);
    expect(verdict.tests.map((t) => t.status)).toEqual(['ran', 'ran']);
  });

  test('a test never written is missing; a skipped one, one that did not run and one not in the change are refused', () => {
    expect(judgeTestPlan(plan, facts({ read: (f) => (f === 'lib/slugify.test.js' ? undefined : files[f]) })).problems).toEqual([
      '"slugify keeps digits" in lib/slugify.test.js (for "slugify keeps digits") is missing: write it in lib/slugify.test.js, with that exact name',
    ]);
    const skipped = judgeTestPlan(plan, facts({ statuses: readTestStatuses('ok 1 - slugify keeps digits # SKIP\nok 2 - capitalize upper-cases the first letter\n') }));
    expect(skipped.tests.map((t) => t.status)).toEqual(['skipped', 'ran']);
    const notRun = judgeTestPlan(plan, facts({ statuses: readTestStatuses('ok 2 - capitalize upper-cases the first letter\n') }));
    expect(notRun.tests.map((t) => t.status)).toEqual(['not-run', 'ran']);
    expect(judgeTestPlan(plan, facts({ changedFiles: [] })).tests.map((t) => t.status)).toEqual(['not-in-change', 'ran']);
  });

  test('with no names printed, a test in its file is unverified (not refused) unless its file skips it', () => {
    const none = facts({ statuses: new Map() });
    expect(judgeTestPlan(plan, none)).toMatchObject({ ok: true, tests: [{ status: 'unverified' }, { status: 'unverified' }] });
    const planned: PlannedTest[] = [{ requirement: 'r', test: 'later', file: 'a.test.js', existing: false }];
    const verdict = judgeTestPlan(planned, { read: () => "test.skip('later', () => {});\n", changedFiles: ['a.test.js'], statuses: new Map() });
    expect(verdict.tests[0]!.status).toBe('skipped');
  });

  test('skip marks in a file: .skip, xit, { skip: true }, a pytest decorator', () => {
    expect(skippedInFile("it.skip('a', () => {})", 'a')).toBe(true);
    expect(skippedInFile("xit('a', () => {})", 'a')).toBe(true);
    expect(skippedInFile("test('a', { skip: true }, () => {})", 'a')).toBe(true);
    expect(skippedInFile('@pytest.mark.skip(reason="x")\ndef test_a():\n', 'test_a')).toBe(true);
    expect(skippedInFile("test('a', () => {})", 'a')).toBe(false);
  });
});
