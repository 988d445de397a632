import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../shared/errors';
import { branchForIntent, lineageRefFor, resumeRefFor, workBranchFor } from '../shared/ids';
import type { IntentPlacement } from '../shared/placement';
import { git, gitFailed, gitRaw, refExists } from './git';
import { OneAtATime } from './one-at-a-time';

/*
 * A worker host's own copy of a repository, for intents with `placement` (several hosts, no
 * shared disk): a bare clone of the remote under the host's Warden home, which the intents'
 * worktrees are made from. The remote is the truth: the base branch is fetched from it before
 * a worktree is made, a rebase is checked and a merge is made, and every step's commits go back
 * to it on the intent's work branch, so another host can take the intent over.
 */

/** Where this host keeps its clone of `remoteUrl`. */
export function clonePathFor(clonesRoot: string, remoteUrl: string): string {
  const name = path.basename(remoteUrl.replace(/\/+$/, '')).replace(/\.git$/, '').replace(/[^A-Za-z0-9._-]/g, '_') || 'repo';
  const tag = createHash('sha256').update(remoteUrl).digest('hex').slice(0, 8);
  return path.join(clonesRoot, `${name}-${tag}.git`);
}

/** Fetches and pushes of one clone's shared refs (the base branch) go one at a time: git locks refs. */
const perClone = new OneAtATime();

/** The clone of the intent's remote on this host, made the first time (whole, or not at all). */
export async function ensureClone(clonesRoot: string, placement: IntentPlacement): Promise<string> {
  const clone = clonePathFor(clonesRoot, placement.remoteUrl);
  if (existsSync(path.join(clone, 'HEAD'))) return clone;
  return perClone.run(clone, async () => {
    if (existsSync(path.join(clone, 'HEAD'))) return clone;
    await mkdir(clonesRoot, { recursive: true });
    // Cloned beside, then renamed: a crash mid-clone leaves no half clone where the next looks.
    const partial = `${clone}.partial-${randomBytes(4).toString('hex')}`;
    const cloned = await gitRaw(clonesRoot, ['clone', '--quiet', '--bare', '--origin', placement.remote, placement.remoteUrl, partial]);
    if (cloned.code !== 0) {
      await rm(partial, { recursive: true, force: true });
      throw unreachable(placement.remoteUrl, cloned.stderr);
    }
    await rename(partial, clone);
    return clone;
  });
}

/** The base branch as the remote has it now (forced: a merge this host made and could not push is dropped). */
export async function fetchBase(clone: string, remoteUrl: string, baseBranch: string): Promise<void> {
  await perClone.run(clone, async () => {
    const fetched = await gitRaw(clone, ['fetch', '--quiet', '--no-tags', remoteUrl, `+refs/heads/${baseBranch}:refs/heads/${baseBranch}`]);
    if (fetched.code !== 0) throw unreachable(remoteUrl, fetched.stderr);
  });
}

/**
 * The intent branch at `head`, from the work branch another host pushed, when this host's clone
 * does not hold that commit on the branch. A head the remote does not hold fails for good: the
 * intent's work since its last push is lost with its host.
 */
export async function fetchWork(clone: string, remoteUrl: string, intentId: string, head: string): Promise<void> {
  const branch = `refs/heads/${branchForIntent(intentId)}`;
  if ((await refExists(clone, branch)) && (await git(clone, ['rev-parse', branch])) === head) return;
  const fetched = await gitRaw(clone, ['fetch', '--quiet', '--no-tags', remoteUrl, `+refs/heads/${workBranchFor(intentId)}:refs/warden/work/${intentId}`]);
  if (fetched.code !== 0) throw unreachable(remoteUrl, fetched.stderr);
  if (!(await refExists(clone, head))) {
    throw ApplicationFailure.create({
      type: FailureType.GitFailed,
      message: `${remoteUrl} does not hold ${head.slice(0, 12)} on ${workBranchFor(intentId)}: the intent's last step was not pushed before its host went`,
      nonRetryable: true,
    });
  }
  // update-ref, not `branch -f`: a stale worktree of this intent on this host may have it checked out (it is reset after).
  await git(clone, ['update-ref', branch, head]);
}

/** The worktree's commits to the intent's work branch on the remote: what another host starts from. */
export async function pushWork(worktreePath: string, remoteUrl: string, intentId: string): Promise<void> {
  await pushWithRetries(worktreePath, remoteUrl, [`+HEAD:refs/heads/${workBranchFor(intentId)}`]);
}

/**
 * The merged base branch to the remote, with the intent's lineage ref. The base is pushed as a
 * fast-forward: when the remote's moved since it was fetched, the push is refused and the merge
 * retried on top of it (the next attempt fetches the base again).
 */
export async function pushMerge(clone: string, remoteUrl: string, baseBranch: string, intentId: string): Promise<void> {
  await perClone.run(clone, async () => {
    const pushed = await gitRaw(clone, ['push', '--quiet', remoteUrl, `refs/heads/${baseBranch}:refs/heads/${baseBranch}`]);
    if (pushed.code !== 0) throw gitFailed(clone, ['push', remoteUrl, baseBranch], pushed);
  });
  await pushOwnRefs(clone, remoteUrl, intentId);
}

/**
 * At the end: the intent's own refs (lineage, resume) to the remote, and its work branch deleted
 * there when the branch goes. Refs of Warden's own are carried where the remote takes them; a
 * forge that refuses refs outside branches and tags keeps them only on this host.
 */
export async function finishOnRemote(clone: string, remoteUrl: string, intentId: string, deleteWork: boolean): Promise<void> {
  await pushOwnRefs(clone, remoteUrl, intentId);
  if (!deleteWork) return;
  const deleted = await gitRaw(clone, ['push', '--quiet', remoteUrl, `:refs/heads/${workBranchFor(intentId)}`]);
  if (deleted.code !== 0 && !/remote ref does not exist|unable to delete .*: remote ref does not exist/.test(deleted.stderr)) throw gitFailed(clone, ['push', remoteUrl, `:${workBranchFor(intentId)}`], deleted);
}

async function pushOwnRefs(clone: string, remoteUrl: string, intentId: string): Promise<void> {
  const refs = [];
  for (const ref of [lineageRefFor(intentId), resumeRefFor(intentId)]) if (await refExists(clone, ref)) refs.push(`+${ref}:${ref}`);
  if (refs.length > 0) await gitRaw(clone, ['push', '--quiet', remoteUrl, ...refs]);
}

async function pushWithRetries(cwd: string, remoteUrl: string, refspecs: readonly string[]): Promise<void> {
  let last = { stdout: '', stderr: '', code: 0 };
  for (let attempt = 1; attempt <= 3; attempt++) {
    last = await gitRaw(cwd, ['push', '--quiet', remoteUrl, ...refspecs]);
    if (last.code === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 500 * attempt));
  }
  throw gitFailed(cwd, ['push', remoteUrl, ...refspecs], last);
}

function unreachable(remoteUrl: string, stderr: string): ApplicationFailure {
  return ApplicationFailure.create({ type: FailureType.GitFailed, message: `cannot reach the repository's remote ${remoteUrl}: ${stderr.trim().slice(-400)}` });
}
