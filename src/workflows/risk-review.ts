import { ApplicationFailure } from '@temporalio/workflow';
import { agentForStage, designReviewViolation, modelFamily } from '../shared/agent-routing';
import { confidenceRefusal, type TriageAssessment } from '../shared/assessments';
import { FailureType } from '../shared/errors';
import type { Intent } from '../shared/intent';
import { stopped } from './halts';
import type { IntentRun } from './run-context';

/**
 * Risk and review policy: what triage's assessment means for the run, and who may review the
 * change.
 */

/** Keeps triage's assessment as the run's risk, which the later gates read. */
export function holdRisk(run: IntentRun, assessment: TriageAssessment): void {
  run.state.risk = { class: assessment.risk, confidence: assessment.confidence, structured: assessment.structured };
}

/**
 * Records triage's assessment in the state and the ledger (RISK_ASSESSED). PROHIBITED work never
 * reaches a gate: the intent halts here.
 */
export function assessRisk(run: IntentRun, assessment: TriageAssessment): void {
  holdRisk(run, assessment);
  const confidence = confidenceRefusal(assessment);
  const severity = assessment.risk === 'PROHIBITED' ? 'critical' : assessment.risk === 'HIGH' ? 'high' : assessment.structured ? 'info' : 'medium';
  const prohibited = 'Warden does not carry out PROHIBITED work: a person does it by hand, or the intent is rewritten so it no longer needs it.';
  const suggestion =
    assessment.risk === 'PROHIBITED'
      ? prohibited
      : assessment.risk === 'HIGH'
        ? 'a person approves the approach at the architecture gate before the design is written'
        : assessment.structured
          ? undefined
          : 'the triage answer should end with the JSON object its prompt asks for';
  run.ledger.event(
    'RISK_ASSESSED',
    severity,
    `risk ${assessment.risk}, confidence ${Math.round(assessment.confidence * 100)}%${assessment.structured ? '' : ' (no valid structured assessment: treated as unsure)'}${confidence ? `; confidence gate failed: ${confidence} (a person decides every gate)` : ''}`,
    {
      stage: 'triage',
      metadata: { risk: assessment.risk, confidence: assessment.confidence, structured: assessment.structured, affectedPaths: assessment.affectedPaths.slice(0, 50), problems: assessment.problems ?? null },
      ...(suggestion ? { suggestion } : {}),
    },
  );
  if (assessment.risk === 'PROHIBITED') {
    throw stopped(`RISK_PROHIBITED: triage classed this intent PROHIBITED (${assessment.rationale || 'no rationale given'}); it is not carried out`, prohibited);
  }
}

/**
 * Cross-model review: review runs on another model family than impl when the policy asks for it,
 * and never on a forbidden model. A violation fails the intent (REVIEW_POLICY_VIOLATION).
 */
export function checkReviewPolicy(intent: Intent): void {
  const reviewer = agentForStage(intent, 'review');
  const builder = agentForStage(intent, 'impl');
  const policy = intent.reviewPolicy;
  const reviewerModel = 'model' in reviewer ? reviewer.model : modelFamily(reviewer);
  let violation: string | undefined;
  if (policy.forbiddenReviewers.some((m) => m === reviewerModel || reviewerModel.startsWith(`${m}-`))) {
    violation = `${reviewerModel} is never allowed to review (reviewPolicy.forbiddenReviewers)`;
  } else if (policy.requireDifferentFamily && modelFamily(reviewer) === modelFamily(builder)) {
    violation = `review would run on ${modelFamily(reviewer)}, the family that built the change; the policy asks for another`;
  }
  if (!violation) return;
  throw ApplicationFailure.create({ type: FailureType.ReviewPolicyViolation, message: `REVIEW_POLICY_VIOLATION: ${violation}`, nonRetryable: true });
}

/**
 * Cross-model design review: the reviewer (the `review` route) may not be a forbidden reviewer,
 * nor the model that writes the lld or spec, nor, under `requireDifferentFamily`, its family.
 * Checked before anything runs: a violation fails the intent at once (REVIEW_POLICY_VIOLATION).
 */
export function checkDesignReviewPolicy(intent: Intent): void {
  if (!intent.reviewPolicy.design) return;
  const violation = designReviewViolation(intent);
  if (!violation) return;
  throw ApplicationFailure.create({ type: FailureType.ReviewPolicyViolation, message: `REVIEW_POLICY_VIOLATION: ${violation}`, nonRetryable: true });
}
