import { setHandler, workflowInfo } from '@temporalio/workflow';
import { criticalSecurityFindings, UNANSWERED_REVIEW, UNANSWERED_TRIAGE, type ReviewAssessment, type TriageAssessment } from '../shared/assessments';
import { activeLineageDir, intentIdFromWorkflowId } from '../shared/ids';
import { ladderScope } from '../shared/ladder';
import { stateQuery } from '../shared/messages';
import { riskAtLeast } from '../shared/risk';
import type { IntentOutcome } from '../shared/state';
import { requireApproval } from './approvals';
import { checkPredictedSize } from './blast-radius';
import { checkedIntent, refuseForeignWorkflowId } from './intent-input';
import { endEarly, finishIntent, type Ending, type MutableOutcome } from './intent-ending';
import { enterStage, relocateArtifacts, setStatus, startingState } from './intent-status';
import { handlePauseSignals } from './pause-signals';
import { assessRisk, checkReviewPolicy } from './risk-review';
import { IntentRun } from './run-context';
import { withinStageLimit, withinTotalLimit } from './stage-limits';
import { runDesignStage, runImplStage, runStage } from './stage-runner';

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
    ending.outcome = await withinTotalLimit(run, () => pipeline(run));
    return ending.outcome;
  } catch (error) {
    return await endEarly(run, error, ending);
  } finally {
    await finishIntent(run, ending);
  }
}

/** The pipeline's shape: each step either moves the intent on or throws (a rejection, a halt, a stop). */
async function pipeline(run: IntentRun): Promise<MutableOutcome> {
  await prepare(run);
  const triage = await triageStage(run);
  await withinStageLimit(run, 'lld', () => runDesignStage(run, 'lld'));
  if (run.gates.enabled('lld') && riskAtLeast(triage.risk, run.gates.settings('lld').minRisk ?? 'HIGH')) {
    await requireApproval(run, 'lld', `Approve the low-level design (${run.state.artifacts['02-lld.md'] ?? 'in the lineage'}) before the spec and the implementation?`);
  }
  await withinStageLimit(run, 'spec', () => runDesignStage(run, 'spec'));
  await withinStageLimit(run, 'impl', () => runImplStage(run, triage.predicted));
  const review = await reviewStage(run);
  await gatesBeforeMerge(run, review);
  return merge(run);
}

/** The intent's worktree, and the agent's level on the automation ladder for this run. */
async function prepare(run: IntentRun): Promise<void> {
  const { intent, state, activities } = run;
  setStatus(state, 'running');
  const prepared = await activities.git.prepareWorktree({ intent });
  state.worktreePath = prepared.worktreePath;
  run.head = prepared.head;
  run.ladderLevel = (await activities.ledger.readLadder({ scope: ladderScope(intent.agent) })).level;
  state.ladderLevel = run.ladderLevel;
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

/** The security gate (critical findings), the production gate, then the merge gate. */
async function gatesBeforeMerge(run: IntentRun, review: ReviewAssessment): Promise<void> {
  const { intent, state } = run;
  const security = criticalSecurityFindings(review);
  if (security.length > 0) {
    await requireApproval(run, 'security', `Review reported ${security.length} critical security finding(s): ${security.map((f) => f.message).join(' | ').slice(0, 500)}`);
  }
  if (intent.environment === 'production') {
    await requireApproval(run, 'production', `This change targets production. Sign off on merging ${state.branch}?`);
  }
  await requireApproval(run, 'merge', `Merge ${state.branch} into ${intent.baseBranch}?${review.verdict === 'BLOCK' ? ' Review says BLOCK.' : ''}`);
}

/** Archives the lineage into the branch and merges it; the artifact paths follow the lineage. */
async function merge(run: IntentRun): Promise<MutableOutcome> {
  const { intent, state, activities } = run;
  enterStage(state, run.ledger, 'merge');
  const { lineagePath } = await activities.git.archiveLineage({ intent });
  const { mergedCommit } = await activities.git.mergeIntent({ intent });
  state.mergedCommit = mergedCommit;
  state.lineagePath = `${intent.repoPath}/${lineagePath}`;
  relocateArtifacts(state, activeLineageDir(intent.id), lineagePath);
  state.stage = 'done';
  setStatus(state, 'merged');
  return { intentId: intent.id, status: 'merged', mergedCommit, lineagePath: state.lineagePath, spendUsd: state.spendUsd };
}
