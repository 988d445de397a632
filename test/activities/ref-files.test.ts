import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { refsFromFiles, refsNamedFromFiles } from '../../src/activities/ref-files';
import { createSampleRepo } from '../../src/client/sample-repo';

const roots: string[] = [];
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@localhost', ...args], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

function sample(): string {
  const root = mkdtempSync(path.join(tmpdir(), 'warden-ref-files-'));
  roots.push(root);
  return createSampleRepo(path.join(root, 'repo'));
}

/** What git itself lists, in the form refsFromFiles gives. */
function listedByGit(repo: string): Record<string, string> {
  return Object.fromEntries(
    git(repo, 'for-each-ref', '--format=%(refname) %(objectname)')
      .split('\n')
      .filter(Boolean)
      .map((line) => line.split(' ') as [string, string]),
  );
}

/**
 * Refs of every form in `repo`: a branch and a lineage ref packed, main loose again and newer
 * than its packed line, a symbolic ref and a broken one.
 */
function mixedRefs(repo: string): void {
  git(repo, 'branch', 'feature/a');
  git(repo, 'update-ref', 'refs/warden/lineage/x', 'HEAD');
  git(repo, 'pack-refs', '--all');
  writeFileSync(path.join(repo, 'more.txt'), 'more\n');
  git(repo, 'add', 'more.txt');
  git(repo, 'commit', '-qm', 'more'); // main is loose again, and newer than its packed line
  git(repo, 'symbolic-ref', 'refs/remotes/origin/HEAD', 'refs/heads/main');
  git(repo, 'symbolic-ref', 'refs/remotes/origin/gone', 'refs/heads/nowhere'); // broken: git leaves it out
}

test('reads every ref as for-each-ref lists it: packed, loose over packed, annotated tags, symbolic refs', async () => {
  const repo = sample();
  git(repo, 'tag', '-a', '-m', 'first', 'v1');
  mixedRefs(repo);
  git(repo, 'tag', '-a', '-m', 'second', 'v2');
  writeFileSync(path.join(repo, 'more.txt'), 'stashed\n');
  git(repo, 'stash', '-q');
  const expected = listedByGit(repo);
  expect(Object.keys(expected)).toEqual(expect.arrayContaining(['refs/heads/main', 'refs/heads/feature/a', 'refs/tags/v1', 'refs/tags/v2', 'refs/remotes/origin/HEAD', 'refs/stash', 'refs/warden/lineage/x']));
  expect(await refsFromFiles(path.join(repo, '.git'))).toEqual(expected);
});

test('leaves to git what it cannot read with certainty: another ref store, a file git would have to interpret', async () => {
  const odd = sample();
  mkdirSync(path.join(odd, '.git', 'refs', 'heads', 'odd'), { recursive: true });
  writeFileSync(path.join(odd, '.git', 'refs', 'heads', 'odd', 'ref'), 'not an object name\n');
  expect(await refsFromFiles(path.join(odd, '.git'))).toBeUndefined();
  const reftable = sample();
  mkdirSync(path.join(reftable, '.git', 'reftable'));
  expect(await refsFromFiles(path.join(reftable, '.git'))).toBeUndefined();
  const plain = sample();
  writeFileSync(path.join(plain, '.git', 'refs', 'heads', 'main.lock'), ''); // an update in progress names no ref
  expect(await refsFromFiles(path.join(plain, '.git'))).toEqual(listedByGit(plain));
});

test('refsNamedFromFiles reads the refs named as git reads each: loose over packed, symbolic refs followed, missing ones and folders left out', async () => {
  const repo = sample();
  mixedRefs(repo);
  const all = listedByGit(repo);
  const named = ['refs/heads/main', 'refs/heads/feature/a', 'refs/warden/lineage/x', 'refs/remotes/origin/HEAD', 'refs/remotes/origin/gone', 'refs/heads/nowhere', 'refs/heads/feature', 'refs/heads'];
  const expected = Object.fromEntries(named.filter((ref) => all[ref]).map((ref) => [ref, all[ref]!]));
  expect(Object.keys(expected).sort()).toEqual(['refs/heads/feature/a', 'refs/heads/main', 'refs/remotes/origin/HEAD', 'refs/warden/lineage/x']);
  expect(await refsNamedFromFiles(path.join(repo, '.git'), named)).toEqual(expected);
  // A ref file git would have to interpret elsewhere is not read; one asked for leaves the answer to git.
  mkdirSync(path.join(repo, '.git', 'refs', 'heads', 'odd'), { recursive: true });
  writeFileSync(path.join(repo, '.git', 'refs', 'heads', 'odd', 'ref'), 'not an object name\n');
  expect(await refsNamedFromFiles(path.join(repo, '.git'), named)).toEqual(expected);
  expect(await refsNamedFromFiles(path.join(repo, '.git'), ['refs/heads/main', 'refs/heads/odd/ref'])).toBeUndefined();
  // Names git would not read as a loose file under refs/ are left to git.
  expect(await refsNamedFromFiles(path.join(repo, '.git'), ['refs/heads/../../config'])).toBeUndefined();
  expect(await refsNamedFromFiles(path.join(repo, '.git'), ['HEAD'])).toBeUndefined();
  // A chain of symbolic refs deeper than these reads follow is left to git, not taken as missing.
  for (let i = 0; i < 7; i++) git(repo, 'symbolic-ref', `refs/chain/${i}`, i === 6 ? 'refs/heads/main' : `refs/chain/${i + 1}`);
  expect(await refsNamedFromFiles(path.join(repo, '.git'), ['refs/chain/5'])).toEqual({ 'refs/chain/5': all['refs/heads/main'] });
  expect(await refsNamedFromFiles(path.join(repo, '.git'), ['refs/chain/0'])).toBeUndefined();
});

test('refsNamedFromFiles leaves to git another ref store, and replace refs when told to', async () => {
  const reftable = sample();
  mkdirSync(path.join(reftable, '.git', 'reftable'));
  expect(await refsNamedFromFiles(path.join(reftable, '.git'), ['refs/heads/main'])).toBeUndefined();
  const replaced = sample();
  const main = git(replaced, 'rev-parse', 'main');
  expect(await refsNamedFromFiles(path.join(replaced, '.git'), ['refs/heads/main'], false)).toEqual({ 'refs/heads/main': main });
  git(replaced, 'replace', '-f', main, git(replaced, 'commit-tree', 'main^{tree}', '-m', 'other'));
  expect(await refsNamedFromFiles(path.join(replaced, '.git'), ['refs/heads/main'])).toEqual({ 'refs/heads/main': main });
  expect(await refsNamedFromFiles(path.join(replaced, '.git'), ['refs/heads/main'], false)).toBeUndefined();
  git(replaced, 'pack-refs', '--all');
  expect(await refsNamedFromFiles(path.join(replaced, '.git'), ['refs/heads/main'], false)).toBeUndefined();
});
