import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { objectFormatOf, treeNameOfFiles } from '../../src/activities/object-names';

const roots: string[] = [];
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

// A folder named `a` sorts as `a/`: after `a.b` and `a-b`, before `a0`. Empty, binary and non-ASCII content and names.
const FILES: Record<string, string | Buffer> = {
  'a.b': 'dot\n',
  'a-b': 'dash\n',
  'a/x.md': 'in a folder\n',
  'a/deep/er/y': '',
  a0: Buffer.from([0, 1, 2, 255]),
  'ünï.md': 'risk LOW\r\n',
  'Z.md': 'capital\n',
};

describe('treeNameOfFiles', () => {
  it.each(['sha1', 'sha256'])('names the tree git writes from the same files (%s)', async (format) => {
    const root = mkdtempSync(path.join(tmpdir(), 'warden-object-names-'));
    roots.push(root);
    const folder = path.join(root, 'folder');
    for (const [name, content] of Object.entries(FILES)) {
      mkdirSync(path.dirname(path.join(folder, name)), { recursive: true });
      writeFileSync(path.join(folder, name), content);
    }
    execFileSync('git', ['init', '-q', `--object-format=${format}`, 'repo'], { cwd: root });
    const repo = path.join(root, 'repo');
    const env = { ...process.env, GIT_INDEX_FILE: path.join(root, 'index') };
    const names = Object.keys(FILES);
    const blobs = execFileSync('git', ['hash-object', '-w', '--no-filters', '--', ...names.map((name) => path.join(folder, name))], { cwd: repo, encoding: 'utf8' }).trim().split('\n');
    execFileSync('git', ['update-index', '--add', ...names.flatMap((name, i) => ['--cacheinfo', `100644,${blobs[i]},${name}`])], { cwd: repo, env });
    const tree = execFileSync('git', ['write-tree'], { cwd: repo, env, encoding: 'utf8' }).trim();
    expect(objectFormatOf(tree)).toBe(format);
    await expect(treeNameOfFiles(format as 'sha1' | 'sha256', folder, names)).resolves.toBe(tree);
  });
});
