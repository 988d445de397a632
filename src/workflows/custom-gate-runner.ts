import { CHANGES_AFTER, customGateOpens } from '../shared/custom-gates';
import type { RecordedDecision } from '../shared/decisions';
import { riskAtLeast } from '../shared/risk';
import type { AgentStage } from '../shared/stages';
import { approved, GateRejected } from './approvals';
import type { IntentRun } from './run-context';

/**
 * Asks the custom gates that follow `stage` and whose conditions hold, in the config's order.
 * Returns the decision of the first one that asks for changes (after lld, spec, impl or review:
 * the caller runs the stage again), or undefined once every one approved; a rejection throws.
 */
export async function customGatesAfter(run: IntentRun, stage: AgentStage): Promise<RecordedDecision | undefined> {
  const { intent } = run;
  for (const gate of intent.customGates.filter((g) => g.after === stage)) {
    const touchedPaths = gate.when?.paths ? await run.activities.git.changedFilesMatching({ intent, globs: gate.when.paths }) : undefined;
    const facts = { risk: run.triage?.risk, environment: intent.environment, touchedPaths, findingCategories: run.review?.findings.map((f) => f.category) };
    const { opens, because } = customGateOpens(gate, facts, riskAtLeast);
    if (!opens) continue;
    const decision = await run.gates.decide(gate.id, `${gate.prompt}${because.length > 0 ? ` (${because.join('; ')})` : ''}`, { changes: CHANGES_AFTER.includes(stage) });
    if (decision.decision === 'request-changes') return decision;
    if (!approved(decision)) throw new GateRejected(gate.id, decision.reason ?? (decision.timedOut ? 'timed out' : 'rejected'));
  }
  return undefined;
}
