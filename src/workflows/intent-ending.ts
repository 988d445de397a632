import { ActivityFailure, ApplicationFailure, CancellationScope, isCancellation, setCurrentDetails, sleep, TimeoutFailure, workflowInfo } from '@temporalio/workflow';
import { FailureType } from '../shared/errors';
import { suggestionForFailure } from '../shared/failure-suggestions';
import type { HaltDetails, KillSwitchDetails } from '../shared/halt';
import { activeLineageDir } from '../shared/ids';
import { ladderScope, type LadderRun } from '../shared/ladder';
import type { IntentOutcome } from '../shared/state';
import { GateRejected } from './approvals';
import { relocateArtifacts, setStatus } from './intent-status';
import type { IntentRun } from './run-context';
import { closePullRequestAtEnd } from './pull-request-gate';

/**
 * How an intent ends, whichever way: the outcome of a rejection, the ledger rows of a failure,
 * and, always, the cleanup, the ending event (INTENT_MERGED / _REJECTED / _CANCELLED / _FAILED)
 * and the run's count on the automation ladder.
 */

/** The intent's outcome while the ending may still fill in where its lineage went. */
export type MutableOutcome = { -readonly [K in keyof IntentOutcome]: IntentOutcome[K] };

/** What the ending knows once the pipeline is over. */
export interface Ending {
  /** Set when the intent has an outcome to return (merged or rejected); a failure or a stop has none. */
  outcome?: MutableOutcome;
  /** What a person could do about the failure, for INTENT_FAILED too. */
  failureSuggestion?: string;
}

/** How long an intent whose agent the global stop killed waits for its own cancellation. */
const STOPPED_MID_RUN_WAIT_MS = 5_000;

/** A KILL_SWITCH failure of an agent or test that the global stop ended while it ran. */
function stoppedMidRun(error: unknown): boolean {
  const cause = error instanceof ActivityFailure ? error.cause : undefined;
  return cause instanceof ApplicationFailure && cause.type === FailureType.KillSwitch && (cause.details?.[0] as KillSwitchDetails | undefined)?.midRun === true;
}

/** The workflow's cancellation, if it comes within `ms` (at once if it already has). */
async function cancellationWithin(ms: number): Promise<unknown> {
  try {
    await sleep(ms);
    return undefined;
  } catch (error) {
    if (isCancellation(error)) return error;
    throw error;
  }
}

/**
 * The pipeline ended early with `caught`. A rejection at a gate is an outcome: it is returned. A
 * stop (`warden stop`) ends the intent cancelled; anything else fails it, with the halt's own
 * SafetyEvent and a STAGE_FAILED row that says what to do. Both rethrow.
 */
export async function endEarly(run: IntentRun, caught: unknown, ending: Ending): Promise<MutableOutcome> {
  const { intent, state, ledger } = run;
  let error = caught;
  if (error instanceof GateRejected) {
    setStatus(state, 'rejected');
    ending.outcome = { intentId: intent.id, status: 'rejected', spendUsd: state.spendUsd, reason: error.reason };
    return ending.outcome;
  }
  // The global stop killed the running agent, and `warden stop --all` cancels the intent right
  // after setting it: wait a moment for that, so the intent ends cancelled like the others.
  if (stoppedMidRun(error)) error = (await cancellationWithin(STOPPED_MID_RUN_WAIT_MS)) ?? error;
  if (isCancellation(error)) {
    setStatus(state, 'cancelled');
    throw error;
  }
  setStatus(state, 'failed');
  const cause = error instanceof ApplicationFailure ? error : (error as { cause?: unknown }).cause;
  const failure = cause instanceof ApplicationFailure ? cause : undefined;
  const timeoutType = cause instanceof TimeoutFailure ? cause.timeoutType : undefined;
  state.error = (cause as Error | undefined)?.message ?? (error as Error).message ?? String(error);
  const halt = failure?.type === FailureType.SafetyHalt ? (failure.details?.[0] as Partial<HaltDetails> | undefined) : undefined;
  if (halt?.eventType) {
    ledger.event(halt.eventType, 'high', halt.reason ?? state.error, { stage: state.stage, suggestion: halt.suggestion, metadata: { current: halt.current, threshold: halt.threshold } });
  }
  // What the halt undid keeps its own row, as a resume's rewind does.
  if (halt?.rollback) ledger.event('ROLLBACK', 'medium', halt.rollback.reason, { stage: state.stage, metadata: halt.rollback.metadata });
  ending.failureSuggestion = halt?.suggestion || suggestionForFailure({ type: failure?.type ?? undefined, timeoutType }, intent.id);
  ledger.event('STAGE_FAILED', 'high', state.error, {
    stage: state.stage,
    suggestion: ending.failureSuggestion,
    metadata: { attempts: state.attempts, failureType: failure?.type ?? (timeoutType ? `TIMEOUT_${timeoutType}` : null) },
  });
  // A halt from inside an activity: fail the intent with the halt itself, so its reason is
  // what `warden run` and the Web UI show rather than "Activity task failed".
  if (failure && failure !== error && failure.type === FailureType.SafetyHalt) throw failure;
  throw error;
}

/**
 * Runs however the intent ended, cancellation included: removes the worktree (the branch is kept
 * for a failed or stopped intent, and the commits of any that did not merge are kept under its
 * resume ref: they are what a resume continues from), writes the
 * ending event, and counts the run on the agent's ladder unless a person stopped it.
 */
export async function finishIntent(run: IntentRun, ending: Ending): Promise<void> {
  const { intent, state, ledger } = run;
  const { outcome } = ending;
  // A pull request of an intent that did not merge is closed with the reason, before anything else goes.
  await closePullRequestAtEnd(run, state.error ?? outcome?.reason ?? state.status);
  const { lineageCopy, lineageRef } = await CancellationScope.nonCancellable(() => run.activities.cleanup.cleanupIntent({ intent, deleteBranch: outcome !== undefined, keepForResume: state.status !== 'merged' }));
  if (!state.lineagePath && lineageCopy) {
    state.lineagePath = lineageCopy;
    relocateArtifacts(state, activeLineageDir(intent.id), lineageCopy);
    if (outcome) outcome.lineagePath = lineageCopy;
  }
  if (!state.lineageRef && lineageRef) {
    state.lineageRef = lineageRef;
    if (outcome) outcome.lineageRef = lineageRef;
  }
  state.worktreePath = undefined;
  const endings = { merged: 'INTENT_MERGED', rejected: 'INTENT_REJECTED', cancelled: 'INTENT_CANCELLED' } as const;
  const event = state.status in endings ? endings[state.status as keyof typeof endings] : 'INTENT_FAILED';
  ledger.event(event, event === 'INTENT_FAILED' ? 'high' : 'info', state.error ?? outcome?.reason ?? state.status, {
    stage: state.stage,
    ...(event === 'INTENT_FAILED' ? { suggestion: ending.failureSuggestion ?? suggestionForFailure({}, intent.id) } : {}),
    costSnapshot: { intentUsd: state.spendUsd },
    metadata: { mergedCommit: state.mergedCommit ?? null, lineagePath: state.lineagePath ?? null, lineageRef: state.lineageRef ?? null },
  });
  // A stop says nothing about the agent, so it does not count on the ladder. When it counts, the
  // ending rows go with it (written first, in the same call).
  if (state.status !== 'cancelled' && state.ladderLevel !== undefined) {
    await CancellationScope.nonCancellable(() =>
      ledger.flushThrough((ledgerBatch) =>
        run.activities.ledger.recordLadderRun({ scope: ladderScope(intent.agent), intentId: intent.id, runId: workflowInfo().runId, run: ladderRun(run), ledgerBatch }),
      ),
    );
  } else {
    await CancellationScope.nonCancellable(() => ledger.flush());
  }
  setCurrentDetails(`**${intent.goal}**\n\nFinished: ${state.status}`);
}

/** How this run counts on the ladder: success, and what the people at the gates said. */
function ladderRun(run: IntentRun): LadderRun {
  const { state } = run;
  const human = state.decisions.filter((d) => d.decision !== 'defer' && !d.timedOut && !d.by.startsWith('warden'));
  const rejected = human.some((d) => d.decision === 'reject');
  const mergeByHuman = human.find((d) => d.gate === 'merge');
  return {
    success: state.status === 'merged',
    repo: run.intent.repoPath,
    ...(human.length > 0 ? { humanApproved: !rejected } : {}),
    // Review said APPROVE and a person still turned the change down.
    falsePositive: run.review?.verdict === 'APPROVE' && mergeByHuman?.decision === 'reject',
    // What its code tried in the sandbox lowers its standing, whatever the people decided.
    ...(run.attemptCount > 0 ? { escapeAttempts: run.attemptCount } : {}),
    // Missed critical bugs show up after the merge: a person reports them (warden ladder missed-bug).
  };
}
