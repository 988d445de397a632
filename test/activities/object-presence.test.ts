import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ObjectPresence } from '../../src/activities/object-presence';

const roots: string[] = [];
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@localhost', ...args], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

function repo(format: 'sha1' | 'sha256'): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'warden-presence-'));
  roots.push(dir);
  git(dir, 'init', '-q', `--object-format=${format}`);
  for (let i = 0; i < 40; i++) writeFileSync(path.join(dir, `f${i}.txt`), `${i}\n`);
  git(dir, 'add', '-A');
  git(dir, 'commit', '-qm', 'files');
  return dir;
}

describe('whether the object store holds an object', () => {
  test.each(['sha1', 'sha256'] as const)('%s: loose, then packed, as git says; a name it never held is not there', async (format) => {
    const dir = repo(format);
    const objects = path.join(dir, '.git', 'objects');
    const names = git(dir, 'rev-list', '--objects', '--all').split('\n').map((line) => line.split(' ')[0]!);
    expect(names.length).toBeGreaterThan(40);
    const absent = names[0]!.replace(/^./, (c) => (c === 'f' ? 'e' : 'f'));
    const loose = new ObjectPresence(objects);
    for (const name of names) expect(await loose.holds(name)).toBe(true);
    expect(await loose.holds(absent)).toBe(false);
    git(dir, 'repack', '-adq');
    git(dir, 'prune-packed');
    const packed = new ObjectPresence(objects);
    for (const name of names) expect(await packed.holds(name)).toBe(true);
    expect(await packed.holds(absent)).toBe(false);
  });

  test('with another store to borrow from, an object not found here cannot be said to be missing', async () => {
    const dir = repo('sha1');
    const objects = path.join(dir, '.git', 'objects');
    mkdirSync(path.join(objects, 'info'), { recursive: true });
    writeFileSync(path.join(objects, 'info', 'alternates'), '/nonexistent/objects\n');
    const presence = new ObjectPresence(objects);
    expect(await presence.holds('0'.repeat(40))).toBeUndefined();
    expect(await presence.holds(git(dir, 'rev-parse', 'HEAD'))).toBe(true);
  });
});
