import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { LooseObjectStore } from '../../src/activities/loose-objects';
import { treeLessFolders } from '../../src/activities/tree-without';
import { treeWithoutLineage } from '../../src/activities/worktree';
import { activeLineageDir, doneLineageDir } from '../../src/shared/ids';

const roots: string[] = [];
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@localhost', '-c', 'commit.gpgsign=false', ...args], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

/** A repository with one commit of `files` (path → content). */
function repoWith(files: Record<string, string>): string {
  const repo = mkdtempSync(path.join(tmpdir(), 'warden-tree-without-'));
  roots.push(repo);
  git(repo, 'init', '-q', '-b', 'main');
  for (const [file, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(repo, file)), { recursive: true });
    writeFileSync(path.join(repo, file), content);
  }
  git(repo, 'add', '-A');
  git(repo, 'commit', '-q', '-m', 'files');
  return repo;
}

const lineage = [activeLineageDir('a'), doneLineageDir('a')];

describe('a tree less the lineage folders, from the loose trees', () => {
  test.each([
    ['beside other documents', { 'docs/guide.md': 'g\n', [`${activeLineageDir('a')}/01-triage.md`]: 't\n', [`${activeLineageDir('b')}/01-triage.md`]: 'b\n', 'lib/x.js': '1;\n' }],
    ['the only thing under docs/, which goes too', { [`${activeLineageDir('a')}/01-triage.md`]: 't\n', [`${doneLineageDir('a')}/x/y.md`]: 'y\n', 'lib/x.js': '1;\n' }],
    ['not there at all', { 'lib/x.js': '1;\n', 'docs/lineage/other.md': 'o\n' }],
    ['a file where the folder would be', { 'docs/lineage/active/a': 'a file\n', 'lib/x.js': '1;\n' }],
    ['everything there is', { [`${activeLineageDir('a')}/01-triage.md`]: 't\n' }],
  ])('%s: the tree git makes of it', async (_, files) => {
    const repo = repoWith(files);
    const head = git(repo, 'rev-parse', 'HEAD');
    const store = (await LooseObjectStore.of(repo, 'sha1'))!;
    const made = await treeLessFolders(store, git(repo, 'rev-parse', 'HEAD^{tree}'), lineage);
    expect(made).toBe(await treeWithoutLineage(repo, head, 'a'));
    // Every tree it wrote is whole and well formed.
    git(repo, 'fsck', '--strict', '--no-dangling');
  });

  test('trees that are not loose are left to git', async () => {
    const repo = repoWith({ [`${activeLineageDir('a')}/01-triage.md`]: 't\n', 'lib/x.js': '1;\n' });
    git(repo, 'repack', '-adq');
    git(repo, 'prune-packed');
    const store = (await LooseObjectStore.of(repo, 'sha1'))!;
    await expect(treeLessFolders(store, git(repo, 'rev-parse', 'HEAD^{tree}'), lineage)).resolves.toBeUndefined();
  });

  test.each([
    ['out of git\'s order', (blob: string, lineage: string) => [`40000 lineage\0`, lineage, '100644 b.md\0', blob, '100644 a.md\0', blob]],
    ['holding a .git folder', (blob: string, lineage: string) => [`40000 .GIT\0`, lineage, '40000 lineage\0', lineage, '100644 x.md\0', blob]],
    ['holding a name git refuses on some file systems', (blob: string, lineage: string) => ['100644 a:b\0', blob, '40000 lineage\0', lineage]],
    ['holding a link named as .gitmodules', (blob: string, lineage: string) => ['120000 .gitmodules\0', blob, '40000 lineage\0', lineage]],
  ])('a tree on the way %s is left to git, which would refuse or re-sort it', async (_, parts) => {
    const repo = repoWith({ 'lib/x.js': '1;\n' });
    const blob = git(repo, 'rev-parse', 'HEAD:lib/x.js');
    const mktree = (input: string): string => execFileSync('git', ['mktree'], { cwd: repo, input, encoding: 'utf8' }).trim();
    const active = mktree(`040000 tree ${mktree(`040000 tree ${mktree(`100644 blob ${blob}\t01-triage.md\n`)}\ta\n`)}\tactive\n`);
    const pieces = parts(blob, active).map((piece, i) => (i % 2 === 0 ? Buffer.from(piece, 'utf8') : Buffer.from(piece, 'hex')));
    const docs = execFileSync('git', ['hash-object', '-t', 'tree', '-w', '--literally', '--stdin'], { cwd: repo, input: Buffer.concat(pieces), encoding: 'utf8' }).trim();
    const root = mktree(`040000 tree ${docs}\tdocs\n`);
    const store = (await LooseObjectStore.of(repo, 'sha1'))!;
    await expect(treeLessFolders(store, root, lineage)).resolves.toBeUndefined();
  });

  test('a tree on the way with a mode git no longer writes is left to git', async () => {
    const repo = repoWith({ 'lib/x.js': '1;\n' });
    const blob = git(repo, 'rev-parse', 'HEAD:lib/x.js');
    // An old git's group-writable file mode, beside the lineage folder in docs/.
    const triage = execFileSync('git', ['mktree'], { cwd: repo, input: `100644 blob ${blob}\t01-triage.md\n`, encoding: 'utf8' }).trim();
    const aTree = execFileSync('git', ['mktree'], { cwd: repo, input: `040000 tree ${triage}\ta\n`, encoding: 'utf8' }).trim();
    const activeTree = execFileSync('git', ['mktree'], { cwd: repo, input: `040000 tree ${aTree}\tactive\n`, encoding: 'utf8' }).trim();
    const docsContent = Buffer.concat([
      Buffer.from('100664 old.md\0'), Buffer.from(blob, 'hex'),
      Buffer.from('40000 lineage\0'), Buffer.from(activeTree, 'hex'),
    ]);
    const docs = execFileSync('git', ['hash-object', '-t', 'tree', '-w', '--literally', '--stdin'], { cwd: repo, input: docsContent, encoding: 'utf8' }).trim();
    const root = execFileSync('git', ['mktree'], { cwd: repo, input: `040000 tree ${docs}\tdocs\n`, encoding: 'utf8' }).trim();
    const store = (await LooseObjectStore.of(repo, 'sha1'))!;
    await expect(treeLessFolders(store, root, lineage)).resolves.toBeUndefined();
  });
});
