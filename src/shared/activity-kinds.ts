/**
 * What an activity is to the controls that stop an intent (pause, WARDEN_ENABLED=false, the
 * EMERGENCY_STOP file, the global stop flag):
 *
 * - `bookkeeping`: the intent check, ledger reads and writes, the daily report, the review
 *   package a gate shows (it only reads the worktree, and a person who paused an intent to look
 *   at its gate needs it), and the final worktree cleanup. These always run: a paused or stopped
 *   intent must still record what happened and remove its worktree.
 * - `agent`: an agent call. The stage guard (workflow) and the agent-safety interceptor (worker)
 *   check it, along with its limits.
 * - `stage`: everything else an intent does: preparing the worktree, running the repo's tests,
 *   the mechanical checks, archiving the lineage and the merge. A paused intent holds these, and
 *   a stopped worker refuses them.
 *
 * Every activity must be listed (`withActivityKinds` below makes a new one a compile error until
 * it is); a name that is not listed counts as `stage`, so nothing unknown slips past a stop.
 * Pure data: the workflow sandbox imports it too.
 */
export type ActivityKind = 'bookkeeping' | 'agent' | 'stage';

const ACTIVITY_KINDS = {
  checkIntent: 'bookkeeping',
  appendToLedger: 'bookkeeping',
  readLadder: 'bookkeeping',
  recordLadderRun: 'bookkeeping',
  cleanupLedger: 'bookkeeping',
  anchorLedger: 'bookkeeping',
  buildDailyReport: 'bookkeeping',
  publishDailyReport: 'bookkeeping',
  buildReviewPackage: 'bookkeeping',
  cleanupIntent: 'bookkeeping',
  sweepClosedIntents: 'bookkeeping',
  // a stopped intent's notification still goes out
  deliverNotification: 'bookkeeping',
  recordUndelivered: 'bookkeeping',
  runAgentStage: 'agent',
  prepareWorktree: 'stage',
  runTests: 'stage',
  inspectImplementation: 'stage',
  changedFilesMatching: 'stage',
  revertMerge: 'stage',
  applyDocumentEdits: 'stage',
  checkMergeConditions: 'stage',
  rebaseOntoBase: 'stage',
  archiveLineage: 'stage',
  mergeIntent: 'stage',
  // the pull request: reading it, commenting and closing it are bookkeeping (a paused or stopped
  // intent still tells its pull request); pushing and merging are stage work
  readPullRequest: 'bookkeeping',
  checkPullRequest: 'bookkeeping',
  commentOnPullRequest: 'bookkeeping',
  closePullRequest: 'bookkeeping',
  publishPullRequest: 'stage',
  mergePullRequest: 'stage',
} as const satisfies Record<string, ActivityKind>;

type KindedActivity = keyof typeof ACTIVITY_KINDS;

/**
 * The worker's activities, unchanged, once every one of them has a kind above and every kind
 * above names one of them: the activities module builds its list through here, so the list and
 * this table cannot drift apart without a compile error.
 */
export function withActivityKinds<Activities extends Record<KindedActivity, unknown>>(
  activities: Activities & Record<Exclude<keyof Activities, KindedActivity>, never>,
): Activities {
  return activities;
}

export function activityKind(activityType: string): ActivityKind {
  return Object.prototype.hasOwnProperty.call(ACTIVITY_KINDS, activityType) ? ACTIVITY_KINDS[activityType as keyof typeof ACTIVITY_KINDS] : 'stage';
}
