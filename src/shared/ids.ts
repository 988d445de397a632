/** Every name derived from an intent id comes from here, so client, workflow and activities agree. */

/** The task queue Warden's workers poll. */
export const TASK_QUEUE = 'warden';

/**
 * The task queue of one worker host, beside the shared one: the stages of an intent whose
 * worktree this host made run here, on the disk that holds it.
 */
export function hostQueueFor(taskQueue: string, host: string): string {
  return `${taskQueue}@${host}`;
}

/** What a worker host's name may be: it is part of a task queue's name. */
export const HOST_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** The host's name in a host queue (`warden@host-1` → `host-1`). */
export function hostOfQueue(queue: string): string {
  const at = queue.lastIndexOf('@');
  return at === -1 ? queue : queue.slice(at + 1);
}

/**
 * The branch on the remote that carries an intent's commits between hosts (config `placement`):
 * apart from `warden/<id>`, which a pull request publishes as one commit without the lineage.
 */
export function workBranchFor(intentId: string): string {
  return `warden-work/${intentId}`;
}

/** Workflow id of an intent: the server refuses a second running workflow with the same id. */
export function workflowIdForIntent(intentId: string): string {
  return `intent-${intentId}`;
}

/** Inverse of {@link workflowIdForIntent}; returns the input unchanged if it has no prefix. */
export function intentIdFromWorkflowId(workflowId: string): string {
  return workflowId.startsWith('intent-') ? workflowId.slice('intent-'.length) : workflowId;
}

/** What every intent's branch name starts with. */
export const INTENT_BRANCH_PREFIX = 'warden/';

/** The branch an intent's agent works on. Merge touches only this branch and the base branch. */
export function branchForIntent(intentId: string): string {
  return `${INTENT_BRANCH_PREFIX}${intentId}`;
}

/** Lineage folder (inside the worktree) while the intent runs. */
export function activeLineageDir(intentId: string): string {
  return `docs/lineage/active/${intentId}`;
}

/** Lineage folder once the intent has merged with `lineage.location: tree`: an immutable record in the base branch. */
export function doneLineageDir(intentId: string): string {
  return `docs/lineage/done/${intentId}`;
}

/**
 * The ref of Warden's own that keeps an intent's lineage in its repository (`lineage.location:
 * ref`): a commit whose tree is the lineage folder, so `git show REF:FILE` reads one file and
 * `git push origin 'refs/warden/*'` carries it.
 */
export function lineageRefFor(intentId: string): string {
  return `refs/warden/lineage/${intentId}`;
}

/**
 * The ref of Warden's own that keeps an ended intent's commits for a resume (see
 * src/activities/resume-ref.ts): the branch may be deleted (a rejection) or moved; this stays.
 */
export function resumeRefFor(intentId: string): string {
  return `refs/warden/resume/${intentId}`;
}

/** Where every resume ref lives. */
export const RESUME_REF_PREFIX = 'refs/warden/resume/';

/** Every replay's intent id starts so (`replay-N-ID`): its ledger rows are told from a real intent's by it. */
export const REPLAY_ID_PREFIX = 'replay-';
