import { CHANGES_AFTER, customGateOpens } from '../shared/custom-gates';
import type { RecordedDecision } from '../shared/decisions';
import type { AgentStage } from '../shared/stages';
import { unlessApproved } from './approvals';
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
    const { opens, because } = customGateOpens(gate, facts);
    if (!opens) continue;
    const decision = await run.gates.decide(gate.id, `${gate.prompt}${because.length > 0 ? ` (${because.join('; ')})` : ''}`, { changes: CHANGES_AFTER.includes(stage) });
    if (unlessApproved(decision)) return decision;
  }
  return undefined;
}
