import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { refsFromFiles } from '../../src/activities/ref-files';
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

test('reads every ref as for-each-ref lists it: packed, loose over packed, annotated tags, symbolic refs', async () => {
  const repo = sample();
  git(repo, 'tag', '-a', '-m', 'first', 'v1');
  git(repo, 'branch', 'feature/a');
  git(repo, 'update-ref', 'refs/warden/lineage/x', 'HEAD');
  git(repo, 'pack-refs', '--all');
  writeFileSync(path.join(repo, 'more.txt'), 'more\n');
  git(repo, 'add', 'more.txt');
  git(repo, 'commit', '-qm', 'more'); // main is loose again, and newer than its packed line
  git(repo, 'tag', '-a', '-m', 'second', 'v2');
  git(repo, 'symbolic-ref', 'refs/remotes/origin/HEAD', 'refs/heads/main');
  git(repo, 'symbolic-ref', 'refs/remotes/origin/gone', 'refs/heads/nowhere'); // broken: git leaves it out
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
