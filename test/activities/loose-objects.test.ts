import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { commitContent, LooseObjectStore } from '../../src/activities/loose-objects';
import type { ObjectFormat } from '../../src/activities/object-names';

const roots: string[] = [];
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

const gitIn = (cwd: string, args: string[]): string => execFileSync('git', args, { cwd, encoding: 'utf8' }).trim();

describe('LooseObjectStore', () => {
  it.each(['sha1', 'sha256'])('writes objects git reads as its own, under the names git gives them (%s)', async (format) => {
    const root = mkdtempSync(path.join(tmpdir(), 'warden-loose-objects-'));
    roots.push(root);
    gitIn(root, ['init', '-q', `--object-format=${format}`, 'repo']);
    const repo = path.join(root, 'repo');
    const store = (await LooseObjectStore.of(repo, format as ObjectFormat))!;
    expect(store).toBeDefined();
    const content = Buffer.from('bytes\0and more\n');
    const blob = await store.write('blob', content);
    expect(blob).toBe(execFileSync('git', ['hash-object', '--stdin'], { cwd: repo, input: content, encoding: 'utf8' }).trim());
    expect(execFileSync('git', ['cat-file', 'blob', blob], { cwd: repo })).toEqual(content);
    const tree = await store.write('tree', Buffer.concat([Buffer.from('100644 f\0'), Buffer.from(blob, 'hex')]));
    expect(gitIn(repo, ['ls-tree', tree])).toBe(`100644 blob ${blob}\tf`);
    const commit = await store.write('commit', commitContent({ tree, parents: [], message: 'one line', when: new Date('2026-01-02T03:04:05Z') }));
    expect(gitIn(repo, ['log', '-1', '--format=%T|%an <%ae>|%aI|%B', commit])).toBe(`${tree}|Warden <warden@localhost>|2026-01-02T03:04:05+00:00|one line`);
    // Written again: the same name, nothing rewritten; and git finds every object sound.
    await expect(store.write('blob', content)).resolves.toBe(blob);
    gitIn(repo, ['update-ref', 'refs/heads/main', commit]);
    gitIn(repo, ['fsck', '--strict', '--no-dangling']);
    // A linked worktree of the repository finds the same store, through its commondir.
    gitIn(repo, ['worktree', 'add', '-q', path.join(root, 'linked'), 'main']);
    expect((await LooseObjectStore.of(path.join(root, 'linked'), format as ObjectFormat))?.objectsDir).toBe(store.objectsDir);
  });

  it('is not used for a shared repository or a config that includes others: git sets what it makes there', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'warden-loose-objects-'));
    roots.push(root);
    gitIn(root, ['init', '-q', '--shared=group', 'shared']);
    await expect(LooseObjectStore.of(path.join(root, 'shared'), 'sha1')).resolves.toBeUndefined();
    gitIn(root, ['init', '-q', 'including']);
    gitIn(path.join(root, 'including'), ['config', 'include.path', '../../team.gitconfig']);
    await expect(LooseObjectStore.of(path.join(root, 'including'), 'sha1')).resolves.toBeUndefined();
  });

  it('is not found where there is no repository: the caller then asks git', async () => {
    const root = mkdtempSync(path.join(tmpdir(), 'warden-loose-objects-'));
    roots.push(root);
    await expect(LooseObjectStore.of(root, 'sha1')).resolves.toBeUndefined();
  });
});
