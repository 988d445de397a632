import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { diffFromBaseOf } from '../../src/activities/change-inspection';
import { compareTestFile, detectTestTampering, profileTestFile, stripComments } from '../../src/activities/test-tamper';
import { ensureWorktree } from '../../src/activities/worktree';
import { processTally, tallySince } from '../../src/activities/process-tally';
import { createSampleRepo } from '../../src/client/sample-repo';

const ID = ['-c', 'user.name=Agent', '-c', 'user.email=agent@localhost', '-c', 'commit.gpgsign=false'];
function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', [...ID, ...args], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

const roots: string[] = [];
afterAll(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

const PY_TEST = [
  'import pytest',
  'from pkg.calc import add',
  '',
  'def test_add():',
  '    assert add(1, 2) == 3',
  '    assert add(0, 0) == 0',
  '',
  'def test_raises():',
  '    with pytest.raises(TypeError):',
  '        add(None, 1)',
  '',
].join('\n');

/** The sample repo plus a Python test, and a worktree on warden/<id>. */
async function setup(): Promise<{ repo: string; wt: string; root: string }> {
  const root = mkdtempSync(path.join(tmpdir(), 'warden-tamper-'));
  roots.push(root);
  const repo = createSampleRepo(path.join(root, 'repo'));
  mkdirSync(path.join(repo, 'tests'));
  writeFileSync(path.join(repo, 'tests/test_calc.py'), PY_TEST);
  mkdirSync(path.join(repo, 'test/fixtures'), { recursive: true });
  writeFileSync(path.join(repo, 'test/fixtures/data.json'), '{}\n');
  git(repo, 'add', '-A');
  git(repo, 'commit', '-qm', 'python tests');
  const { worktreePath } = await ensureWorktree({ repoPath: repo, baseBranch: 'main', intentId: 'tamper', worktreeRoot: path.join(root, 'wt') });
  return { repo, wt: worktreePath, root };
}

function edit(file: string, from: string | RegExp, to: string): void {
  const content = readFileSync(file, 'utf8');
  const next = content.replace(from, to);
  if (next === content) throw new Error(`no ${String(from)} in ${file}`);
  writeFileSync(file, next);
}

function summary(findings: Awaited<ReturnType<typeof detectTestTampering>>): string[] {
  return findings.map((f) => `${f.kind} ${f.path}${f.line ? `:${f.line}` : ''}`);
}

describe('detectTestTampering against the base branch', () => {
  test('no changes, new tests, and implementation changes are not tampering', async () => {
    const s = await setup();
    expect(await detectTestTampering(s.wt, 'refs/heads/main')).toEqual([]);
    writeFileSync(path.join(s.wt, 'lib/strings.js'), "'use strict';\nmodule.exports = {};\n");
    writeFileSync(path.join(s.wt, 'test/slug.test.js'), "const test = require('node:test');\ntest('slug', () => { assert.ok(true); });\n");
    edit(path.join(s.wt, 'test/strings.test.js'), /\n$/, "\ntest('more', () => { assert.strictEqual(1, 1); });\n");
    git(s.wt, 'add', '-A');
    git(s.wt, 'commit', '-qm', 'agent');
    rmSync(path.join(s.wt, 'test/fixtures/data.json')); // test data, not a test
    writeFileSync(path.join(s.wt, 'docs-lineage.md'), 'x');
    expect(await detectTestTampering(s.wt, 'refs/heads/main')).toEqual([]);
  });

  test('a deleted test file, committed or not', async () => {
    const s = await setup();
    git(s.wt, 'rm', '-q', 'test/strings.test.js');
    git(s.wt, 'commit', '-qm', 'agent: drop the failing test');
    rmSync(path.join(s.wt, 'tests/test_calc.py'));
    const findings = await detectTestTampering(s.wt, 'refs/heads/main');
    expect(summary(findings)).toEqual(['test-deleted test/strings.test.js', 'test-deleted tests/test_calc.py']);
    expect(findings[0]!.detail).toBe('test file test/strings.test.js was deleted');
  });

  test('with the merge base already known, the same findings and no git process to find it', async () => {
    const s = await setup();
    git(s.wt, 'rm', '-q', 'test/strings.test.js');
    git(s.wt, 'commit', '-qm', 'agent: drop the failing test');
    const base = git(s.wt, 'merge-base', 'HEAD', 'refs/heads/main');
    const asked = processTally();
    const found = await detectTestTampering(s.wt, 'refs/heads/main');
    const askedCount = tallySince(asked).launched.git ?? 0;
    const known = processTally();
    expect(await detectTestTampering(s.wt, 'refs/heads/main', base)).toEqual(found);
    // Alone it locates the worktree's repository and asks for the merge base; told, it asks neither.
    expect(tallySince(known).launched.git ?? 0).toBeLessThan(askedCount);
    expect(summary(found)).toEqual(['test-deleted test/strings.test.js']);
  });

  test('with the untracked files already known too, the same findings and one more git process fewer', async () => {
    const s = await setup();
    writeFileSync(path.join(s.wt, 'test/new.test.js'), "it.skip('later', () => {});\n");
    const base = git(s.wt, 'merge-base', 'HEAD', 'refs/heads/main');
    const untracked = git(s.wt, 'ls-files', '--others', '--exclude-standard').split('\n').filter(Boolean);
    const asked = processTally();
    const found = await detectTestTampering(s.wt, 'refs/heads/main', base);
    const askedCount = tallySince(asked).launched.git ?? 0;
    const known = processTally();
    expect(await detectTestTampering(s.wt, 'refs/heads/main', base, untracked)).toEqual(found);
    expect(tallySince(known).launched.git ?? 0).toBe(askedCount - 1);
    expect(summary(found)).toEqual(['test-skipped test/new.test.js:1']);
  });

  test('skipped, focused and todo tests (JavaScript)', async () => {
    const s = await setup();
    const file = path.join(s.wt, 'test/strings.test.js');
    edit(file, "test('slugify", "test.skip('slugify");
    edit(file, "test('capitalize", "test.only('capitalize");
    writeFileSync(path.join(s.wt, 'test/new.test.js'), "describe.skip('all', () => {});\nit.todo('later');\n");
    const findings = await detectTestTampering(s.wt, 'refs/heads/main');
    expect(summary(findings)).toEqual([
      'test-skipped test/new.test.js:1',
      'test-skipped test/new.test.js:2',
      'test-skipped test/strings.test.js:10',
      'test-focused test/strings.test.js:6',
    ]);
    expect(findings.find((f) => f.kind === 'test-focused')!.detail).toMatch(/so the others do not run: test\.only\('capitalize/);
  });

  test('removed and commented-out assertions and test cases', async () => {
    const s = await setup();
    const file = path.join(s.wt, 'test/strings.test.js');
    edit(file, "  assert.strictEqual(strings.slugify('  Hello, Wide World! '), 'hello-wide-world');", "  // assert.strictEqual(strings.slugify('  Hello, Wide World! '), 'hello-wide-world');");
    git(s.wt, 'commit', '-qam', 'agent: weaken');
    const py = path.join(s.wt, 'tests/test_calc.py');
    edit(py, /def test_raises\(\):[\s\S]*$/, '');
    const findings = await detectTestTampering(s.wt, 'refs/heads/main');
    expect(summary(findings)).toEqual([
      'assertions-removed test/strings.test.js',
      'tests-removed tests/test_calc.py',
      'assertions-removed tests/test_calc.py',
    ]);
    expect(findings[0]!.detail).toBe('assertions went from 3 to 2');
    expect(findings[1]!.detail).toBe('test cases went from 2 to 1');
  });

  test('pytest and unittest skips and expected failures', async () => {
    const s = await setup();
    const py = path.join(s.wt, 'tests/test_calc.py');
    edit(py, 'def test_add():', '@pytest.mark.skip(reason="flaky")\ndef test_add():');
    edit(py, 'def test_raises():', '@pytest.mark.xfail\ndef test_raises():');
    writeFileSync(path.join(s.wt, 'tests/test_more.py'), 'import unittest\nclass T(unittest.TestCase):\n    @unittest.skip("later")\n    def test_x(self):\n        self.assertTrue(True)\n    def test_y(self):\n        self.skipTest("no")\n');
    const findings = await detectTestTampering(s.wt, 'refs/heads/main');
    expect(summary(findings)).toEqual([
      'test-skipped tests/test_calc.py:4',
      'test-skipped tests/test_calc.py:9',
      'test-skipped tests/test_more.py:3',
      'test-skipped tests/test_more.py:7',
    ]);
  });

  test('tests added to the base branch after the intent started are not deletions', async () => {
    const s = await setup();
    writeFileSync(path.join(s.repo, 'test/other.test.js'), "test('x', () => { expect(1).toBe(1); });\n");
    git(s.repo, 'add', '-A');
    git(s.repo, 'commit', '-qm', 'someone else adds a test');
    expect(await detectTestTampering(s.wt, 'refs/heads/main')).toEqual([]);
  });

  test('a renamed test file is compared with its old self; moved out of the tests it is deleted', async () => {
    const s = await setup();
    git(s.wt, 'mv', 'test/strings.test.js', 'test/strings.spec.js');
    git(s.wt, 'commit', '-qm', 'rename');
    expect(await detectTestTampering(s.wt, 'refs/heads/main')).toEqual([]);
    edit(path.join(s.wt, 'test/strings.spec.js'), "test('capitalize", "test.skip('capitalize");
    expect(summary(await detectTestTampering(s.wt, 'refs/heads/main'))).toEqual(['test-skipped test/strings.spec.js:6']);
    // The diff (renames found) and the untracked files handed in: the same findings, from the show of the old self alone
    const base = git(s.wt, 'merge-base', 'HEAD', 'refs/heads/main');
    const diff = await diffFromBaseOf({ worktreePath: s.wt, repoPath: s.repo, base });
    expect(diff).toEqual([{ code: expect.stringMatching(/^R/), from: 'test/strings.test.js', path: 'test/strings.spec.js' }]);
    const known = processTally();
    expect(summary(await detectTestTampering(s.wt, 'refs/heads/main', base, [], diff))).toEqual(['test-skipped test/strings.spec.js:6']);
    expect(tallySince(known).launched.git).toBe(1);
    git(s.wt, 'checkout', '-q', '--', '.');
    mkdirSync(path.join(s.wt, 'lib/old'));
    git(s.wt, 'mv', 'test/strings.spec.js', 'lib/old/strings.js');
    expect(summary(await detectTestTampering(s.wt, 'refs/heads/main'))).toEqual(['test-deleted test/strings.test.js']);
  });

  test('every changed test file is read at the base from one git process', async () => {
    const s = await setup();
    edit(path.join(s.wt, 'test/strings.test.js'), "test('capitalize", "test.skip('capitalize");
    edit(path.join(s.wt, 'tests/test_calc.py'), '    assert add(0, 0) == 0\n', '');
    const base = git(s.wt, 'merge-base', 'HEAD', 'refs/heads/main');
    const diff = await diffFromBaseOf({ worktreePath: s.wt, repoPath: s.repo, base });
    const known = processTally();
    const findings = summary(await detectTestTampering(s.wt, 'refs/heads/main', base, [], diff));
    expect(tallySince(known).launched.git).toBe(1); // one a file before
    expect(findings).toEqual(['test-skipped test/strings.test.js:6', 'assertions-removed tests/test_calc.py']);
  });

  test('an unknown base is a clear error', async () => {
    const s = await setup();
    await expect(detectTestTampering(s.wt, 'refs/heads/nope')).rejects.toThrow(/cannot compare .* with refs\/heads\/nope/);
  });
});

describe('profiles and comparisons (pure)', () => {
  test('comments are stripped before counting; strings are kept', () => {
    const js = "expect(a).toBe(1); // expect(b)\n/* expect(c)\n expect(d) */ const s = '// expect(e)';\n";
    expect(stripComments(js, 'js')).toBe("expect(a).toBe(1); \n\n const s = '// expect(e)';\n");
    expect(profileTestFile(js, 'js').assertions).toBe(1);
    const py = 'assert x  # assert y\ns = "# assert z"\n"""\nassert w\n"""\n';
    expect(profileTestFile(py, 'python').assertions).toBe(1);
  });

  test('JS test counting: it/test/each variants count, regex.test does not', () => {
    const js = [
      "it('a', () => {});",
      "test.skip('b', () => {});",
      "it.each([1, 2])('c %i', (n) => {});",
      'xit("d", () => {});',
      'if (/x/.test(s)) run();',
      'const latest = attest(1);',
    ].join('\n');
    expect(profileTestFile(js, 'js').tests).toBe(4);
  });

  test('node:test skip options and mocha this.skip() are skips; moved skips are not new', () => {
    expect(compareTestFile('a.test.js', "test('a', () => {});\n", "test('a', { skip: true }, () => {});\n").map((f) => f.kind)).toEqual(['test-skipped']);
    expect(compareTestFile('a.test.js', "it('a', function () {});\n", "it('a', function () { this.skip(); });\n").map((f) => f.kind)).toEqual(['test-skipped']);
    const before = "it.skip('old', () => {});\nit('a', () => { expect(1).toBe(1); });\n";
    const after = "it('a', () => { expect(1).toBe(1); });\n\nit.skip('old', () => {});\n";
    expect(compareTestFile('a.test.js', before, after)).toEqual([]);
  });

  test('Go: t.Skip and removed t.Error calls', () => {
    const before = 'func TestA(t *testing.T) {\n\tif got != 1 {\n\t\tt.Errorf("bad")\n\t}\n}\n';
    const after = 'func TestA(t *testing.T) {\n\tt.Skip("later")\n}\n';
    expect(compareTestFile('pkg/a_test.go', before, after).map((f) => f.kind)).toEqual(['test-skipped', 'assertions-removed']);
  });
});
