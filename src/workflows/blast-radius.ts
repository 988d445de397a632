import { checkBlastRadius, checkPredictedBlastRadius, largerSize, type ChangeSize } from '../safety/limits';
import { approved } from './approvals';
import { stopped } from './halts';
import type { IntentRun } from './run-context';

/**
 * The blast-radius limit: how large a change may grow before a person looks at it. It is checked
 * on triage's prediction before any work and on the real change after every impl attempt; an
 * approval at the blast-radius gate covers the size the person saw, and no more.
 */

const BLAST_RADIUS_REJECTED = 'A person stopped the change for its size: split the intent into smaller ones, or re-plan it with a prediction that says how large it really is.';

const hardCap = (run: IntentRun): ChangeSize => ({ files: run.intent.limits.blastRadius.maxFiles, lines: run.intent.limits.blastRadius.maxLines });
const sizeText = (size: ChangeSize): string => `${size.files} files / ${size.lines} lines`;

/** Before any work: a triage prediction already over the hard cap stops at the blast-radius gate. */
export async function checkPredictedSize(run: IntentRun, predicted: ChangeSize | undefined): Promise<void> {
  if (!predicted) return;
  const check = checkPredictedBlastRadius(predicted, hardCap(run));
  if (check.verdict !== 'trip') return;
  run.ledger.event('ANOMALY_DETECTED', 'high', `blast radius: ${check.detail}`, {
    stage: 'triage',
    suggestion: check.suggestion,
    metadata: { kind: 'blast-radius', predicted, actual: null },
  });
  const decision = await run.gates.decide('blast-radius', `Triage predicts ${sizeText(predicted)}, over the hard cap of ${sizeText(hardCap(run))}. Start the work anyway?`);
  if (!approved(decision)) throw stopped(`stopped at the blast-radius gate: ${decision.reason ?? 'rejected'}`, BLAST_RADIUS_REJECTED);
  run.approvedSize = predicted;
}

/**
 * After every impl attempt, on the change's size as inspectImplementation measured it: a change beyond 1.5× triage's prediction or the hard cap stops at a
 * gate. A later attempt beyond 1.5× what was approved, or beyond both the hard cap and that,
 * stops at the gate again.
 */
export async function checkChangeSize(run: IntentRun, predicted: ChangeSize | undefined, actual: ChangeSize): Promise<void> {
  const { intent, state, ledger } = run;
  state.blastRadius = { predicted, actual };
  const check = checkBlastRadius({
    predicted: predicted ?? hardCap(run),
    actual,
    factor: intent.limits.blastRadius.factor,
    hardCap: hardCap(run),
    approved: run.approvedSize,
  });
  if (check.verdict !== 'trip') return;
  const predictedText = predicted ? sizeText(predicted) : 'no prediction';
  ledger.event('ANOMALY_DETECTED', 'high', `blast radius: ${check.detail}`, {
    stage: 'impl',
    suggestion: check.suggestion,
    metadata: { kind: 'blast-radius', predicted: predicted ?? null, actual, approved: run.approvedSize ?? null },
  });
  const decision = await run.gates.decide(
    'blast-radius',
    `The change is ${sizeText(actual)}; triage predicted ${predictedText}${run.approvedSize ? `; ${sizeText(run.approvedSize)} was approved before` : ''}. Let it go on?`,
  );
  if (!approved(decision)) throw stopped(`stopped at the blast-radius gate: ${decision.reason ?? 'rejected'}`, BLAST_RADIUS_REJECTED);
  run.approvedSize = run.approvedSize ? largerSize(run.approvedSize, actual) : actual;
}
