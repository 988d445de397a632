import { setHandler, workflowInfo } from '@temporalio/workflow';
import { criticalSecurityFindings, UNANSWERED_REVIEW, UNANSWERED_TRIAGE, type ReviewAssessment, type TriageAssessment } from '../shared/assessments';
import { activeLineageDir, intentIdFromWorkflowId } from '../shared/ids';
import { LADDER_DECIDER_PREFIX, ladderScope } from '../shared/ladder';
import { stateQuery } from '../shared/messages';
import { riskAtLeast } from '../shared/risk';
import { STAGES } from '../shared/stages';
import type { IntentOutcome } from '../shared/state';
import { requireApproval, unlessApproved } from './approvals';
import { checkPredictedSize } from './blast-radius';
import { checkedIntent, refuseForeignWorkflowId } from './intent-input';
import { endEarly, finishIntent, type Ending, type MutableOutcome } from './intent-ending';
import { enterStage, relocateArtifacts, setStatus, startingState } from './intent-status';
import { handlePauseSignals, withinPauseLimit } from './pause-signals';
import { assessRisk, holdRisk, checkDesignReviewPolicy, checkReviewPolicy } from './risk-review';
import { IntentRun } from './run-context';
import { withinStageLimit, withinTotalLimit } from './stage-limits';
import { customGatesAfter } from './custom-gate-runner';
import { changesRequested, runImplStage, runReviewedDesignStage, runStage } from './stage-runner';
import type { RecordedDecision } from '../shared/decisions';
import type { GateName } from '../shared/gates';
import { recordAttempts } from './sandbox-evidence';
import { forgeChecksUnmet, mergeThroughForge, mergesViaPullRequest, pullRequestMergeGate } from './pull-request-gate';

/**
 * One intent, end to end: triage → lld → spec → impl (edit ⇄ test) → review → merge gate → merge.
 *
 * - Input is re-checked first, by a local activity running the intent schema: a bad intent fails at once.
 * - Signal `decide` / update `decision` decide the pending gate (see GateKeeper); invalid or
 *   unauthorised ones are refused, recorded as SafetyEvents, and change nothing. A gate waits its
 *   timeout, then applies its timeout policy.
 * - Signals `pause` / `resume` hold and release the next stage activity (see handlePauseSignals).
 * - Query `state` returns stage, attempts, spend, pending gate, decisions and artifact paths.
 * - Before each agent call the stage-guard interceptor checks iteration caps, the two-strike
 *   rule, the budgets and the cooldown; after it, the behaviour monitor's findings and the blast
 *   radius may stop the intent at a gate; workflow timers bound each stage's working time and
 *   the whole run's (see stage-limits).
 * - Cancellation (`warden stop`) kills the running agent and still removes the worktree.
 * History holds only references and summaries; documents and diffs stay in the worktree.
 */
export async function intentWorkflow(input: unknown): Promise<IntentOutcome> {
  // `state` answers from the first moment; while the input is being checked it knows the id only.
  setHandler(stateQuery, () => startingState(intentIdFromWorkflowId(workflowInfo().workflowId), ''));
  const intent = await checkedIntent(input);
  refuseForeignWorkflowId(intent.id, workflowInfo().workflowId);
  const run = new IntentRun(intent);
  handlePauseSignals(run);
  const ending: Ending = {};
  try {
    ending.outcome = await withinTotalLimit(run, () => withinPauseLimit(run, () => pipeline(run)));
    return ending.outcome;
  } catch (error) {
    return await endEarly(run, error, ending);
  } finally {
    await finishIntent(run, ending);
  }
}

/** The pipeline's shape: each step either moves the intent on or throws (a rejection, a halt, a stop). */
async function pipeline(run: IntentRun): Promise<MutableOutcome> {
  // A design reviewer that may not review fails the intent before anything runs.
  checkDesignReviewPolicy(run.intent);
  await prepare(run);
  if (run.intent.revertOf) return revertPipeline(run, run.intent.revertOf);
  const triage = replayed(run, 'triage') ? originalTriage(run) : await triageStage(run);
  if (!replayed(run, 'lld')) await designStage(run, 'lld', triage);
  if (!replayed(run, 'spec')) await designStage(run, 'spec', triage);
  // A person at a gate before merge may send the change back, an unmet merge condition or a base
  // that moved underneath may too: impl and review run again (or only the gates, for a change
  // that rebased cleanly but is no longer what was approved).
  let changes: string | undefined;
  let review: ReviewAssessment | undefined;
  let implDone = replayed(run, 'impl');
  for (;;) {
    if (!review) {
      if (!implDone) {
        await withinStageLimit(run, 'impl', () => runImplStage(run, triage.predicted, changes));
        const afterImpl = await customGatesAfter(run, 'impl');
        if (afterImpl) {
          changes = changesRequested(afterImpl);
          continue;
        }
      }
      implDone = false;
      review = await reviewStage(run);
    }
    const decision = await gatesBeforeMerge(run, review);
    const seenBefore = run.attemptCount;
    const sendBack =
      decision.decision === 'request-changes'
        ? changesRequested(decision)
        : ((await unmetMergeConditions(run)) ?? (mergesViaPullRequest(run) ? await forgeChecksUnmet(run) : await baseMovedUnderneath(run)));
    // The ladder passed the merge, and then the sandbox saw the checks try something: a person decides after all.
    if (sendBack === undefined && run.attemptCount > seenBefore && decision.by.startsWith(LADDER_DECIDER_PREFIX)) continue;
    if (sendBack === undefined) break;
    if (sendBack === ASK_AGAIN) continue;
    changes = sendBack;
    review = undefined;
  }
  return merge(run);
}

/**
 * `warden revert`: no agent runs. The other intent's merge is reverted on this intent's branch
 * (a conflict with later commits fails it, saying where), the tests run on the result, and the
 * merge gate, always a person's, decides before it merges like any change.
 */
async function revertPipeline(run: IntentRun, target: { readonly intentId: string; readonly mergedCommit: string }): Promise<MutableOutcome> {
  const { intent, state, ledger, activities } = run;
  enterStage(state, ledger, 'impl');
  const reverted = await activities.git.revertMerge({ intent, mergedCommit: target.mergedCommit });
  run.head = reverted.commit;
  const tests = await activities.tests.runTests({ intent, attempt: 1 });
  if (tests.commit) run.head = tests.commit;
  recordAttempts(run, 'impl', "the repo's tests after the revert", tests.attempts);
  state.tests.push({ attempt: 1, passed: tests.passed, summary: tests.summary });
  ledger.event(tests.passed ? 'TESTS_PASSED' : 'TESTS_FAILED', tests.passed ? 'info' : 'medium', `the revert of ${target.intentId}: tests ${tests.summary}`, { stage: 'impl', metadata: { revertOf: target.intentId, files: reverted.files } });
  await requireApproval(run, 'merge', `Revert intent ${target.intentId} (merged as ${target.mergedCommit.slice(0, 12)}) on ${intent.baseBranch}? ${reverted.files} file(s) change back; tests ${tests.summary}.`);
  return merge(run);
}

/** Only the gates again: the change rebased cleanly onto a moved base, but its diff is not the one approved. */
const ASK_AGAIN = Symbol('ask the gates again');

/**
 * Before merging, the base branch as it is now: if it moved while the intent waited, the branch
 * is rebased and its tests run again. A conflict or failing tests go back to impl (within its
 * attempts); a clean rebase whose change differs from the approved one asks the gates again; an
 * unchanged one merges. Undefined when it may merge.
 */
async function baseMovedUnderneath(run: IntentRun): Promise<string | typeof ASK_AGAIN | undefined> {
  const { intent, ledger, state } = run;
  // Checking the base is the merge's first step: a paused intent is held here, at stage merge.
  if (state.stage !== 'merge') enterStage(state, ledger, 'merge');
  const rebase = await run.activities.git.rebaseOntoBase({ intent, approvedHead: run.head });
  if (!rebase.moved) return undefined;
  run.head = rebase.head;
  if ('tests' in rebase) recordAttempts(run, 'merge', "the repo's tests after the rebase", rebase.tests.attempts);
  if ('conflicts' in rebase) {
    ledger.event('BASE_MOVED', 'medium', `${intent.baseBranch} moved to ${rebase.baseHead.slice(0, 12)} while the intent waited; the branch does not rebase onto it (conflicts in ${rebase.conflicts.join(', ')}): impl makes the change again on top of it`, {
      stage: 'merge',
      metadata: { baseHead: rebase.baseHead, conflicts: rebase.conflicts },
    });
    await ledger.flush();
    return `${intent.baseBranch} moved while the change waited, and the change no longer applied to it (conflicts in ${rebase.conflicts.join(', ')}). The branch now starts from ${intent.baseBranch} as it is: make the change again on top of it.\n${rebase.detail}`;
  }
  const verdict = !rebase.tests.passed ? 'its tests fail there: impl runs again' : rebase.same ? 'the change is the one approved: it merges' : 'the change is no longer the one approved: the gates ask again';
  ledger.event('BASE_MOVED', rebase.tests.passed && rebase.same ? 'info' : 'medium', `${intent.baseBranch} moved to ${rebase.baseHead.slice(0, 12)} while the intent waited; rebased onto it, tests ${rebase.tests.summary}; ${verdict}`, {
    stage: 'merge',
    metadata: { baseHead: rebase.baseHead, head: rebase.head, same: rebase.same, testsPassed: rebase.tests.passed },
  });
  await ledger.flush();
  if (!rebase.tests.passed) return `${intent.baseBranch} moved while the change waited; on top of it the tests fail (${rebase.tests.summary}). Fix the change for ${intent.baseBranch} as it is now. End of the test output:\n${rebase.tests.tail}`;
  return rebase.same ? undefined : ASK_AGAIN;
}

/**
 * The conditions set at the gates before merge, checked on the branch: undefined when they all
 * hold (or there are none), else what impl is told to fix before the gates are asked again.
 */
async function unmetMergeConditions(run: IntentRun): Promise<string | undefined> {
  if (run.mergeConditions.length === 0) return undefined;
  const report = await run.activities.git.checkMergeConditions({ intent: run.intent, conditions: run.mergeConditions });
  recordAttempts(run, 'merge', 'the merge conditions', report.attempts);
  const lines = report.results.map((r) => `- ${r.met ? 'met' : 'NOT MET'}: ${r.condition} (${r.detail.slice(0, 500)})`);
  run.ledger.event('MERGE_CONDITIONS_CHECKED', report.met ? 'info' : 'medium', `merge conditions ${report.met ? 'all met' : 'not met'}:\n${lines.join('\n')}`.slice(0, 4000), {
    stage: 'merge',
    metadata: { results: report.results.map((r) => ({ condition: r.condition, met: r.met })) },
    ...(report.met ? {} : { suggestion: 'impl runs again to meet them; the gates are asked again after review' }),
  });
  await run.ledger.flush();
  if (report.met) return undefined;
  return `The merge is blocked: conditions the approvers set are not met. Make the change meet every one of them:\n${lines.join('\n')}`;
}

/** What a design document passed before its gate opened (see document-checks.ts). */
const DESIGN_CHECKS = {
  lld: 'passed: its Files and Tests sections are there, and every file it names exists or is marked new, inside the declared paths',
  spec: 'passed: every requirement has at least one test',
} as const;

const DESIGN_GATE_PROMPTS = {
  lld: 'Approve the low-level design before the spec and the implementation?',
  spec: 'Approve the test specification before the implementation?',
} as const;

/**
 * lld or spec (reviewed by another model when `reviewPolicy.design` is on), then its gate when
 * it is on and triage's risk reaches its `minRisk` (default HIGH); the gate shows the review. The person may approve, edit the document and approve their version (the next stage
 * gets it; the ledger keeps both), ask for changes (the stage runs again with their comments,
 * within its attempts), or reject.
 */
async function designStage(run: IntentRun, stage: 'lld' | 'spec', triage: TriageAssessment): Promise<void> {
  let changes: string | undefined;
  for (;;) {
    const artifactPath = await withinStageLimit(run, stage, () => runReviewedDesignStage(run, stage, changes));
    const sentBack = (await designGate(run, stage, triage, artifactPath)) ?? (await customGatesAfter(run, stage));
    if (!sentBack) return;
    changes = changesRequested(sentBack);
  }
}

/** The lld or spec gate, when it is on for this risk: the decision when it asks for changes; undefined once approved (an edit applied). */
async function designGate(run: IntentRun, stage: 'lld' | 'spec', triage: TriageAssessment, artifactPath: string): Promise<RecordedDecision | undefined> {
  if (!run.gates.enabled(stage) || !riskAtLeast(triage.risk, run.gates.settings(stage).minRisk ?? 'HIGH')) return undefined;
  const review = run.designReviews[stage];
  const document = { checks: DESIGN_CHECKS[stage], attempts: run.state.attempts[stage] ?? 1, ...(triage.predicted ? { predicted: triage.predicted } : {}), ...(review ? { review } : {}) };
  const decision = await run.gates.decide(stage, `${DESIGN_GATE_PROMPTS[stage]} (${artifactPath})`, { changes: true, editable: artifactPath, document });
  const sentBack = unlessApproved(decision);
  if (sentBack) return sentBack;
  if (decision.decision === 'approve-with-edits') {
    const { commit } = await run.activities.git.applyDocumentEdits({ intent: run.intent, stage, artifactPath, text: decision.document!, by: decision.by });
    if (commit) run.head = commit;
  }
  return undefined;
}

/** The intent's worktree, and the agent's level on the automation ladder for this run. */
async function prepare(run: IntentRun): Promise<void> {
  const { intent, state, activities } = run;
  setStatus(state, 'running');
  // INTENT_STARTED is in the ledger from the start, before any row an activity writes itself:
  // the worktree's activity carries it and writes it first.
  run.ledger.writeBeforeWaiting();
  run.placeOn(await activities.git.prepareWorktree({ intent }));
  run.ladderLevel = (await activities.ledger.readLadder({ scope: ladderScope(intent.agent) })).level;
  state.ladderLevel = run.ladderLevel;
}

/**
 * True when `stage` comes before the stage a replay started from (`warden replay --from`): the
 * original ran it, and its work is on the replay's branch already.
 */
function replayed(run: IntentRun, stage: 'triage' | 'lld' | 'spec' | 'impl'): boolean {
  const from = run.intent.replayOf?.from;
  return from !== undefined && STAGES.indexOf(stage) < STAGES.indexOf(from.stage);
}

/** Triage's assessment as the original made it, for a replay that starts after triage. */
function originalTriage(run: IntentRun): TriageAssessment {
  const triage = run.intent.replayOf!.from!.triage;
  run.triage = triage;
  holdRisk(run, triage);
  return triage;
}

/** triage, its risk (PROHIBITED halts), its predicted size, and the architecture gate for HIGH risk. */
async function triageStage(run: IntentRun): Promise<TriageAssessment> {
  const triage = (await withinStageLimit(run, 'triage', () => runStage(run, 'triage'))).triage ?? UNANSWERED_TRIAGE;
  run.triage = triage;
  assessRisk(run, triage);
  await checkPredictedSize(run, triage.predicted);
  if (triage.risk === 'HIGH') {
    await requireApproval(run, 'architecture', `Triage rates this intent HIGH risk (${triage.rationale || 'no rationale given'}). Approve the approach before the design is written?`);
  }
  // After triage nothing can be sent back (triage is not redone): such a gate approves or rejects.
  await customGatesAfter(run, 'triage');
  return triage;
}

/** review, on a model the review policy allows. */
async function reviewStage(run: IntentRun): Promise<ReviewAssessment> {
  checkReviewPolicy(run.intent);
  const review = (await withinStageLimit(run, 'review', () => runStage(run, 'review'))).review ?? UNANSWERED_REVIEW;
  run.review = review;
  const security = criticalSecurityFindings(review);
  run.state.review = { verdict: review.verdict, findings: review.findings.length, criticalSecurity: security.length };
  return review;
}

/**
 * The security gate (critical findings), the production gate, then the merge gate. Returns the
 * merge gate's approval, or the decision of whichever gate asked for changes.
 */
async function gatesBeforeMerge(run: IntentRun, review: ReviewAssessment): Promise<RecordedDecision> {
  const { intent, state } = run;
  const security = criticalSecurityFindings(review);
  const asks: Array<[GateName, string]> = [];
  if (security.length > 0) asks.push(['security', `Review reported ${security.length} critical security finding(s): ${security.map((f) => f.message).join(' | ').slice(0, 500)}`]);
  if (intent.environment === 'production') asks.push(['production', `This change targets production. Sign off on merging ${state.branch}?`]);
  asks.push(['merge', `Merge ${state.branch} into ${intent.baseBranch}${mergesViaPullRequest(run) ? ' through its pull request' : ''}?${review.verdict === 'BLOCK' ? ' Review says BLOCK.' : ''}`]);
  const custom = await customGatesAfter(run, 'review');
  if (custom) return custom;
  let decision: RecordedDecision | undefined;
  for (const [gate, prompt] of asks) {
    decision = gate === 'merge' && mergesViaPullRequest(run) ? await pullRequestMergeGate(run, prompt) : await run.gates.decide(gate, prompt, { changes: true });
    if (unlessApproved(decision)) return decision;
  }
  return decision!;
}

/** Archives the lineage (where the intent's `lineage.location` says) and merges; the artifact paths follow the lineage. */
async function merge(run: IntentRun): Promise<MutableOutcome> {
  const { intent, state, activities } = run;
  if (state.stage !== 'merge') enterStage(state, run.ledger, 'merge');
  const { lineagePath, lineageRef } = await activities.git.archiveLineage({ intent });
  const viaPullRequest = mergesViaPullRequest(run);
  const { mergedCommit } = viaPullRequest ? { mergedCommit: await mergeThroughForge(run) } : await activities.git.mergeIntent({ intent });
  state.mergedCommit = mergedCommit;
  if (lineagePath) {
    state.lineagePath = lineagePath;
    relocateArtifacts(state, activeLineageDir(intent.id), lineagePath);
  }
  if (lineageRef) state.lineageRef = lineageRef;
  state.stage = 'done';
  setStatus(state, 'merged');
  return { intentId: intent.id, status: 'merged', mergedCommit, ...(viaPullRequest && state.pullRequest ? { pullRequestUrl: state.pullRequest.url } : {}), ...(lineagePath ? { lineagePath } : {}), ...(lineageRef ? { lineageRef } : {}), spendUsd: state.spendUsd };
}
