import { ApplicationFailure } from '@temporalio/workflow';
import type { StageResult } from '../activities';
import type { RecordedDecision } from '../shared/decisions';
import { FailureType } from '../shared/errors';
import type { GateName } from '../shared/gates';
import type { AgentStage } from '../shared/stages';
import type { IntentRun } from './run-context';

/**
 * A person (or a gate's timeout policy) said no at a gate whose rejection ends the intent as
 * rejected, not failed: the change was turned down, nothing went wrong.
 */
export class GateRejected extends Error {
  constructor(
    readonly gate: GateName,
    readonly reason: string,
  ) {
    super(`rejected at the ${gate} gate: ${reason}`);
    this.name = 'GateRejected';
  }
}

/** Whether a decision lets the intent go on. */
export function approved(decision: RecordedDecision): boolean {
  return decision.decision === 'approve' || decision.decision === 'approve-with-conditions' || decision.decision === 'approve-with-edits';
}

/**
 * What a gate's decision means for the caller: undefined when it approved, the decision itself
 * when it asks for changes (only where the gate allowed it), and a GateRejected for anything else.
 */
export function unlessApproved(decision: RecordedDecision): RecordedDecision | undefined {
  if (approved(decision)) return undefined;
  if (decision.decision === 'request-changes') return decision;
  throw rejection(decision);
}

function rejection(decision: RecordedDecision): GateRejected {
  return new GateRejected(decision.gate, decision.reason ?? (decision.timedOut ? 'timed out' : 'rejected'));
}

/** Asks `gate` (the ladder may pass it); anything but an approval throws GateRejected. */
export async function requireApproval(run: IntentRun, gate: GateName, prompt: string): Promise<void> {
  const decision = await run.gates.decide(gate, prompt);
  if (!approved(decision)) throw rejection(decision);
}

/**
 * HIGH findings of the worker's behaviour monitor, handed over with a stage result, hold the
 * intent at the anomaly gate, which only a person decides; a rejection halts the intent.
 * CRITICAL findings have already halted it in the worker.
 */
export async function holdForAnomalies(run: IntentRun, stage: AgentStage, result: StageResult): Promise<void> {
  const high = (result.safety.anomalies ?? []).filter((a) => a.severity === 'high');
  if (high.length === 0) return;
  const more = high.length > 1 ? ` (and ${high.length - 1} more: ${high.slice(1).map((a) => a.kind).join(', ')})` : '';
  const decision = await run.gates.decide('anomaly', `The behaviour monitor found in ${stage}: ${high[0].reason}${more}. Let the intent go on?`);
  if (!approved(decision)) {
    throw ApplicationFailure.create({ type: FailureType.SafetyHalt, message: `stopped at the anomaly gate: ${decision.reason ?? 'rejected'}`, nonRetryable: true });
  }
}
