import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { indexPaths } from '../../src/activities/index-file';

const ID = ['-c', 'user.name=T', '-c', 'user.email=t@localhost', '-c', 'commit.gpgsign=false'];
const git = (cwd: string, ...args: string[]): string => execFileSync('git', [...ID, ...args], { cwd, encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });

const roots: string[] = [];
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

/** A repository with nested, odd and long names, some committed, one only intended to be added. */
function repo(...init: string[]): string {
  const root = mkdtempSync(path.join(tmpdir(), 'warden-index-'));
  roots.push(root);
  git(root, 'init', '-q', ...init, 'repo');
  const dir = path.join(root, 'repo');
  const files = ['a.txt', 'lib/b.js', 'lib/c d.js', 'lib/ünï.md', 'z/y/x/w.txt', Array.from({ length: 15 }, (_, i) => String.fromCharCode(97 + i).repeat(200)).join('/')];
  for (const file of files) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), `${file}\n`);
  }
  git(dir, 'add', '-A');
  git(dir, 'commit', '-qm', 'one');
  writeFileSync(path.join(dir, 'later.txt'), 'x\n');
  git(dir, 'add', '-N', 'later.txt');
  return dir;
}

const listed = (dir: string): string[] => [...new Set(git(dir, 'ls-files', '-z', '--cached').split('\0').filter(Boolean))];
const read = (dir: string): string[] | undefined => indexPaths(readFileSync(path.join(dir, '.git', 'index')));

describe('indexPaths', () => {
  test.each([2, 3, 4])('index version %i: the paths git ls-files --cached lists', (version) => {
    const dir = repo();
    git(dir, 'update-index', '--index-version', String(version));
    expect(read(dir)).toEqual(listed(dir));
    expect(read(dir)).toContain('later.txt');
  });

  test('a SHA-256 repository', () => {
    const dir = repo('--object-format=sha256');
    expect(read(dir)).toEqual(listed(dir));
  });

  test('an unmerged path is named once', () => {
    const dir = repo();
    git(dir, 'checkout', '-q', '-b', 'other');
    writeFileSync(path.join(dir, 'a.txt'), 'other\n');
    git(dir, 'commit', '-qam', 'other');
    git(dir, 'checkout', '-q', '-');
    writeFileSync(path.join(dir, 'a.txt'), 'mine\n');
    git(dir, 'commit', '-qam', 'mine');
    expect(() => git(dir, 'merge', '-q', 'other')).toThrow();
    expect(git(dir, 'ls-files', '--unmerged')).toMatch(/a\.txt/);
    expect(read(dir)).toEqual(listed(dir));
  });

  test('what it cannot read exactly is left to git: a split index, a sparse checkout, a broken checksum', () => {
    const split = repo();
    git(split, 'update-index', '--split-index');
    expect(read(split)).toBeUndefined();
    const sparse = repo();
    git(sparse, 'sparse-checkout', 'set', 'lib');
    expect(read(sparse)).toBeUndefined();
    const broken = repo();
    const data = readFileSync(path.join(broken, '.git', 'index'));
    data[20] = data[20]! ^ 1;
    expect(indexPaths(data)).toBeUndefined();
    expect(indexPaths(Buffer.from('not an index'))).toBeUndefined();
  });
});
