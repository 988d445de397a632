import { stat } from 'node:fs/promises';
import path from 'node:path';
import { RESUME_REF_PREFIX, branchForIntent, resumeRefFor } from '../shared/ids';
import { git, gitRaw, moveRefs, refCommits, refExists, type RefCommit, type RefMove } from './git';
import { refsFromFiles } from './ref-files';
import { commitContent, LooseObjectStore } from './loose-objects';
import { objectFormatOf } from './object-names';

/*
 * What an ended intent keeps for `warden resume`: its branch may be deleted (a rejection deletes
 * it) or later moved, so as it ends its commits are kept under refs/warden/resume/<id>, a ref
 * of Warden's own. The ref points at a small commit of Warden's: its first parent is the branch
 * head as the intent ended, its second the ref's earlier commit (an earlier ending of the same
 * intent), and its message says until when it is kept. Past that date the sweeper drops it.
 */

const KEPT_UNTIL = 'Kept-Until: ';

/** The resume ref of an intent and until when it is kept, or undefined when the repository has none. */
export interface ResumeRef {
  readonly ref: string;
  readonly keptUntil: Date;
}

/**
 * Keeps the head of the intent branch under the intent's resume ref for `keepMs` from `now`.
 * Does nothing when there is no branch (the ref, if any, stays as it was). A retry with the same
 * branch head only moves the date.
 */
export async function keepForResume(repoPath: string, intentId: string, keepMs: number, now: Date): Promise<ResumeRef | undefined> {
  const known = await refCommits(repoPath, resumeRefsRead(intentId));
  const { kept, move } = await resumeCommit(repoPath, intentId, keepMs, now, known);
  if (move) await moveRefs(repoPath, [move], `warden: kept ${intentId} for resume`);
  return kept;
}

/** The refs {@link resumeCommit} needs read: the intent branch and the resume ref. */
export function resumeRefsRead(intentId: string): string[] {
  return [`refs/heads/${branchForIntent(intentId)}`, resumeRefFor(intentId)];
}

/**
 * The commit that keeps the intent for resume, made but not yet under the ref: what will be kept
 * and the move that puts the commit there (neither when there is no branch). `known`: the refs
 * of {@link resumeRefsRead}, read by the caller.
 */
export async function resumeCommit(
  repoPath: string,
  intentId: string,
  keepMs: number,
  now: Date,
  known: ReadonlyMap<string, RefCommit>,
): Promise<{ readonly kept?: ResumeRef; readonly move?: RefMove }> {
  const ref = resumeRefFor(intentId);
  const branchCommit = known.get(`refs/heads/${branchForIntent(intentId)}`);
  if (!branchCommit) return {};
  const head = branchCommit.commit;
  const earlier = known.get(ref)?.commit;
  // The earlier commit keeps the earlier run's commits, unless it kept this very head.
  const earlierParents = known.get(ref)?.parents ?? [];
  const keepEarlier = earlier !== undefined && earlierParents[0] !== head;
  const parents = [head, ...(keepEarlier ? [earlier] : earlierParents.slice(1))];
  const keptUntil = new Date(now.getTime() + keepMs);
  const message = `warden(${intentId}): kept for resume\n\nThe first parent is the intent branch as the intent ended: warden resume ${intentId} continues from it.\n\n${KEPT_UNTIL}${keptUntil.toISOString()}\n`;
  // The commit written here (git asked only for a repository whose store is not found from its .git).
  const format = objectFormatOf(head);
  const store = format ? await LooseObjectStore.of(repoPath, format) : undefined;
  const commit = store
    ? await store.write('commit', commitContent({ tree: branchCommit.tree, parents, message, when: now }))
    : await git(repoPath, ['commit-tree', branchCommit.tree, ...parents.flatMap((p) => ['-p', p]), '-m', message]);
  return { kept: { ref, keptUntil }, move: { ref, to: commit, ...(earlier ? { from: earlier } : {}) } };
}

/** The intent's resume ref and its date, or undefined when there is none. */
export async function readResumeRef(repoPath: string, intentId: string): Promise<ResumeRef | undefined> {
  const ref = resumeRefFor(intentId);
  const shown = await gitRaw(repoPath, ['log', '-1', '--format=%B', `${ref}^{commit}`]);
  if (shown.code !== 0) return undefined;
  return { ref, keptUntil: keptUntilOf(shown.stdout) };
}

/**
 * True when `commit` can be resumed from: it is on the intent branch or among the commits the
 * resume ref keeps. A commit reachable from neither (the ref dropped, or never made) is gone
 * for a resume, even while git has not yet collected it.
 */
export async function resumableFrom(repoPath: string, intentId: string, commit: string): Promise<boolean> {
  for (const tip of [`refs/heads/${branchForIntent(intentId)}`, resumeRefFor(intentId)]) {
    if (!(await refExists(repoPath, tip))) continue;
    if ((await gitRaw(repoPath, ['merge-base', '--is-ancestor', commit, tip])).code === 0) return true;
  }
  return false;
}

/**
 * Deletes the resume refs of `repoPath` whose date has passed; returns the intents whose ref went.
 * `keptNow` names a ref the caller has just dated after `now` (an ending intent's own): when the
 * ref files hold no other, git is not asked, since nothing there can have expired.
 */
export async function dropExpiredResumeRefs(repoPath: string, now: Date, keptNow?: ResumeRef): Promise<string[]> {
  const notExpired = keptNow && keptNow.keptUntil.getTime() > now.getTime() ? keptNow.ref : undefined;
  if (!(await mayKeepResumeRefs(repoPath, notExpired))) return [];
  const listed = await gitRaw(repoPath, ['for-each-ref', '--format=%(refname)%00%(contents)%00', RESUME_REF_PREFIX]);
  if (listed.code !== 0) return [];
  const fields = listed.stdout.split('\0');
  const dropped: string[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const ref = fields[i]!.trim();
    if (!ref.startsWith(RESUME_REF_PREFIX)) continue;
    if (keptUntilOf(fields[i + 1]!).getTime() > now.getTime()) continue;
    await git(repoPath, ['update-ref', '-d', ref]);
    dropped.push(ref.slice(RESUME_REF_PREFIX.length));
  }
  return dropped;
}

/**
 * False when the repository's ref files, read now, hold no resume ref but `except`: most
 * repositories keep none (a merged intent leaves nothing to resume), and their files say so
 * without starting git. True when it may (one is there, or the refs are not plain files in the
 * repository's `.git`).
 */
async function mayKeepResumeRefs(repoPath: string, except?: string): Promise<boolean> {
  const dotGit = path.join(repoPath, '.git');
  if (!(await stat(dotGit).catch(() => undefined))?.isDirectory()) return true;
  const refs = await refsFromFiles(dotGit);
  return refs === undefined || Object.keys(refs).some((ref) => ref.startsWith(RESUME_REF_PREFIX) && ref !== except);
}

/** The date in a resume commit's message; a message without one counts as expired. */
function keptUntilOf(message: string): Date {
  const line = message.split('\n').find((l) => l.startsWith(KEPT_UNTIL));
  const date = line ? new Date(line.slice(KEPT_UNTIL.length).trim()) : new Date(0);
  return Number.isNaN(date.getTime()) ? new Date(0) : date;
}
