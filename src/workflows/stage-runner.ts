import type { StageResult, TestPlanCheck } from '../activities';
import type { RecordedDecision } from '../shared/decisions';
import type { ChangeSize } from '../safety/limits';
import { addUsd } from '../shared/money';
import { agentForCall, agentForStage, agentIdOf } from '../shared/agent-routing';
import { UNANSWERED_DESIGN_REVIEW, type DesignReviewSummary } from '../shared/assessments';
import type { AgentStage } from '../shared/stages';
import { holdForAnomalies, requireApproval } from './approvals';
import { checkChangeSize } from './blast-radius';
import { enterStage } from './intent-status';
import type { IntentRun } from './run-context';
import { enforceCompletenessCap, testOutcome } from './stage-limits';
import { recordAttempts } from './sandbox-evidence';
import { describeSecretFinding, secretRepairPrompt, type SecretScan } from '../shared/secret-findings';

/**
 * Running the agent stages: one agent call with its bookkeeping (`runStage`), the design stages
 * that loop until their document passes the mechanical checks, and impl's edit ⇄ test loop.
 * How often a stage may run is the stage guard's to say, before each dispatch.
 */

/**
 * One attempt of an agent stage: the agent call (the stage guard checks the limits before it is
 * dispatched), its cost and result in the ledger, then the gates its result may open: anomaly
 * (behaviour monitor HIGH), cascade (the answer tried to widen the task), cost-overrun (the
 * budget's warning share reached).
 */
export async function runStage(run: IntentRun, stage: AgentStage, feedback?: string): Promise<StageResult> {
  const { intent, state, ledger, guard, gates } = run;
  const { limits } = intent;
  enterStage(state, ledger, stage);
  const attempt = state.attempts[stage]!;
  const conditions = run.pendingConditions;
  run.pendingConditions = undefined;
  // The agent's call writes its own rows (costs): what led to it goes into the ledger first, so
  // the ledger's order (what `warden audit` lists) is the order things happened in. The call
  // carries them, and its worker writes them before anything else (see due-rows.ts).
  ledger.writeBeforeWaiting();
  const result = await run.activities.agents.runAgentStage({ intent, stage, attempt, feedback, maxCallUsd: limits.maxCallUsd, startCommit: run.head, conditions });
  if (result.commit) run.head = result.commit;
  state.spendUsd = addUsd(state.spendUsd, result.costUsd);
  const nearBudget = guard.recordSpend(result.costUsd, stage);
  state.artifacts[result.artifactPath.split('/').pop()!] = result.artifactPath;
  const agentId = agentIdOf(agentForStage(intent, stage));
  // Its calls' cost rows were written as each was settled, by the activity (see the cost layer).
  ledger.event('STAGE_COMPLETED', 'info', result.summary || `${stage} attempt ${attempt} done`, {
    stage,
    agentId,
    modelId: result.model,
    costSnapshot: { intentUsd: state.spendUsd },
    metadata: { attempt, artifactPath: result.artifactPath, commit: result.commit ?? null, cascade: result.safety.cascade.level },
  });
  recordAttempts(run, stage, `the ${stage} agent (attempt ${attempt})`, result.attempts);
  recordSecretScan(run, stage, `${stage} attempt ${attempt}`, 'the agent', result.secrets);
  // Written with the next stage's start, ahead of the next activity (its worker writes them
  // before it acts) or before a gate opens or a held call waits: a person at the next gate sees
  // them, and nothing acts on the stage's outcome before they are in the ledger.
  ledger.writeBeforeWaiting();
  await holdForAnomalies(run, stage, result);
  if (result.safety.cascade.level === 'HIGH') {
    run.cascadeHigh = true;
    await requireApproval(run, 'cascade', `The ${stage} answer tried to widen the task (${result.safety.cascade.patterns.slice(0, 3).join('; ')}). Let the intent go on?`);
  }
  if (nearBudget && gates.enabled('cost-overrun')) {
    await requireApproval(run, 'cost-overrun', `Spend is $${state.spendUsd} of the $${limits.budgetUsd} budget (${Math.round(limits.budgetWarnAt * 100)}% reached). Continue?`);
  }
  return result;
}

/** What a stage is told when a person sent it back from a gate (a request-changes decision). */
export function changesRequested(decision: RecordedDecision): string {
  return `At the ${decision.gate} gate, ${decision.by} asked for changes. Make them, and keep what they did not ask to change:\n${decision.reason ?? ''}`;
}

/**
 * Runs lld or spec until its document passes the mechanical checks (made by the agent-stage
 * activity on the document it committed); each failure goes back to the agent with the errors. The stage guard bounds the attempts (MAX_ITERATIONS_EXCEEDED).
 */
export async function runDesignStage(run: IntentRun, stage: 'lld' | 'spec', changes?: string): Promise<string> {
  const { state, ledger } = run;
  let feedback = changes;
  for (;;) {
    const result = await runStage(run, stage, feedback);
    const check = result.documentCheck!;
    if (check.ok) return result.artifactPath;
    ledger.event('STAGE_FAILED', 'medium', `${stage} attempt ${state.attempts[stage]}: the document failed its mechanical checks: ${check.errors.join('; ').slice(0, 1000)}`, {
      stage,
      suggestion: 'the next attempt is told what to fix',
      metadata: { errors: check.errors.slice(0, 20) },
    });
    feedback = `The ${stage === 'lld' ? 'design' : 'test specification'} was refused by the mechanical checks. Fix each of these and answer with the whole document again:\n${check.errors.map((e) => `- ${e}`).join('\n')}`;
  }
}

/** Most findings a design gate lists (the rest are counted; the review's file has them all). */
const MAX_GATE_FINDINGS = 10;

/**
 * lld or spec, reviewed: the document passes its mechanical checks (runDesignStage), then, when
 * `reviewPolicy.design` is on, the `review` route's agent reviews it. A BLOCK sends it back to
 * its author with the findings (the stage guard bounds the attempts); APPROVE and
 * REQUEST_CHANGES go on to the gate, which shows the verdict and findings.
 */
export async function runReviewedDesignStage(run: IntentRun, stage: 'lld' | 'spec', changes?: string): Promise<string> {
  let feedback = changes;
  for (;;) {
    const artifactPath = await runDesignStage(run, stage, feedback);
    if (!run.intent.reviewPolicy.design) return artifactPath;
    const review = await reviewDesign(run, stage);
    if (review.verdict !== 'BLOCK') return artifactPath;
    feedback = [
      `The design reviewer (${review.reviewer}, ${review.model}) blocked this ${stage === 'lld' ? 'design' : 'test specification'}: ${review.summary || 'no summary given'}`,
      'Address each finding and answer with the whole document again:',
      ...review.findings.map((f) => `- [${f.severity}/${f.category}] ${f.message}${f.path ? ` (${f.path})` : ''}`),
    ].join('\n');
  }
}

/**
 * One design review: the reviewer's call on the document the last attempt of `stage` wrote,
 * dispatched through the stage guard and the worker's safety layers like any agent call (its
 * budget, its cost rows), then DESIGN_REVIEWED in the ledger with the verdict and findings.
 */
async function reviewDesign(run: IntentRun, stage: 'lld' | 'spec'): Promise<DesignReviewSummary> {
  const { intent, state, ledger, guard } = run;
  const attempt = state.attempts[stage]!;
  ledger.writeBeforeWaiting();
  const result = await run.activities.agents.runAgentStage({ intent, stage, attempt, designReview: true, maxCallUsd: intent.limits.maxCallUsd, startCommit: run.head });
  if (result.commit) run.head = result.commit;
  state.spendUsd = addUsd(state.spendUsd, result.costUsd);
  const nearBudget = guard.recordSpend(result.costUsd, stage);
  state.artifacts[result.artifactPath.split('/').pop()!] = result.artifactPath;
  const assessment = result.designReview ?? UNANSWERED_DESIGN_REVIEW;
  const reviewer = agentIdOf(agentForCall(intent, { stage, designReview: true }));
  const summary: DesignReviewSummary = {
    verdict: assessment.verdict,
    reviewer,
    model: result.model,
    summary: assessment.summary.slice(0, 500),
    findings: assessment.findings.slice(0, MAX_GATE_FINDINGS).map((f) => ({ ...f, message: f.message.slice(0, 500) })),
    total: assessment.findings.length,
  };
  run.designReviews[stage] = summary;
  const listed = summary.findings.map((f) => `- [${f.severity}/${f.category}] ${f.message}`);
  ledger.event('DESIGN_REVIEWED', assessment.verdict === 'BLOCK' ? 'medium' : assessment.verdict === 'REQUEST_CHANGES' ? 'low' : 'info', [`${stage} attempt ${attempt} reviewed by ${reviewer} (${result.model}): ${assessment.verdict}${assessment.summary ? ` — ${assessment.summary}` : ''}${assessment.structured ? '' : ' (no valid structured answer)'}`, ...listed].join('\n').slice(0, 4000), {
    stage,
    agentId: reviewer,
    modelId: result.model,
    costSnapshot: { intentUsd: state.spendUsd },
    metadata: { attempt, verdict: assessment.verdict, findings: summary.findings, total: summary.total, structured: assessment.structured, artifactPath: result.artifactPath, costUsd: result.costUsd },
    ...(assessment.verdict === 'BLOCK' ? { suggestion: `the ${stage} agent writes the document again, told the findings` } : {}),
  });
  recordAttempts(run, stage, `the design reviewer of ${stage} (attempt ${attempt})`, result.attempts);
  recordSecretScan(run, stage, `the design review of ${stage} attempt ${attempt}`, 'the reviewer', result.secrets);
  ledger.writeBeforeWaiting();
  await holdForAnomalies(run, stage, result);
  if (nearBudget && run.gates.enabled('cost-overrun')) {
    await requireApproval(run, 'cost-overrun', `Spend is $${state.spendUsd} of the $${intent.limits.budgetUsd} budget (${Math.round(intent.limits.budgetWarnAt * 100)}% reached). Continue?`);
  }
  return summary;
}

/**
 * impl: edit → test → blast radius → mechanical checks → the spec's test plan, until the tests
 * pass, the checks hold and every planned test is there and ran. Each further attempt is dispatched through the stage guard, which halts the intent once
 * the impl cap (MAX_ITERATIONS_EXCEEDED) or the two-strike rule (STAGNATION_DETECTED) says so;
 * the completeness gate's own cap halts it after its last refusal.
 */
export async function runImplStage(run: IntentRun, predicted: ChangeSize | undefined, changes?: string): Promise<void> {
  const { intent, state, ledger, guard } = run;
  let feedback = changes;
  let refusals = 0;
  for (;;) {
    const result = await runStage(run, 'impl', feedback);
    // A secret in the change goes back at once: what is left of the change is not worth testing.
    if (result.secrets && result.secrets.held.length > 0) {
      feedback = secretRepairPrompt(result.secrets.held, 'you');
      continue;
    }
    // Numbered across the intent: a second round after a person asked for changes goes on counting.
    const attempt = state.attempts.impl!;
    const tests = await run.activities.tests.runTests({ intent, attempt });
    if (tests.commit) run.head = tests.commit;
    state.tests.push({ attempt, passed: tests.passed, summary: tests.summary });
    ledger.event(tests.passed ? 'TESTS_PASSED' : 'TESTS_FAILED', tests.passed ? 'info' : 'medium', `impl attempt ${attempt}: tests ${tests.summary}`, {
      stage: 'impl',
      metadata: { attempt, ran: tests.ran, passed: tests.passedCount ?? null, failed: tests.failedCount ?? null, logPath: tests.logPath ?? null },
      ...(tests.passed ? {} : { suggestion: 'the next impl attempt, if the limits allow one, is given the end of the test output' }),
    });
    recordAttempts(run, 'impl', `the repo's tests after impl attempt ${attempt}`, tests.attempts);
    guard.recordTests(testOutcome(tests));
    if (tests.logPath) state.artifacts[tests.logPath.split('/').pop()!] = tests.logPath;
    recordSecretScan(run, 'impl', `impl attempt ${attempt}`, 'the tests', tests.secrets);
    const testSecrets = tests.secrets?.held ?? [];
    // One call reads what the tests left (size, mechanical checks, test plan); judged in that order.
    const inspection = await run.activities.git.inspectImplementation({ intent, ...(tests.passed && testSecrets.length === 0 ? { testPlan: { testLogPath: tests.logPath } } : {}) });
    await checkChangeSize(run, predicted, inspection.size);
    // Passing tests are not enough: no stubs, and the tests themselves left as they were.
    const { checks, plan } = inspection;
    if (!checks.ok) {
      refusals += 1;
      const cap = intent.limits.attempts.completeness;
      ledger.event('STAGE_FAILED', 'medium', `impl attempt ${attempt}: ${checks.stubCount} stub(s), ${checks.tamperCount} test tampering finding(s) (completeness gate refusal ${refusals} of ${cap})`, {
        stage: 'impl',
        suggestion: 'the next attempt is told what was found',
        metadata: { stubs: checks.stubCount, tampering: checks.tamperCount },
      });
      enforceCompletenessCap(refusals, cap);
    }
    if (plan && checks.ok) {
      // Green and complete: the tests the spec promised must be among them, and have run.
      recordTestPlan(run, attempt, plan);
      if (plan.ok) return;
      feedback = testPlanRepairPrompt(plan);
      continue;
    }
    feedback = [
      tests.instruction,
      `Tests ${tests.summary}. End of their output:\n${tests.tail}`,
      checks.ok ? '' : `The mechanical checks refused this attempt:\n${checks.feedback}`,
      testSecrets.length > 0 ? secretRepairPrompt(testSecrets, 'the tests') : '',
    ]
      .filter(Boolean)
      .join('\n\n');
  }
}

/** The check of the spec's test plan as a ledger row (TEST_PLAN_CHECKED), kept for the review package. */
function recordTestPlan(run: IntentRun, attempt: number, plan: TestPlanCheck): void {
  if (!plan.planned) return;
  run.testPlan = plan.tests.map((t) => ({ requirement: t.requirement.slice(0, 200), test: t.test.slice(0, 200), file: t.file.slice(0, 200), existing: t.existing, status: t.status }));
  const ran = plan.tests.filter((t) => t.status === 'ran').length;
  const unverified = plan.tests.filter((t) => t.status === 'unverified').length;
  const summary = plan.ok
    ? `impl attempt ${attempt}: the spec's test plan is kept: ${ran} planned test(s) ran${unverified ? `, ${unverified} in their files but not named by the run` : ''}`
    : `impl attempt ${attempt}: the spec's test plan is not kept: ${plan.problems.join('; ')}`;
  run.ledger.event('TEST_PLAN_CHECKED', plan.ok ? 'info' : 'medium', summary.slice(0, 1000), {
    stage: 'impl',
    ...(plan.ok ? {} : { suggestion: 'impl runs again, told which planned tests are missing, skipped or did not run' }),
    metadata: { attempt, ok: plan.ok, specPath: plan.specPath ?? null, tests: run.testPlan.map((t) => ({ test: t.test, file: t.file, status: t.status })) },
  });
}

/** What impl is told when its change breaks the spec's test plan. */
function testPlanRepairPrompt(plan: TestPlanCheck): string {
  return [
    'The tests pass, but the test plan of the specification is not kept. Write each planned test in its file, with the exact name the plan gives, and make it run (not skipped):',
    ...plan.problems.map((p) => `- ${p}`),
  ].join('\n');
}

/** Most rows one scan writes of each kind; the rest are counted in the last one. */
const MAX_SECRET_ROWS = 20;

/**
 * The secret scan's findings as ledger rows (never their values): SECRET_IN_CHANGE for each
 * finding held back from the change, SECRET_ALLOWED for each one a person's allowance let in.
 */
function recordSecretScan(run: IntentRun, stage: AgentStage, when: string, who: string, scan: SecretScan | undefined): void {
  if (!scan) return;
  const { ledger } = run;
  const rows = <T>(items: readonly T[], write: (item: T, more: string) => void) =>
    items.slice(0, MAX_SECRET_ROWS).forEach((item, i) => write(item, i === MAX_SECRET_ROWS - 1 && items.length > MAX_SECRET_ROWS ? ` (and ${items.length - MAX_SECRET_ROWS} more)` : ''));
  rows(scan.held, (f, more) =>
    ledger.event('SECRET_IN_CHANGE', 'high', `${when}: ${who} wrote a secret at ${describeSecretFinding(f)}; the file was put back and nothing of it committed${more}`, {
      stage,
      suggestion: stage === 'impl' ? 'impl runs again, told the file, line and rule' : 'the stage goes on without that file',
      metadata: { path: f.path, line: f.line, rule: f.rule, by: who },
    }),
  );
  rows(scan.allowed, (f, more) =>
    ledger.event('SECRET_ALLOWED', 'medium', `${when}: ${who} wrote a secret at ${describeSecretFinding(f)}, let in by the config's secrets.allow: ${f.reason}${more}`, {
      stage,
      metadata: { path: f.path, line: f.line, rule: f.rule, reason: f.reason, by: who },
    }),
  );
}
