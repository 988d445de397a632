import { createHash, randomBytes } from 'node:crypto';
import { existsSync, realpathSync } from 'node:fs';
import { cp, mkdir, readFile, realpath, rename, rm, rmdir, stat } from 'node:fs/promises';
import { homedir } from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../shared/errors';
import { activeLineageDir, branchForIntent, doneLineageDir } from '../shared/ids';
import { git, gitFailed, gitRaw, headOf, isAncestor, listWorktrees, mergeBase, refCommits, refExists, withTemporaryIndex, type GitResult } from './git';
import { commitContent, LooseObjectStore } from './loose-objects';
import { objectFormatOf } from './object-names';
import { OneAtATime } from './one-at-a-time';
import { treeLessFolders } from './tree-without';
import { throwAway, trashOf } from './trash';
import { folderOfRecord, recordNamedBy, recordsOfFolder } from './worktree-records';

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
 * (a crash during `git worktree add`) is forgotten and made again, and an existing branch is
 * checked out as it is (a resumed intent continues from its own commits).
 */
export async function ensureWorktree(input: WorktreeRequest): Promise<WorktreeRef> {
  // Every stage after the first finds its worktree there: read git's record of it, and neither
  // list every worktree of the repo nor wait behind the worktrees being made.
  return (await existingWorktree(input)) ?? worktreesBeingMade.run(realpathSync(input.repoPath), () => makeWorktree(input));
}

interface WorktreeRequest {
  readonly repoPath: string;
  readonly baseBranch: string;
  readonly intentId: string;
  readonly worktreeRoot: string;
}

/**
 * git is not made for `git worktree add` running in parallel in one repo: an `add` or `list`
 * dies ("failed to read .git/worktrees/<id>/commondir") on a record another `add` has begun and
 * not finished. This worker makes one worktree of a repo at a time. (Removal stays parallel: it
 * normally runs no git, and a stop removes a hundred at once.)
 */
const worktreesBeingMade = new OneAtATime();

/** The intent's worktree if git's record of it checks out and has the intent branch checked out. */
async function existingWorktree(input: WorktreeRequest): Promise<WorktreeRef | undefined> {
  const worktreePath = worktreePathFor(input.worktreeRoot, input.repoPath, input.intentId);
  const branch = branchForIntent(input.intentId);
  const record = await worktreeRecord(input.repoPath, worktreePath, { lockedToo: true });
  if (!record) return undefined;
  const checkedOut = await readFile(path.join(record, 'HEAD'), 'utf8').catch(() => '');
  if (checkedOut.trim() !== `ref: refs/heads/${branch}`) return undefined;
  return { worktreePath, branch, head: await branchHead(path.dirname(path.dirname(record)), worktreePath, branch) };
}

/**
 * The commit `refs/heads/<branch>` names, from its loose ref file in the common git dir, which
 * git itself reads first (a loose ref wins over packed-refs): every activity of an intent starts
 * here, and it is read anew each time. Git is asked when there is no such file (a packed ref,
 * another ref store) or it holds anything but an object name.
 */
async function branchHead(commonDir: string, worktreePath: string, branch: string): Promise<string> {
  const loose = (await readFile(path.join(commonDir, 'refs', 'heads', ...branch.split('/')), 'utf8').catch(() => '')).trim();
  if (/^(?:[0-9a-f]{40}|[0-9a-f]{64})$/.test(loose)) return loose;
  return git(worktreePath, ['rev-parse', 'HEAD']);
}

async function makeWorktree(input: WorktreeRequest): Promise<WorktreeRef> {
  const worktreePath = worktreePathFor(input.worktreeRoot, input.repoPath, input.intentId);
  const branch = branchForIntent(input.intentId);
  if (existsSync(worktreePath)) {
    const existing = await existingWorktree(input);
    if (existing) return existing;
    // A repo that is itself a linked worktree keeps its records elsewhere: ask git.
    const known = await listWorktrees(input.repoPath);
    if (known.get(realpathSync(worktreePath)) === `refs/heads/${branch}`) {
      return { worktreePath, branch, head: await git(worktreePath, ['rev-parse', 'HEAD']) };
    }
  }
  await rm(worktreePath, { recursive: true, force: true });
  await mkdir(path.dirname(worktreePath), { recursive: true });
  let added = await addWorktree(input, worktreePath, branch);
  if (added.code !== 0) {
    // git refuses a path it still has a record of (its folder gone in a crash). Forget that
    // record and try once more; looking for one beforehand would read every worktree's record of
    // the repo for every intent.
    await forgetRecordsOf(input.repoPath, worktreePath);
    added = await addWorktree(input, worktreePath, branch);
  }
  if (added.code !== 0) throw gitFailed(input.repoPath, ['worktree', 'add', worktreePath], added);
  return { worktreePath, branch, head: await headOf(worktreePath) };
}

/**
 * `git worktree add` of the intent branch, made from the base branch if it does not exist yet (a
 * failed add may have made it). Made first, as a new intent's is: git refuses `-b` for a branch
 * that exists before it makes anything, and only then is the branch asked for.
 */
async function addWorktree(input: WorktreeRequest, worktreePath: string, branch: string): Promise<GitResult> {
  const made = await gitRaw(input.repoPath, ['worktree', 'add', '-q', '-b', branch, worktreePath, input.baseBranch]);
  if (made.code === 0 || !(await refExists(input.repoPath, `refs/heads/${branch}`))) return made;
  return gitRaw(input.repoPath, ['worktree', 'add', '-q', worktreePath, branch]);
}

/**
 * Removes the intent's worktree (and, when asked, its branch), first moving any lineage that
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
  const lineageCopy = await keepLineage(worktreePath, path.join(input.lineageRoot, input.intentId), input.intentId);
  // The usual case needs no git process (see removeWorktreeDirectly); anything unusual goes to
  // `git worktree remove`; a folder already gone (e.g. after a crash) leaves only its record.
  const removed =
    (await removeWorktreeDirectly(input.repoPath, worktreePath)) ||
    (existsSync(worktreePath) && (await gitRaw(input.repoPath, ['worktree', 'remove', '--force', '--force', worktreePath])).code === 0);
  if (!removed) {
    await rm(worktreePath, { recursive: true, force: true });
    await forgetRecordsOf(input.repoPath, worktreePath);
  }
  await rmdir(path.dirname(worktreePath)).catch(() => undefined); // only if no other intent of this repo is there
  const branch = branchForIntent(input.intentId);
  if (input.deleteBranch) {
    // Deleted straight away; only a failed delete asks whether there was a branch (a retry finds none).
    const deleted = await gitRaw(input.repoPath, ['branch', '-D', '-q', branch]);
    if (deleted.code !== 0 && (await refExists(input.repoPath, `refs/heads/${branch}`))) throw gitFailed(input.repoPath, ['branch', '-D', '-q', branch], deleted);
  }
  return { lineageCopy };
}

/**
 * Moves the intent's active lineage out of its worktree to `copy` (a rename; a copy across file
 * systems), replacing an older copy. Where the worktree is there but its lineage is not, an
 * earlier attempt of this cleanup has moved it already: `copy` is where it went.
 */
async function keepLineage(worktreePath: string, copy: string, intentId: string): Promise<string | undefined> {
  const lineage = path.join(worktreePath, activeLineageDir(intentId));
  if (!existsSync(lineage)) return existsSync(worktreePath) && existsSync(copy) ? copy : undefined;
  await rm(copy, { recursive: true, force: true });
  await mkdir(path.dirname(copy), { recursive: true });
  try {
    await rename(lineage, copy);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EXDEV') throw error;
    await cp(lineage, copy, { recursive: true });
  }
  return copy;
}

/**
 * Removes a worktree and git's record of it without running git: the folder, then its admin
 * folder `<common dir>/worktrees/<name>` (the layout gitrepository-layout(5) documents, the same
 * two steps `git worktree remove` takes). A stop cleans up a hundred intents at once, and each
 * git process spawned from a busy worker costs tens of milliseconds. Only a record that checks
 * out both ways (the worktree's `.git` names the admin folder, whose `gitdir` names it back,
 * inside this repo's `worktrees/`) and is not locked is removed here; otherwise this returns
 * false and touches nothing.
 */
export async function removeWorktreeDirectly(repoPath: string, worktreePath: string): Promise<boolean> {
  const record = await worktreeRecord(repoPath, worktreePath);
  if (!record) return false;
  // Out of the way at once; its files are deleted in the background (see trash.ts).
  await throwAway(worktreePath, trashOf(path.dirname(path.dirname(worktreePath))));
  await discardRecord(record);
  return true;
}

/**
 * Forgets git's records of the worktree at `worktreePath` (its folder gone), and no other. This
 * is what `git worktree prune` would do for it, but prune also takes the record of a worktree
 * another intent is making at that moment (git writes its admin folder before the files in it),
 * and that intent's `git worktree add` then fails. A locked record is left, as prune leaves it.
 */
export async function forgetRecordsOf(repoPath: string, worktreePath: string): Promise<void> {
  const gitDir = path.join(repoPath, '.git');
  if (!(await stat(gitDir).catch(() => undefined))?.isDirectory()) {
    // The repo is itself a linked worktree (or something else unusual): leave it to git.
    await git(repoPath, ['worktree', 'prune']);
    return;
  }
  // The folder is gone, so it cannot be resolved itself: its parent can.
  const parent = await realpath(path.dirname(worktreePath)).catch(() => path.dirname(worktreePath));
  const folder = path.join(parent, path.basename(worktreePath));
  for (const admin of await recordsOfFolder(await realpath(gitDir), path.basename(worktreePath), (named) => named === folder)) {
    if (existsSync(path.join(admin, 'locked'))) continue;
    await discardRecord(admin);
  }
}

/** Removes a worktree's admin folder in one step as git sees it: renamed out of `worktrees/`, then deleted. */
async function discardRecord(admin: string): Promise<void> {
  const commonDir = path.dirname(path.dirname(admin));
  const doomed = path.join(commonDir, `warden-removing-${path.basename(admin)}-${randomBytes(4).toString('hex')}`);
  try {
    await rename(admin, doomed);
  } catch {
    return; // already gone
  }
  await rm(doomed, { recursive: true, force: true });
}

/**
 * The admin folder of the worktree at `worktreePath` in `repoPath`, if everything about it is as
 * git leaves it; a locked one only when `lockedToo`.
 */
async function worktreeRecord(repoPath: string, worktreePath: string, { lockedToo = false } = {}): Promise<string | undefined> {
  try {
    const admin = await recordNamedBy(worktreePath);
    const commonDir = await realpath(path.join(repoPath, '.git'));
    if (!admin || path.dirname(admin) !== path.join(commonDir, 'worktrees')) return undefined;
    const folder = await folderOfRecord(admin);
    if (!folder || (await realpath(folder)) !== (await realpath(worktreePath))) return undefined;
    if (!lockedToo && existsSync(path.join(admin, 'locked'))) return undefined;
    return admin;
  } catch {
    return undefined; // something is missing or odd: let git decide
  }
}

/**
 * Merges `warden/<id>` into the base branch and nothing else. If the base branch is checked out
 * (the usual case), the merge runs in that working tree, which must be clean; otherwise the merge
 * commit is built with `git merge-tree` and the branch moved with a compare-and-swap. With
 * `withoutLineage` what merges is the change alone (see changeWithoutLineage), not the branch.
 * Idempotent: if the base already contains what merges, the base's head is returned.
 */
export async function mergeIntoBase(input: {
  readonly repoPath: string;
  readonly baseBranch: string;
  readonly intentId: string;
  readonly message: string;
  /** Keep the intent's lineage out of the base branch: its change merges as one commit with this message. */
  readonly withoutLineage?: { readonly message: string };
}): Promise<string> {
  const branch = branchForIntent(input.intentId);
  const baseRef = `refs/heads/${input.baseBranch}`;
  const head = (await refCommits(input.repoPath, [`refs/heads/${branch}`])).get(`refs/heads/${branch}`);
  if (!head) throw ApplicationFailure.create({ type: FailureType.GitFailed, message: `cannot merge ${branch}: the repository ${input.repoPath} has no such branch` });
  const branchHead = head.commit;
  const merging = input.withoutLineage
    ? await changeWithoutLineage({ repoPath: input.repoPath, baseRef, branchHead, branchTree: head.tree, date: head.committerDate, intentId: input.intentId, message: input.withoutLineage.message })
    : branchHead;
  const alreadyMerged = (): Promise<boolean> => isAncestor(input.repoPath, merging, baseRef).catch(() => false);

  const checkedOutAt = await checkoutOfBranch(input.repoPath, baseRef);
  if (checkedOutAt) {
    const dirty = await git(checkedOutAt, ['status', '--porcelain', '--untracked-files=no']);
    if (dirty) {
      // A retry of a merge that landed is done, whatever the checkout holds since.
      if (await alreadyMerged()) return git(input.repoPath, ['rev-parse', baseRef]);
      throw ApplicationFailure.create({
        type: FailureType.BaseBranchDirty,
        message: `${input.baseBranch} has uncommitted changes in ${checkedOutAt}; commit or stash them, then resume the merge`,
        nonRetryable: true,
      });
    }
    // A commit the base already contains merges as nothing ("Already up to date"), even with
    // --no-ff: a retry of a merge that landed ends here, without asking first.
    const merged = await gitRaw(checkedOutAt, ['merge', '--no-ff', '--no-edit', '-q', '-m', input.message, merging]);
    if (merged.code !== 0) {
      await gitRaw(checkedOutAt, ['merge', '--abort']);
      throw mergeConflict(input.baseBranch, branch, merged.stdout + merged.stderr);
    }
    return headOf(checkedOutAt);
  }

  if (await alreadyMerged()) return git(input.repoPath, ['rev-parse', baseRef]);
  const baseHead = await git(input.repoPath, ['rev-parse', baseRef]);
  const tree = await gitRaw(input.repoPath, ['merge-tree', '--write-tree', baseHead, merging]);
  if (tree.code !== 0) throw mergeConflict(input.baseBranch, branch, tree.stdout);
  const treeId = tree.stdout.split('\n')[0]!.trim();
  const commit = await git(input.repoPath, ['commit-tree', treeId, '-p', baseHead, '-p', merging, '-m', input.message]);
  await git(input.repoPath, ['update-ref', '-m', `warden: merge ${branch}`, baseRef, commit, baseHead]);
  return commit;
}

/**
 * Where `ref` is checked out, if anywhere. The repository's own checkout comes first, as in
 * `git worktree list`, and it is most often the one: its HEAD file says so without starting git.
 * Otherwise git lists the worktrees.
 */
async function checkoutOfBranch(repoPath: string, ref: string): Promise<string | undefined> {
  const dotGit = path.join(repoPath, '.git');
  const own = await stat(dotGit).catch(() => undefined);
  if (own?.isDirectory() && (await readFile(path.join(dotGit, 'HEAD'), 'utf8').catch(() => '')).trim() === `ref: ${ref}`) return realpathSync(repoPath);
  return [...(await listWorktrees(repoPath))].find(([, checkedOut]) => checkedOut === ref)?.[0];
}

/**
 * The intent's change without its lineage: one commit on the point where the intent branch left
 * the base, whose tree is the branch head's less the intent's lineage folders. It is dated as the
 * branch head, so the same branch always makes the same commit and a retried merge finds it
 * merged. The attempts' commits stay reachable from the lineage ref (see recordLineageRef).
 */
async function changeWithoutLineage(input: {
  readonly repoPath: string;
  readonly baseRef: string;
  readonly branchHead: string;
  readonly branchTree: string;
  /** The branch head's committer date, `--date=raw`. */
  readonly date: string;
  readonly intentId: string;
  readonly message: string;
}): Promise<string> {
  const { repoPath, branchHead, date } = input;
  // Written here where the branch's trees are loose, as git would write them (git otherwise).
  const format = objectFormatOf(branchHead);
  const store = format ? await LooseObjectStore.of(repoPath, format) : undefined;
  const lessLineage = store ? await treeLessFolders(store, input.branchTree, [activeLineageDir(input.intentId), doneLineageDir(input.intentId)]) : undefined;
  const forked = await mergeBase(repoPath, branchHead, input.baseRef);
  if (forked.code !== 0) throw gitFailed(repoPath, ['merge-base', branchHead, input.baseRef], forked);
  const forkPoint = forked.stdout.trim();
  // An empty message: git writes no body at all, where the content below would end in a newline;
  // a zone git would write otherwise (-0000, +0090): git normalises it.
  const plainDate = /^\d+ [+-](0\d|1[0-4])[0-5]\d$/.test(date) && !date.endsWith('-0000');
  if (store && lessLineage && plainDate && input.message.trim() !== '') return store.write('commit', commitContent({ tree: lessLineage, parents: [forkPoint], message: input.message, when: date }));
  const tree = await treeWithoutLineage(repoPath, branchHead, input.intentId);
  // No input: with an empty message, commit-tree would wait for one on its standard input.
  return git(repoPath, ['commit-tree', tree, '-p', forkPoint, '-m', input.message], { env: { GIT_AUTHOR_DATE: date, GIT_COMMITTER_DATE: date }, input: '' });
}

/** The tree of `commit` less the intent's lineage folders: the change as it reaches the base. */
export async function treeWithoutLineage(repoPath: string, commit: string, intentId: string): Promise<string> {
  return withTemporaryIndex(async (index) => {
    await git(repoPath, ['read-tree', commit], index);
    await git(repoPath, ['rm', '-r', '-q', '-f', '--cached', '--ignore-unmatch', '--', activeLineageDir(intentId), doneLineageDir(intentId)], index);
    return git(repoPath, ['write-tree'], index);
  });
}

function mergeConflict(base: string, branch: string, detail: string): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.MergeConflict,
    message: `${branch} does not merge cleanly into ${base}: ${detail.trim().slice(-500)}`,
    nonRetryable: true,
  });
}
