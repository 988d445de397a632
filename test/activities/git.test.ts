import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { headOf, isAncestor, mergeBase, readBlobs, refCommits } from '../../src/activities/git';
import { gitProcessesOf, gitSync, sampleWorktrees } from '../helpers/sample-worktrees';

const worktree = sampleWorktrees('warden-git-');

describe('headOf', () => {
  test("reads a worktree's commit from git's files; asks git when the branch is packed or HEAD is detached", async () => {
    const { repo, worktreePath } = await worktree('head-of');
    const head = gitSync(worktreePath, 'rev-parse', 'HEAD');
    expect(await gitProcessesOf(() => headOf(worktreePath))).toEqual({ result: head, git: 0 });
    expect(await gitProcessesOf(() => headOf(repo))).toEqual({ result: gitSync(repo, 'rev-parse', 'HEAD'), git: 0 });
    gitSync(repo, 'pack-refs', '--all');
    expect(await gitProcessesOf(() => headOf(worktreePath))).toEqual({ result: head, git: 1 });
    gitSync(worktreePath, 'checkout', '-q', '--detach');
    expect(await gitProcessesOf(() => headOf(worktreePath))).toEqual({ result: head, git: 0 });
  });
});

describe('refCommits', () => {
  /** What git's own for-each-ref says of `refs`, in refCommits' form. */
  function asGitSays(repo: string, refs: readonly string[]): Map<string, unknown> {
    const out = gitSync(repo, 'for-each-ref', '--format=%(refname)%00%(objecttype)%00%(objectname)%00%(tree)%00%(parent)%00%(committerdate:raw)', ...refs);
    const found = new Map<string, unknown>();
    for (const line of out.split('\n')) {
      const [name, type, commit, tree, parents, committerDate] = line.split('\0');
      if (name && type === 'commit' && refs.includes(name)) found.set(name, { commit, tree, parents: parents!.split(' ').filter(Boolean), committerDate });
    }
    return found;
  }

  test('the commits several refs name, with tree, parents and date, from the ref and loose object files: no git process; missing refs, refs below a name asked for and tags left out', async () => {
    const { repo } = await worktree('ref-commits');
    gitSync(repo, 'tag', '-a', '-m', 'annotated', 'v1');
    const main = gitSync(repo, 'rev-parse', 'main');
    const asked = ['refs/heads/main', 'refs/heads/nowhere', 'refs/tags/v1', 'refs/heads/warden', 'refs/heads/warden/ref-commits'];
    const { result, git } = await gitProcessesOf(() => refCommits(repo, asked));
    expect(git).toBe(0);
    expect([...result.keys()].sort()).toEqual(['refs/heads/main', 'refs/heads/warden/ref-commits']);
    expect(result.get('refs/heads/main')).toEqual({
      commit: main,
      tree: gitSync(repo, 'rev-parse', 'main^{tree}'),
      parents: [],
      committerDate: gitSync(repo, 'log', '-1', '--format=%cd', '--date=raw', 'main'),
    });
    expect(result).toEqual(asGitSays(repo, asked));
    writeFileSync(path.join(repo, 'second.txt'), '2\n');
    gitSync(repo, 'add', 'second.txt');
    gitSync(repo, 'commit', '-qm', 'second');
    expect((await refCommits(repo, ['refs/heads/main'])).get('refs/heads/main')?.parents).toEqual([main]);
    // A merge: both parents, in order.
    gitSync(repo, 'update-ref', 'refs/heads/merged', gitSync(repo, 'commit-tree', 'main^{tree}', '-p', 'main', '-p', main, '-m', 'merged'));
    const merged = await gitProcessesOf(() => refCommits(repo, ['refs/heads/merged']));
    expect(merged.git).toBe(0);
    expect(merged.result).toEqual(asGitSays(repo, ['refs/heads/merged']));
    expect(merged.result.get('refs/heads/merged')?.parents).toEqual([gitSync(repo, 'rev-parse', 'main'), main]);
  });

  test('commits that are not loose, and a replace ref, are left to git, which answers as before', async () => {
    const { repo } = await worktree('ref-commits-packed');
    const asked = ['refs/heads/main', 'refs/heads/warden/ref-commits-packed'];
    gitSync(repo, 'repack', '-adq');
    gitSync(repo, 'prune-packed');
    const packed = await gitProcessesOf(() => refCommits(repo, asked));
    expect(packed.git).toBe(1);
    expect(packed.result).toEqual(asGitSays(repo, asked));
    expect(packed.result.size).toBe(2);

    writeFileSync(path.join(repo, 'other.txt'), 'o\n');
    gitSync(repo, 'add', 'other.txt');
    gitSync(repo, 'commit', '-qm', 'other');
    const other = gitSync(repo, 'rev-parse', 'HEAD');
    gitSync(repo, 'replace', 'warden/ref-commits-packed', other);
    const replaced = await gitProcessesOf(() => refCommits(repo, asked));
    expect(replaced.git).toBe(1);
    expect(replaced.result).toEqual(asGitSays(repo, asked));
  });

  test('reads only the refs asked for: a ref file elsewhere that git would have to interpret does not send the question to git', async () => {
    const { repo } = await worktree('ref-commits-own');
    const asked = ['refs/heads/main', 'refs/heads/warden/ref-commits-own'];
    mkdirSync(path.join(repo, '.git', 'refs', 'heads', 'odd'), { recursive: true });
    writeFileSync(path.join(repo, '.git', 'refs', 'heads', 'odd', 'ref'), 'not an object name\n');
    const { result, git } = await gitProcessesOf(() => refCommits(repo, asked));
    expect(git).toBe(0);
    expect(result).toEqual(asGitSays(repo, asked));
    expect(result.size).toBe(2);
  });
});

describe('isAncestor', () => {
  test('told from the loose commits where they reach it; where git could answer otherwise, or the walk cannot tell, git is asked', async () => {
    const { repo, worktreePath } = await worktree('ancestry');
    writeFileSync(path.join(worktreePath, 'a.txt'), 'a\n');
    gitSync(worktreePath, 'add', '-A');
    gitSync(worktreePath, 'commit', '-qm', 'a');
    const head = gitSync(worktreePath, 'rev-parse', 'HEAD');
    expect(await gitProcessesOf(() => isAncestor(repo, 'refs/heads/main', head))).toEqual({ result: true, git: 0 });
    expect(await gitProcessesOf(() => mergeBase(repo, head, 'refs/heads/main'))).toEqual({ result: { stdout: `${gitSync(repo, 'rev-parse', 'main')}\n`, stderr: '', code: 0 }, git: 0 });
    // Not an ancestor: only git can say no.
    expect(await gitProcessesOf(() => isAncestor(repo, head, 'refs/heads/main'))).toEqual({ result: false, git: 1 });
    // A commit the store does not hold, even asked of itself, is git's to refuse.
    const missing = '1'.repeat(40);
    await expect(isAncestor(repo, missing, missing)).rejects.toThrow();
    // Grafts named in the environment change what git reads of a commit.
    const grafts = path.join(repo, 'grafts');
    writeFileSync(grafts, `${head}\n`);
    process.env.GIT_GRAFT_FILE = grafts;
    try {
      expect(await gitProcessesOf(() => isAncestor(repo, 'refs/heads/main', head))).toEqual({ result: false, git: 1 });
    } finally {
      delete process.env.GIT_GRAFT_FILE;
    }
  });

  test('a commit dated in a zone git would not write as it stands is read by git', async () => {
    const { repo } = await worktree('odd-zone');
    const tree = gitSync(repo, 'rev-parse', 'main^{tree}');
    const content = `tree ${tree}\nauthor A <a@localhost> 1700000000 +2500\ncommitter A <a@localhost> 1700000000 +2500\n\nodd\n`;
    const odd = execFileSync('git', ['hash-object', '-t', 'commit', '-w', '--literally', '--stdin'], { cwd: repo, input: content, encoding: 'utf8' }).trim();
    gitSync(repo, 'update-ref', 'refs/heads/odd', odd);
    const { result, git } = await gitProcessesOf(() => refCommits(repo, ['refs/heads/odd']));
    expect(git).toBe(1);
    expect(result.get('refs/heads/odd')?.commit).toBe(odd);
  });
});

describe('readBlobs', () => {
  test('the blobs several names name, byte for byte as git show prints them, in one git process; a missing file or a folder is undefined', async () => {
    const { worktreePath } = await worktree('blobs');
    writeFileSync(path.join(worktreePath, 'ünï.txt'), 'zwölf Äpfel\nno newline at the end');
    writeFileSync(path.join(worktreePath, 'empty.txt'), '');
    writeFileSync(path.join(worktreePath, 'lines.txt'), 'a\n\nmissing 1 2 3\n');
    gitSync(worktreePath, 'add', '-A');
    gitSync(worktreePath, 'commit', '-qm', 'files');
    const head = gitSync(worktreePath, 'rev-parse', 'HEAD');
    const names = ['ünï.txt', 'empty.txt', 'lines.txt', 'lib/strings.js'].map((file) => `${head}:${file}`);
    const { result, git } = await gitProcessesOf(() => readBlobs(worktreePath, [...names, `${head}:nope.txt`, `${head}:lib`]));
    expect(git).toBe(1);
    for (const name of names) expect(result.get(name)).toBe(execFileSync('git', ['show', name], { cwd: worktreePath, encoding: 'utf8' }));
    expect(result.get(`${head}:nope.txt`)).toBeUndefined();
    expect(result.get(`${head}:lib`)).toBeUndefined();
    expect(result.size).toBe(6);
    expect((await gitProcessesOf(() => readBlobs(worktreePath, []))).git).toBe(0);
  });
});
