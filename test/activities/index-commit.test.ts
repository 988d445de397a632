import { chmodSync, existsSync, mkdirSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { commitAll, commitIndexHere } from '../../src/activities/index-commit';
import { gitProcessesOf, gitSync, sampleWorktrees } from '../helpers/sample-worktrees';

const worktree = sampleWorktrees('warden-commit-');

function write(dir: string, rel: string, content: string): void {
  mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
  writeFileSync(path.join(dir, rel), content);
}

describe('commitAll', () => {
  test('commits every change, untracked files too, in one git process (add -A): the commit git would make, the branch and HEAD reflogs told', async () => {
    const { worktreePath } = await worktree('commit-all');
    const parent = gitSync(worktreePath, 'rev-parse', 'HEAD');
    write(worktreePath, 'lib/strings.js', 'module.exports = {};\n');
    write(worktreePath, 'new file.txt', 'new\n');
    write(worktreePath, 'deep/er/still/ünï.md', 'x\n');
    write(worktreePath, 'bin/run.sh', '#!/bin/sh\n');
    chmodSync(path.join(worktreePath, 'bin/run.sh'), 0o755);
    symlinkSync('../new file.txt', path.join(worktreePath, 'deep/link'));
    unlinkSync(path.join(worktreePath, 'package.json'));
    const { result: commit, git } = await gitProcessesOf(() => commitAll(worktreePath, 'everything'));
    expect(git).toBe(1);
    expect(commit).toBe(gitSync(worktreePath, 'rev-parse', 'HEAD'));
    expect(gitSync(worktreePath, 'status', '--porcelain')).toBe('');
    // The tree is the index's, as git writes it; the commit names its parent, Warden, and the message.
    expect(gitSync(worktreePath, 'rev-parse', 'HEAD^{tree}')).toBe(gitSync(worktreePath, 'write-tree'));
    expect(gitSync(worktreePath, '-c', 'core.quotePath=false', 'show', '--name-status', '--format=%P|%an <%ae>|%cn <%ce>|%B', 'HEAD').split('\n')).toEqual([
      `${parent}|Warden <warden@localhost>|Warden <warden@localhost>|everything`, '', '',
      'A\tbin/run.sh', 'A\tdeep/er/still/ünï.md', 'A\tdeep/link', 'M\tlib/strings.js', 'A\tnew file.txt', 'D\tpackage.json',
    ]);
    // Dated now, in the local zone, as git dates a commit.
    const [authored, committed] = gitSync(worktreePath, 'log', '-1', '--format=%ad|%cd', '--date=iso-strict-local', 'HEAD').split('|');
    expect(committed).toBe(authored);
    expect(Math.abs(Date.parse(committed!) - Date.now())).toBeLessThan(24 * 3600 * 1000);
    gitSync(worktreePath, 'fsck', '--strict', '--no-dangling');
    expect(gitSync(worktreePath, 'reflog', '-1', '--format=%H %gs', 'refs/heads/warden/commit-all')).toBe(`${commit} commit: everything`);
    expect(gitSync(worktreePath, 'reflog', '-1', '--format=%H %gs', 'HEAD')).toBe(`${commit} commit: everything`);

    // A second step's commit: only what changed is written anew, the rest taken from the index's cache.
    write(worktreePath, 'deep/er/another.md', 'y\n');
    const second = await gitProcessesOf(() => commitAll(worktreePath, 'another'));
    expect(second.git).toBe(1);
    expect(gitSync(worktreePath, 'rev-parse', 'HEAD^')).toBe(commit);
    expect(gitSync(worktreePath, 'rev-parse', 'HEAD^{tree}')).toBe(gitSync(worktreePath, 'write-tree'));
    expect(gitSync(worktreePath, 'diff', '--name-only', 'HEAD^', 'HEAD')).toBe('deep/er/another.md');
    gitSync(worktreePath, 'fsck', '--strict', '--no-dangling');
  });

  test('with nothing to commit, commits nothing and returns undefined', async () => {
    const { worktreePath } = await worktree('commit-nothing');
    const head = gitSync(worktreePath, 'rev-parse', 'HEAD');
    const { result, git } = await gitProcessesOf(() => commitAll(worktreePath, 'nothing'));
    expect(result).toBeUndefined();
    expect(git).toBe(1);
    expect(gitSync(worktreePath, 'rev-parse', 'HEAD')).toBe(head);
  });

  test('a commit that fails for another reason is a GIT_FAILED failure, not "nothing to commit"', async () => {
    const { repo, worktreePath } = await worktree('commit-locked');
    writeFileSync(path.join(worktreePath, 'lib', 'strings.js'), 'module.exports = {};\n');
    gitSync(worktreePath, 'add', '-A');
    // The branch's ref is locked: neither Warden nor git can move it.
    writeFileSync(path.join(repo, '.git', 'refs', 'heads', 'warden', 'commit-locked.lock'), '');
    await expect(commitAll(worktreePath, 'blocked')).rejects.toMatchObject({ type: 'GIT_FAILED' });
  });

  test.each([
    ['a post-commit hook, which git runs', (repo: string) => {
      write(repo, '.git/hooks/post-commit', '#!/bin/sh\ntouch "$GIT_DIR/../../hook-ran"\n');
      chmodSync(path.join(repo, '.git/hooks/post-commit'), 0o755);
    }],
    ['a HEAD commit that is packed', (repo: string) => {
      gitSync(repo, 'repack', '-adq');
      gitSync(repo, 'prune-packed');
    }],
    ['a message git would clean up', () => undefined, 'two lines\n\nof message  '],
    ['hooks kept elsewhere', (repo: string) => gitSync(repo, 'config', 'core.hooksPath', '/nonexistent-hooks')],
    ['a hook defined in the config', (repo: string) => gitSync(repo, 'config', 'hook.notify.event', 'post-commit')],
    ['reflogs turned off by an empty value', (repo: string) => gitSync(repo, 'config', 'core.logAllRefUpdates', '')],
    ['an author of its own in the config', (repo: string) => gitSync(repo, 'config', 'author.name', 'Alice')],
    ['a merge under way', (repo: string, gitDir: string) => writeFileSync(path.join(gitDir, 'MERGE_HEAD'), `${gitSync(repo, 'rev-parse', 'main')}\n`)],
    ['a reflog that cannot be written', (_repo: string, gitDir: string) => {
      rmSync(path.join(gitDir, 'logs', 'HEAD'), { force: true });
      mkdirSync(path.join(gitDir, 'logs', 'HEAD'), { recursive: true });
    }],
  ])('%s: git commits', async (_, arrange, message = 'by git') => {
    const { repo, worktreePath } = await worktree('commit-by-git');
    arrange(repo, path.join(repo, '.git', 'worktrees', 'commit-by-git'));
    write(worktreePath, 'lib/strings.js', 'module.exports = { byGit: true };\n');
    const { result: commit, git } = await gitProcessesOf(() => commitAll(worktreePath, message));
    expect(git).toBe(2);
    expect(commit).toBe(gitSync(worktreePath, 'rev-parse', 'HEAD'));
    expect(gitSync(worktreePath, 'status', '--porcelain')).toBe('');
    if (existsSync(path.join(repo, '.git/hooks/post-commit'))) expect(existsSync(path.join(repo, '.git/hook-ran')) || existsSync(path.join(path.dirname(worktreePath), 'hook-ran'))).toBe(true);
    gitSync(worktreePath, 'fsck', '--no-dangling');
    // Only git's own reflog line for the commit: none from the attempt that handed over.
    expect(gitSync(worktreePath, 'reflog', '--format=%H', 'refs/heads/warden/commit-by-git').split('\n')[0]).toBe(commit);
    expect(gitSync(worktreePath, 'reflog', '--format=%H', 'refs/heads/warden/commit-by-git').split('\n')).toHaveLength(2);
  });

  test('settings that only share a word with those git acts on leave the commit here; a held index lock leaves it to git', async () => {
    const { repo, worktreePath } = await worktree('commit-words');
    gitSync(repo, 'config', 'branch.chore/cleanup.remote', 'origin');
    gitSync(repo, 'config', 'remote.origin.url', 'https://example.com/repo-cleanup.git');
    write(worktreePath, 'lib/strings.js', 'module.exports = { words: true };\n');
    expect((await gitProcessesOf(() => commitAll(worktreePath, 'here'))).git).toBe(1);
    write(worktreePath, 'lib/strings.js', 'module.exports = { locked: true };\n');
    gitSync(worktreePath, 'add', '-A');
    const indexLock = path.join(repo, '.git', 'worktrees', 'commit-words', 'index.lock');
    writeFileSync(indexLock, '');
    try {
      await expect(commitIndexHere(worktreePath, 'held')).resolves.toBe('ask-git');
      expect(existsSync(indexLock)).toBe(true); // someone else's lock is left alone
    } finally {
      rmSync(indexLock);
    }
    expect(typeof (await commitIndexHere(worktreePath, 'free'))).toBe('string');
  });

  test('a tree the index\'s cache names but the store no longer holds is written again, not named broken', async () => {
    const { worktreePath } = await worktree('commit-cached');
    write(worktreePath, 'new/a.txt', 'a\n');
    await commitAll(worktreePath, 'first');
    gitSync(worktreePath, 'write-tree'); // the index's cache now names every tree
    const cachedTree = gitSync(worktreePath, 'rev-parse', 'HEAD:new');
    const objects = gitSync(worktreePath, 'rev-parse', '--git-common-dir');
    rmSync(path.join(path.resolve(worktreePath, objects), 'objects', cachedTree.slice(0, 2), cachedTree.slice(2)));
    write(worktreePath, 'lib/strings.js', 'module.exports = { second: true };\n');
    const { git } = await gitProcessesOf(() => commitAll(worktreePath, 'second'));
    expect(git).toBe(1);
    expect(gitSync(worktreePath, 'rev-parse', 'HEAD:new')).toBe(cachedTree);
    gitSync(worktreePath, 'fsck', '--strict', '--no-dangling');
  });
});
