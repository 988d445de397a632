import { confidenceRefusal, judgeRefusal, type ReviewAssessment, type TriageAssessment } from '../shared/assessments';
import type { GateName } from '../shared/gates';

/** What the intent has learnt so far that bears on whether the automation ladder may pass a gate. */
export interface AutoPassEvidence {
  readonly triage?: TriageAssessment;
  readonly review?: ReviewAssessment;
  /** A stage tried to widen the task (cascade HIGH). */
  readonly cascadeHigh: boolean;
  /** An agent of the intent runs with the worker's whole network: nothing it called was metered or screened. */
  readonly hostNetwork: boolean;
  /** Agent-written code may run outside bubblewrap, or the tests with the worker's network (`intent.confinement`). */
  readonly unconfinedCode: boolean;
  /** What agent-written code was seen trying in its sandbox (connections, scratch writes, redacted answers). */
  readonly attemptCount: number;
  /** The merge goes through a pull request on the team's forge: its reviews decide, not the ladder. */
  readonly viaPullRequest?: boolean;
}

/**
 * The checks that do not vouch for the agent right now: while any is listed, the ladder does not
 * pass `gate` on its own and a person decides. Empty when every check holds.
 */
export function autoPassRefusals(gate: GateName, evidence: AutoPassEvidence): string[] {
  const { triage, review } = evidence;
  const refusals: string[] = [];
  if (!triage) refusals.push('no triage yet');
  else {
    if (!triage.structured) refusals.push('triage gave no valid structured assessment');
    const confidence = confidenceRefusal(triage);
    if (confidence) refusals.push(`confidence gate: ${confidence}`);
  }
  if (evidence.cascadeHigh) refusals.push('a stage tried to widen the task (cascade HIGH)');
  if (gate === 'merge') {
    if (evidence.viaPullRequest) refusals.push("the merge goes through a pull request: the forge's reviewers decide");
    if (evidence.hostNetwork) refusals.push("an agent ran with the worker's whole network (network: host)");
    if (evidence.unconfinedCode) refusals.push('agent-written code was allowed to run unconfined (confinement)');
    if (evidence.attemptCount > 0) refusals.push(`the sandbox saw agent-written code try ${evidence.attemptCount} thing(s) it stopped or kept to itself (ESCAPE_ATTEMPTED, ANSWER_REDACTED)`);
    if (!review) refusals.push('no review');
    else {
      if (review.verdict !== 'APPROVE') refusals.push(`review verdict ${review.verdict}`);
      const judge = judgeRefusal(review.scores);
      if (judge) refusals.push(`judge rule: ${judge}`);
    }
  }
  return refusals;
}
