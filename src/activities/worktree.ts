import { createHash } from 'node:crypto';
import { existsSync, realpathSync } from 'node:fs';
import { cp, mkdir, rm, rmdir } from 'node:fs/promises';
import { homedir } from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../shared/errors';
import { activeLineageDir, branchForIntent } from '../shared/ids';
import { git, gitRaw, listWorktrees, refExists } from './git';

/** Where an intent's worktree lives: outside the target repo, one folder per repo and intent. */
export function worktreePathFor(worktreeRoot: string, repoPath: string, intentId: string): string {
  const repo = realpathSync(repoPath);
  let root = path.resolve(worktreeRoot);
  // A worktree inside the target's working tree would show up in its `git status`.
  if (isInside(root, repo)) root = path.join(homedir(), '.warden', 'worktrees');
  const tag = createHash('sha256').update(repo).digest('hex').slice(0, 8);
  return path.join(root, `${path.basename(repo)}-${tag}`, intentId);
}

function isInside(child: string, parent: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

export interface WorktreeRef {
  readonly worktreePath: string;
  readonly branch: string;
  readonly head: string;
}

/**
 * Makes sure the intent's worktree exists on branch `warden/<id>`, creating the branch from the
 * base branch the first time. Idempotent: an existing worktree is reused, a half-made one
 * (a crash during `git worktree add`) is pruned and made again, and an existing branch is
 * checked out as it is (a resumed intent continues from its own commits).
 */
export async function ensureWorktree(input: {
  readonly repoPath: string;
  readonly baseBranch: string;
  readonly intentId: string;
  readonly worktreeRoot: string;
}): Promise<WorktreeRef> {
  const worktreePath = worktreePathFor(input.worktreeRoot, input.repoPath, input.intentId);
  const branch = branchForIntent(input.intentId);
  const known = await listWorktrees(input.repoPath);
  if (existsSync(worktreePath) && known.get(realpathSync(worktreePath)) === `refs/heads/${branch}`) {
    return { worktreePath, branch, head: await git(worktreePath, ['rev-parse', 'HEAD']) };
  }
  await rm(worktreePath, { recursive: true, force: true });
  await git(input.repoPath, ['worktree', 'prune']);
  await mkdir(path.dirname(worktreePath), { recursive: true });
  if (await refExists(input.repoPath, `refs/heads/${branch}`)) {
    await git(input.repoPath, ['worktree', 'add', '-q', worktreePath, branch]);
  } else {
    await git(input.repoPath, ['worktree', 'add', '-q', '-b', branch, worktreePath, input.baseBranch]);
  }
  return { worktreePath, branch, head: await git(worktreePath, ['rev-parse', 'HEAD']) };
}

/**
 * Removes the intent's worktree (and, when asked, its branch), first copying any lineage that
 * was not merged to `lineageRoot/<id>` so the record survives. Safe to call repeatedly.
 */
export async function removeWorktree(input: {
  readonly repoPath: string;
  readonly intentId: string;
  readonly worktreeRoot: string;
  readonly lineageRoot: string;
  readonly deleteBranch: boolean;
}): Promise<{ readonly lineageCopy?: string }> {
  const worktreePath = worktreePathFor(input.worktreeRoot, input.repoPath, input.intentId);
  let lineageCopy: string | undefined;
  const lineage = path.join(worktreePath, activeLineageDir(input.intentId));
  if (existsSync(lineage)) {
    lineageCopy = path.join(input.lineageRoot, input.intentId);
    await rm(lineageCopy, { recursive: true, force: true });
    await cp(lineage, lineageCopy, { recursive: true });
  }
  // `worktree remove` drops git's record of the worktree too; only a folder removed some other
  // way (or already gone, e.g. after a crash) leaves a record for `prune`. One git process fewer
  // per intent matters when a stop cleans up a hundred intents at once.
  const removed = existsSync(worktreePath) && (await gitRaw(input.repoPath, ['worktree', 'remove', '--force', '--force', worktreePath])).code === 0;
  if (!removed) {
    await rm(worktreePath, { recursive: true, force: true });
    await git(input.repoPath, ['worktree', 'prune']);
  }
  await rmdir(path.dirname(worktreePath)).catch(() => undefined); // only if no other intent of this repo is there
  const branch = branchForIntent(input.intentId);
  if (input.deleteBranch && (await refExists(input.repoPath, `refs/heads/${branch}`))) {
    await git(input.repoPath, ['branch', '-D', '-q', branch]);
  }
  return { lineageCopy };
}

/**
 * Merges `warden/<id>` into the base branch and nothing else. If the base branch is checked out
 * (the usual case), the merge runs in that working tree, which must be clean; otherwise the merge
 * commit is built with `git merge-tree` and the branch moved with a compare-and-swap.
 * Idempotent: if the base already contains the intent branch, the base's head is returned.
 */
export async function mergeIntoBase(input: {
  readonly repoPath: string;
  readonly baseBranch: string;
  readonly intentId: string;
  readonly message: string;
}): Promise<string> {
  const branch = branchForIntent(input.intentId);
  const baseRef = `refs/heads/${input.baseBranch}`;
  const branchHead = await git(input.repoPath, ['rev-parse', `refs/heads/${branch}`]);
  const alreadyMerged = await gitRaw(input.repoPath, ['merge-base', '--is-ancestor', branchHead, baseRef]);
  if (alreadyMerged.code === 0) return git(input.repoPath, ['rev-parse', baseRef]);

  const checkedOutAt = [...(await listWorktrees(input.repoPath))].find(([, ref]) => ref === baseRef)?.[0];
  if (checkedOutAt) {
    const dirty = await git(checkedOutAt, ['status', '--porcelain', '--untracked-files=no']);
    if (dirty) {
      throw ApplicationFailure.create({
        type: FailureType.BaseBranchDirty,
        message: `${input.baseBranch} has uncommitted changes in ${checkedOutAt}; commit or stash them, then resume the merge`,
        nonRetryable: true,
      });
    }
    const merged = await gitRaw(checkedOutAt, ['merge', '--no-ff', '--no-edit', '-q', '-m', input.message, branch]);
    if (merged.code !== 0) {
      await gitRaw(checkedOutAt, ['merge', '--abort']);
      throw mergeConflict(input.baseBranch, branch, merged.stdout + merged.stderr);
    }
    return git(checkedOutAt, ['rev-parse', 'HEAD']);
  }

  const baseHead = await git(input.repoPath, ['rev-parse', baseRef]);
  const tree = await gitRaw(input.repoPath, ['merge-tree', '--write-tree', baseHead, branchHead]);
  if (tree.code !== 0) throw mergeConflict(input.baseBranch, branch, tree.stdout);
  const treeId = tree.stdout.split('\n')[0]!.trim();
  const commit = await git(input.repoPath, ['commit-tree', treeId, '-p', baseHead, '-p', branchHead, '-m', input.message]);
  await git(input.repoPath, ['update-ref', '-m', `warden: merge ${branch}`, baseRef, commit, baseHead]);
  return commit;
}

function mergeConflict(base: string, branch: string, detail: string): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.MergeConflict,
    message: `${branch} does not merge cleanly into ${base}: ${detail.trim().slice(-500)}`,
    nonRetryable: true,
  });
}
