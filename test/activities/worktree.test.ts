import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { git } from '../../src/activities/git';
import { processTally, tallySince } from '../../src/activities/process-tally';
import { trashEmptied, trashOf } from '../../src/activities/trash';
import { ensureWorktree, mergeIntoBase, removeWorktree, removeWorktreeDirectly, treeWithoutLineage, worktreePathFor } from '../../src/activities/worktree';
import { createSampleRepo } from '../../src/client/sample-repo';
import { activeLineageDir } from '../../src/shared/ids';

let tmp: string;
let repo: string;
let worktreeRoot: string;
let lineageRoot: string;

beforeEach(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'warden-worktree-'));
  repo = createSampleRepo(path.join(tmp, 'repo'));
  worktreeRoot = path.join(tmp, 'worktrees');
  lineageRoot = path.join(tmp, 'lineage');
});
afterEach(async () => {
  await trashEmptied();
  await rm(tmp, { recursive: true, force: true });
});

const make = (intentId: string) => ensureWorktree({ repoPath: repo, baseBranch: 'main', intentId, worktreeRoot });
const remove = (intentId: string, deleteBranch = false) => removeWorktree({ repoPath: repo, intentId, worktreeRoot, lineageRoot, deleteBranch });

/** The worktrees git itself knows of, other than the repo's own. */
async function recordedWorktrees(): Promise<string[]> {
  const list = await git(repo, ['worktree', 'list', '--porcelain']);
  return list
    .split('\n')
    .filter((line) => line.startsWith('worktree '))
    .map((line) => line.slice('worktree '.length))
    .slice(1);
}

describe('making an intent worktree', () => {
  it("finds an existing one without starting git: the branch's commit is read from its ref file, or asked of git when the ref is packed", async () => {
    const { worktreePath, head } = await make('found');
    await writeFile(path.join(worktreePath, 'extra.txt'), 'x\n');
    await git(worktreePath, ['add', 'extra.txt']);
    await git(worktreePath, ['-c', 'user.name=T', '-c', 'user.email=t@localhost', 'commit', '-qm', 'extra']);
    const moved = await git(worktreePath, ['rev-parse', 'HEAD']);
    expect(moved).not.toBe(head);
    const before = processTally();
    expect((await make('found')).head).toBe(moved);
    expect(tallySince(before).launched.git ?? 0).toBe(0);
    await git(repo, ['pack-refs', '--all']);
    expect(existsSync(path.join(repo, '.git', 'refs', 'heads', 'warden', 'found'))).toBe(false);
    const packed = processTally();
    expect((await make('found')).head).toBe(moved);
    expect(tallySince(packed).launched.git).toBe(1);
  });

  it('makes one again whose folder was deleted while git still records it', async () => {
    const { worktreePath } = await make('a');
    await rm(worktreePath, { recursive: true, force: true });
    const again = await make('a');
    expect(again.worktreePath).toBe(worktreePath);
    expect(await git(worktreePath, ['status', '--porcelain'])).toBe('');
    expect(await recordedWorktrees()).toEqual([worktreePath]);
    expect((await readdir(path.join(repo, '.git'))).filter((name) => name.startsWith('warden-removing-'))).toEqual([]);
  });

  it("makes a new intent's worktree and branch in one git process; on a branch kept from before, the branch is checked out as it is", async () => {
    const fresh = processTally();
    const { worktreePath, head } = await make('new');
    expect(tallySince(fresh).launched.git).toBe(1);
    expect(head).toBe(await git(repo, ['rev-parse', 'main']));
    await writeFile(path.join(worktreePath, 'kept.txt'), 'kept\n');
    await git(worktreePath, ['add', 'kept.txt']);
    await git(worktreePath, ['-c', 'user.name=T', '-c', 'user.email=t@localhost', 'commit', '-qm', 'kept']);
    const kept = await git(worktreePath, ['rev-parse', 'HEAD']);
    await remove('new');
    const again = processTally();
    expect((await make('new')).head).toBe(kept);
    expect(tallySince(again).launched.git).toBe(3); // the add refused, the branch asked for, the add of it
  });

  it('works on a repo that is itself a linked worktree of another', async () => {
    const linked = path.join(tmp, 'linked');
    await git(repo, ['worktree', 'add', '-q', '-b', 'side', linked, 'main']);
    const onLinked = (intentId: string) => ensureWorktree({ repoPath: linked, baseBranch: 'side', intentId, worktreeRoot });
    const { worktreePath } = await onLinked('a');
    await writeFile(path.join(worktreePath, 'untracked.txt'), 'work in progress');
    expect((await onLinked('a')).worktreePath).toBe(worktreePath);
    expect(existsSync(path.join(worktreePath, 'untracked.txt'))).toBe(true); // reused, not made again
    await rm(worktreePath, { recursive: true, force: true });
    expect((await onLinked('a')).worktreePath).toBe(worktreePath);
    expect(await git(worktreePath, ['status', '--porcelain'])).toBe('');
  });

  it('reuses an existing worktree as it is, locked or not', async () => {
    const first = await make('a');
    await writeFile(path.join(first.worktreePath, 'untracked.txt'), 'work in progress');
    await git(repo, ['worktree', 'lock', first.worktreePath]);
    await expect(make('a')).resolves.toEqual(first);
    expect(existsSync(path.join(first.worktreePath, 'untracked.txt'))).toBe(true);
  });

  it('fails retryably when git keeps refusing the path (a locked record of a deleted folder)', async () => {
    const { worktreePath } = await make('a');
    await git(repo, ['worktree', 'lock', worktreePath]);
    await rm(worktreePath, { recursive: true, force: true });
    await expect(make('a')).rejects.toMatchObject({ type: 'GIT_FAILED', nonRetryable: false });
  });

  it('makes many worktrees of one repo asked for at once', async () => {
    const ids = Array.from({ length: 12 }, (_, i) => `many-${i}`);
    const made = await Promise.all(ids.map((id) => make(id)));
    expect((await recordedWorktrees()).sort()).toEqual(made.map((ref) => ref.worktreePath).sort());
  });

  it('leaves alone the record of a worktree another intent is making at that moment', async () => {
    // `git worktree add` makes the admin folder first and writes the files in it after: a prune
    // that runs in between removes it, and that add fails.
    const beingMade = path.join(repo, '.git', 'worktrees', 'other');
    await mkdir(beingMade, { recursive: true });
    await make('a');
    expect(existsSync(beingMade)).toBe(true);
  });
});

describe('removing an intent worktree', () => {
  it('removes the folder and git record of a worktree without git', async () => {
    const { worktreePath } = await make('a');
    expect(await recordedWorktrees()).toHaveLength(1);
    expect(await removeWorktreeDirectly(repo, worktreePath)).toBe(true);
    expect(existsSync(worktreePath)).toBe(false);
    expect(await recordedWorktrees()).toEqual([]);
    expect(await readdir(path.join(repo, '.git', 'worktrees')).catch(() => [])).toEqual([]);
    // git agrees nothing is left: the same branch can be checked out in a new worktree at once.
    await expect(make('a')).resolves.toMatchObject({ branch: 'warden/a' });
  });

  it('keeps the other intents of the same repo', async () => {
    await make('a');
    const { worktreePath: b } = await make('b');
    await remove('a');
    expect(await recordedWorktrees()).toEqual([b]);
    expect(existsSync(b)).toBe(true);
    expect(await git(b, ['status', '--porcelain'])).toBe('');
  });

  it('leaves a locked worktree to git, which still removes it', async () => {
    const { worktreePath } = await make('a');
    await git(repo, ['worktree', 'lock', worktreePath]);
    expect(await removeWorktreeDirectly(repo, worktreePath)).toBe(false);
    expect(existsSync(worktreePath)).toBe(true);
    await remove('a');
    expect(existsSync(worktreePath)).toBe(false);
    expect(await recordedWorktrees()).toEqual([]);
  });

  it("touches nothing when the .git file points into another repo's records", async () => {
    const { worktreePath } = await make('a');
    const other = createSampleRepo(path.join(tmp, 'other'));
    const otherWorktree = (await ensureWorktree({ repoPath: other, baseBranch: 'main', intentId: 'o', worktreeRoot })).worktreePath;
    await writeFile(path.join(worktreePath, '.git'), `gitdir: ${path.join(other, '.git', 'worktrees', 'o')}\n`);
    expect(await removeWorktreeDirectly(repo, worktreePath)).toBe(false);
    expect(existsSync(worktreePath)).toBe(true);
    expect(existsSync(path.join(other, '.git', 'worktrees', 'o'))).toBe(true);
    expect(await git(otherWorktree, ['status', '--porcelain'])).toBe('');
  });

  it('prunes the record of a worktree whose folder is already gone', async () => {
    const { worktreePath } = await make('a');
    await rm(worktreePath, { recursive: true, force: true });
    await remove('a');
    expect(await recordedWorktrees()).toEqual([]);
  });

  it('moves the lineage out first and deletes the branch only when asked', async () => {
    const { worktreePath } = await make('a');
    const lineage = path.join(worktreePath, activeLineageDir('a'));
    await mkdir(lineage, { recursive: true });
    await writeFile(path.join(lineage, '01-triage.md'), '# triage\n');
    const { lineageCopy } = await remove('a');
    expect(lineageCopy).toBe(path.join(lineageRoot, 'a'));
    expect(existsSync(path.join(lineageRoot, 'a', '01-triage.md'))).toBe(true);
    expect(await git(repo, ['branch', '--list', 'warden/a'])).not.toBe('');
    await make('b');
    await remove('b', true);
    expect(await git(repo, ['branch', '--list', 'warden/b'])).toBe('');
  });

  it('takes the worktree out of the way at once and deletes its files in the background', async () => {
    const { worktreePath } = await make('a');
    await remove('a');
    expect(existsSync(worktreePath)).toBe(false);
    expect(await recordedWorktrees()).toEqual([]);
    await trashEmptied();
    expect(await readdir(trashOf(worktreeRoot))).toEqual([]);
  });

  it('still reports where the lineage went when an earlier attempt of the cleanup moved it', async () => {
    const { worktreePath } = await make('a');
    await mkdir(path.join(lineageRoot, 'a'), { recursive: true });
    await writeFile(path.join(lineageRoot, 'a', '01-triage.md'), '# triage\n'); // moved there, then the attempt failed
    expect(existsSync(path.join(worktreePath, activeLineageDir('a')))).toBe(false);
    await expect(remove('a')).resolves.toEqual({ lineageCopy: path.join(lineageRoot, 'a') });
    expect(existsSync(worktreePath)).toBe(false);
  });

  it('is safe to call again', async () => {
    await make('a');
    await remove('a');
    await expect(remove('a')).resolves.toEqual({ lineageCopy: undefined });
    expect(existsSync(worktreePathFor(worktreeRoot, repo, 'a'))).toBe(false);
  });
});

describe('merging an intent', () => {
  /** An intent branch with a change to lib/strings.js and a committed lineage folder. */
  async function intentWithChange(intentId: string): Promise<string> {
    const { worktreePath } = await make(intentId);
    await mkdir(path.join(worktreePath, activeLineageDir(intentId)), { recursive: true });
    await writeFile(path.join(worktreePath, activeLineageDir(intentId), '01-triage.md'), '# triage\n');
    await git(worktreePath, ['add', '-A']);
    await git(worktreePath, ['commit', '-q', '-m', `warden(${intentId}): triage attempt 1`]);
    await writeFile(path.join(worktreePath, 'lib/strings.js'), 'module.exports = {};\n');
    await writeFile(path.join(worktreePath, activeLineageDir(intentId), '04-impl-attempt-1.md'), 'done\n');
    await git(worktreePath, ['add', '-A']);
    // Committed at a fixed time, as a branch made long before its merge is.
    const date = '2001-02-03T04:05:06Z';
    await git(worktreePath, ['commit', '-q', '-m', `warden(${intentId}): impl attempt 1`], { env: { GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date } });
    return worktreePath;
  }
  const merge = (intentId: string, withoutLineage: boolean) =>
    mergeIntoBase({ repoPath: repo, baseBranch: 'main', intentId, message: `warden: merge intent ${intentId}`, ...(withoutLineage ? { withoutLineage: { message: `warden(${intentId}): the change` } } : {}) });

  it.each([
    ['checked out', async () => undefined],
    ['not checked out', async () => git(repo, ['checkout', '-q', '-b', 'elsewhere'])],
  ])('without the lineage, the base branch (%s) gets the change alone, once', async (_, arrange) => {
    await intentWithChange('a');
    const fork = await git(repo, ['rev-parse', 'main']);
    await arrange();
    const merged = await merge('a', true);
    expect(await git(repo, ['rev-parse', 'main'])).toBe(merged);
    expect(await git(repo, ['diff', '--name-only', `${merged}^1`, merged])).toBe('lib/strings.js');
    expect(await git(repo, ['show', `${merged}:lib/strings.js`])).toBe('module.exports = {};');
    // No lineage anywhere in what the base branch now holds: its tree, its history.
    expect(await git(repo, ['ls-tree', '-r', '--name-only', merged])).not.toContain('docs/lineage');
    expect(await git(repo, ['log', '--format=%s', '--name-only', 'main'])).not.toContain('docs/lineage');
    expect(await git(repo, ['log', '--format=%P', '-1', `${merged}^2`])).toBe(fork);
    // Dated as the branch head, whenever it is made: a retry makes the same commit, finds it merged, and makes nothing new.
    expect(await git(repo, ['log', '-1', '--format=%aI %cI', `${merged}^2`])).toBe('2001-02-03T04:05:06+00:00 2001-02-03T04:05:06+00:00');
    await expect(merge('a', true)).resolves.toBe(merged);
    expect(await git(repo, ['rev-list', '--count', 'main'])).toBe('3');
  });

  it("merges where the base branch is checked out: the repository's own checkout is read from its HEAD, another worktree found by listing them", async () => {
    await intentWithChange('a');
    const own = processTally();
    const merged = await merge('a', false);
    // the checkout's status, the merge (the branch head read from its files)
    expect(tallySince(own).launched.git).toBe(2);
    expect(await git(repo, ['rev-parse', 'HEAD'])).toBe(merged);
    // A retry merges nothing, and finds the merge made; so does one after the checkout was changed.
    await expect(merge('a', false)).resolves.toBe(merged);
    await writeFile(path.join(repo, 'README.md'), 'edited since\n');
    await expect(merge('a', false)).resolves.toBe(merged);
    await git(repo, ['checkout', '--', 'README.md']);
    expect(await git(repo, ['rev-list', '--count', 'main'])).toBe('4');

    await intentWithChange('b');
    await git(repo, ['checkout', '-q', '-b', 'elsewhere']);
    const other = path.join(tmp, 'main-checkout');
    await git(repo, ['worktree', 'add', '-q', other, 'main']);
    const listed = processTally();
    const second = await merge('b', false);
    expect(tallySince(listed).launched.git).toBe(3); // and the worktree list
    expect(await git(other, ['rev-parse', 'HEAD'])).toBe(second);
    expect(await git(repo, ['rev-parse', 'HEAD'])).toBe(merged);
  });

  it('without the lineage, the change is made from the loose commits and trees, the very commit git makes, and merged in two git processes', async () => {
    const worktreePath = await intentWithChange('a');
    // An identity of the repository's own: git's commits, like Warden's, stay Warden's.
    await git(repo, ['config', 'author.name', 'Alice']);
    await git(repo, ['config', 'committer.email', 'alice@localhost']);
    const branchHead = await git(worktreePath, ['rev-parse', 'HEAD']);
    const fork = await git(repo, ['rev-parse', 'main']);
    const date = await git(repo, ['log', '-1', '--format=%cd', '--date=raw', branchHead]);
    const byGit = await git(repo, ['commit-tree', await treeWithoutLineage(repo, branchHead, 'a'), '-p', fork, '-m', 'warden(a): the change'], { env: { GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date } });
    const before = processTally();
    const merged = await merge('a', true);
    expect(tallySince(before).launched.git).toBe(2); // the checkout's status, the merge
    expect(await git(repo, ['rev-parse', `${merged}^2`])).toBe(byGit);
  });

  it('with the lineage, the base branch gets the intent branch as it is', async () => {
    const worktreePath = await intentWithChange('a');
    const merged = await merge('a', false);
    expect(await git(repo, ['rev-parse', `${merged}^2`])).toBe(await git(worktreePath, ['rev-parse', 'HEAD']));
    expect(await git(repo, ['ls-tree', '-r', '--name-only', merged, '--', 'docs'])).toBe(`${activeLineageDir('a')}/01-triage.md\n${activeLineageDir('a')}/04-impl-attempt-1.md`);
  });
});
