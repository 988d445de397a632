import {
  ActivityCancellationType,
  ActivityFailure,
  type ActivityOptions,
  ApplicationFailure,
  CancellationScope,
  isCancellation,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  TimeoutFailure,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { StageResult, TestRunResult, WardenActivities } from '../activities';
import { BehaviourMonitor as LegacyBehaviourMonitor } from './legacy-behaviour-monitor';
import {
  checkBlastRadius,
  checkCompleteness,
  checkPredictedBlastRadius,
  checkTimeLimit,
  DEFAULT_STAGE_ATTEMPT_CAPS,
  DEFAULT_STAGE_TIME_LIMITS,
  largerSize,
  type ChangeSize,
  type TestOutcome,
} from '../safety/limits';
import { addUsd, ZERO_USD } from '../shared/money';
import { agentForStage, agentIdOf, modelFamily } from '../shared/agent-routing';
import { confidenceRefusal, criticalSecurityFindings, judgeRefusal, UNANSWERED_REVIEW, UNANSWERED_TRIAGE, type ReviewAssessment, type TriageAssessment } from '../shared/assessments';
import type { RecordedDecision } from '../shared/decisions';
import type { GateKind } from '../shared/gates';
import { parseDuration } from '../shared/duration';
import { FailureType, NON_RETRYABLE_FAILURES } from '../shared/errors';
import { suggestionForFailure } from '../shared/failure-suggestions';
import type { KillSwitchDetails } from '../shared/halt';
import { activeLineageDir, branchForIntent, intentIdFromWorkflowId, workflowIdForIntent } from '../shared/ids';
import type { Intent } from '../shared/intent';
import { ladderScope, type LadderLevel, type LadderRun } from '../shared/ladder';
import { pauseSignal, resumeSignal, stateQuery } from '../shared/messages';
import { riskAtLeast } from '../shared/risk';
import { WardenGate, WardenStage, WardenStatus } from '../shared/search-attributes';
import type { AgentStage, Stage } from '../shared/stages';
import type { IntentOutcome, IntentState, IntentStatus } from '../shared/state';
import { GateKeeper } from './gate-keeper';
import { LedgerRecorder } from './ledger-recorder';
import { NEXT_CALL_RESERVED_BY_WORKER_PATCH, StageGuard, haltFailure, installStageGuard, type HaltDetails } from './stage-guard';
import { WorkClock, withTimeLimit } from './time-limits';

/** Ledger writes and the final cleanup as local activities (see intentWorkflow). */
const LOCAL_BOOKKEEPING_PATCH = 'local-ledger-writes-and-cleanup';

/** The intent's input checked by a local activity rather than by zod in workflow code (see checkedIntent). */
export const INTENT_CHECK_PATCH = 'intent-checked-by-local-activity';

/**
 * LOCAL_BOOKKEEPING_PATCH decided in the first activation rather than after the intent check.
 * On replay, patched() answers true only for a marker recorded in the workflow task being
 * replayed. The code after the check's local activity sometimes ran in the next workflow task
 * (its marker in the first, the continuation in the second), and a replay, which resolves the
 * activity within the first, then got false and failed as non-deterministic. Patch decisions
 * belong before the first await.
 */
export const PATCHES_AT_START_PATCH = 'patches-decided-at-start';

/** Stage starts and each impl attempt's test result written to the ledger (`warden audit`). */
export const STAGE_STARTS_AND_TESTS_PATCH = 'stage-starts-and-tests-in-ledger';

/**
 * The behaviour monitor runs in the worker's activity interceptor, over every attempt of every
 * agent call of every intent, and hands HIGH findings over with a stage result; the workflow only
 * holds the intent at the anomaly gate for them. Before this patch each workflow ran a monitor of
 * its own on one observation per stage result, which the attempt caps kept below HIGH.
 */
export const WORKER_MONITOR_PATCH = 'behaviour-monitor-in-worker';

/**
 * Limits the workflow enforces itself, introduced together: a time limit per stage (a workflow
 * timer over all the stage's attempts, retries and test runs) with the total limit counted the
 * same way (working time only: not while waiting for a person); the completeness gate's cap; the
 * blast radius checked on triage's prediction before any work and after every impl attempt,
 * approvals included; and test runs whose counts could not be read kept unknown for the
 * two-strike rule. Histories from before it replay with none of these.
 */
export const WORKFLOW_LIMITS_PATCH = 'limits-enforced-by-workflow';

/**
 * A pause holds every stage activity (tests, checks, archive, merge), not only agent calls, and a
 * pause sent during a cooldown wait is honoured when the wait ends. Earlier histories scheduled
 * those activities while paused, and replay that way.
 */
export const HOLD_EVERY_STAGE_PATCH = 'pause-holds-every-stage';

/** A halt of this workflow's own that writes no SafetyEvent of its own, but says what to do. */
function stopped(message: string, suggestion: string): ApplicationFailure {
  return ApplicationFailure.create({ type: FailureType.SafetyHalt, message, nonRetryable: true, details: [{ suggestion }] });
}

/** The halt for a time limit that ran out: `scope` worked `limitMs`; `setting` is the config key that says how long it may. */
function timeLimitHalt(scope: string, limitMs: number, setting: string): ApplicationFailure {
  const check = checkTimeLimit(scope, 0, limitMs, limitMs);
  return haltFailure('TIME_LIMIT_EXCEEDED', { ...check, suggestion: `${check.suggestion} The limit is ${setting} in the config.` });
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
 * The workflow's input, re-checked against the intent schema by a local activity; a bad intent
 * fails the workflow at once with INVALID_INTENT. The checked intent is recorded in the history,
 * so a replay uses it as it was, whatever the schema's defaults have become since.
 */
async function checkedIntent(input: unknown): Promise<Intent> {
  if (!patched(INTENT_CHECK_PATCH)) return intentFromEarlierClient(input as IntentFromEarlierClient);
  const { checkIntent } = proxyLocalActivities<WardenActivities>({ startToCloseTimeout: '10s', retry: { nonRetryableErrorTypes: [FailureType.InvalidIntent] } });
  try {
    return await checkIntent(input);
  } catch (error) {
    const cause = error instanceof ActivityFailure ? error.cause : undefined;
    if (cause instanceof ApplicationFailure && cause.type === FailureType.InvalidIntent) {
      throw ApplicationFailure.create({ type: FailureType.InvalidIntent, message: cause.message, nonRetryable: true });
    }
    throw error;
  }
}

/**
 * The server refuses a second running workflow with the same id, and that is what keeps two runs of
 * one intent off the same branch and worktree; a workflow started under any other id (from the Web
 * UI or another client) would slip past it, so it is refused before it touches anything.
 */
function refuseForeignWorkflowId(intentId: string, workflowId: string): void {
  const expected = workflowIdForIntent(intentId);
  if (workflowId === expected) return;
  throw ApplicationFailure.create({
    type: FailureType.InvalidIntent,
    message: `intent ${intentId} must run as workflow ${expected}, not ${workflowId}: one workflow id per intent is what keeps two runs off one branch`,
    nonRetryable: true,
  });
}

/** Once the lineage has moved (archived on merge, kept aside otherwise), the artifact paths follow it. */
function relocateArtifacts(state: IntentState, from: string, to: string): void {
  for (const [name, artifactPath] of Object.entries(state.artifacts)) {
    if (artifactPath.startsWith(`${from}/`)) state.artifacts[name] = `${to}${artifactPath.slice(from.length)}`;
  }
}

function startingState(intentId: string, goal: string): IntentState {
  return {
    intentId,
    goal,
    status: 'running',
    stage: 'triage',
    attempts: {},
    spendUsd: ZERO_USD,
    decisions: [],
    artifacts: {},
    branch: branchForIntent(intentId),
    tests: [],
    rejectedSignals: 0,
  };
}

/** Limits as clients sent them before the keys WORKFLOW_LIMITS_PATCH reads existed. */
type LimitsFromEarlierClient = Omit<Intent['limits'], 'stageTimeLimits' | 'attempts'> &
  Partial<Pick<Intent['limits'], 'stageTimeLimits'>> & { readonly attempts: Omit<Intent['limits']['attempts'], 'completeness'> & { readonly completeness?: number } };

/** An intent as clients sent it before INTENT_CHECK_PATCH: checked, but without the fields added since. */
type IntentFromEarlierClient = Omit<Intent, 'stageAgents' | 'reviewPolicy' | 'limits'> & Partial<Pick<Intent, 'stageAgents' | 'reviewPolicy'>> & { readonly limits: LimitsFromEarlierClient };

/**
 * Histories from before INTENT_CHECK_PATCH checked their input in workflow code, which filled in
 * the defaults of fields added after their client was built. Their input had been checked by that
 * client, with every other default filled in; these are what the schema adds to it
 * (test/workflows/replay.test.ts compares this with the schema on the recorded histories). The
 * limits added with WORKFLOW_LIMITS_PATCH are never read by such a run; they are filled in so
 * the intent has the schema's shape.
 */
export function intentFromEarlierClient(input: IntentFromEarlierClient): Intent {
  return {
    ...input,
    stageAgents: input.stageAgents ?? {},
    reviewPolicy: input.reviewPolicy ?? { requireDifferentFamily: false, forbiddenReviewers: [] },
    limits: {
      ...input.limits,
      attempts: { ...input.limits.attempts, completeness: input.limits.attempts.completeness ?? DEFAULT_STAGE_ATTEMPT_CAPS.completeness },
      stageTimeLimits: input.limits.stageTimeLimits ?? { ...DEFAULT_STAGE_TIME_LIMITS },
    },
  };
}

/** A person (or a gate's timeout policy) said no: the intent ends as rejected, not failed. */
class GateRejected extends Error {
  constructor(
    readonly gate: GateKind,
    readonly reason: string,
  ) {
    super(`rejected at the ${gate} gate: ${reason}`);
    this.name = 'GateRejected';
  }
}

type MutableOutcome = { -readonly [K in keyof IntentOutcome]: IntentOutcome[K] };

/**
 * One intent, end to end: triage → lld → spec → impl (edit ⇄ test) → review → merge gate → merge.
 *
 * - Input is re-checked first, by a local activity running the intent schema (the client checked it
 *   too): a bad intent fails at once.
 * - Signal `decide` ({gate, decision, by, reason}) decides the pending gate; invalid payloads are
 *   refused, recorded as SafetyEvents, and change nothing. A gate waits its timeout, then rejects.
 * - Signals `pause` / `resume` hold and release the next stage activity (an agent call, the tests,
 *   a check, the archive or the merge); ledger writes and the final cleanup are never held.
 * - Query `state` returns stage, attempts, spend, pending gate, decisions and artifact paths.
 * - Before each agent call the stage-guard interceptor checks iteration caps, the two-strike
 *   rule, the intent budget and the cooldown; after it, the behaviour monitor and the blast
 *   radius check may stop the intent at a gate or halt it; workflow timers bound each stage's
 *   working time and the whole run's (time waiting for a person does not count).
 * - Cancellation (`warden stop`) kills the running agent and still removes the worktree.
 * History holds only references and summaries; documents and diffs stay in the worktree.
 */
export async function intentWorkflow(input: unknown): Promise<IntentOutcome> {
  // `state` answers from the first moment; while the input is being checked it knows the id only.
  const uncheckedId = intentIdFromWorkflowId(workflowInfo().workflowId);
  setHandler(stateQuery, () => startingState(uncheckedId, ''));
  const patchesAtStart = patched(PATCHES_AT_START_PATCH);
  // Histories from before it replay without these ledger rows (their ids come from uuid4()).
  const stageStartsAndTests = patched(STAGE_STARTS_AND_TESTS_PATCH);
  const monitorInWorker = patched(WORKER_MONITOR_PATCH);
  const workflowLimits = patched(WORKFLOW_LIMITS_PATCH);
  const nextCallReservedByWorker = patched(NEXT_CALL_RESERVED_BY_WORKER_PATCH);
  const holdEveryStage = patched(HOLD_EVERY_STAGE_PATCH);
  const intent = await checkedIntent(input);
  refuseForeignWorkflowId(intent.id, workflowInfo().workflowId);
  const { limits } = intent;
  const state = startingState(intent.id, intent.goal);

  // Ledger writes and the final worktree cleanup are short and idempotent: as local activities, on
  // the worker that runs this workflow, they cost no server round trip each. (Histories from
  // before this patch scheduled them as ordinary activities, and replay that way.)
  const localBookkeeping = patchesAtStart || patched(LOCAL_BOOKKEEPING_PATCH);
  // The ledger must not lose an event: while PostgreSQL is down, retry (with backoff) until it is back.
  const ledgerOptions: ActivityOptions = { startToCloseTimeout: '30s', retry: { initialInterval: '1s', maximumInterval: '10s', backoffCoefficient: 2 } };
  const ledgerActivities = localBookkeeping ? proxyLocalActivities<WardenActivities>(ledgerOptions) : proxyActivities<WardenActivities>(ledgerOptions);
  const ledger = new LedgerRecorder(intent.id, (batch) => ledgerActivities.appendToLedger(batch));
  const guard = new StageGuard(limits, (type, severity, reason, details) => ledger.event(type, severity, reason, details), {
    nextCallReservedByWorker,
    holdEveryStage,
    onCooldown: (wait) => {
      state.cooldown = wait;
    },
  });
  installStageGuard(guard);
  const monitor = new LegacyBehaviourMonitor();
  // Time limits count working time: not while a person is asked (a gate) or holds the intent (pause).
  const clock = new WorkClock(() => state.pendingGate !== undefined || guard.paused);

  ledger.event('INTENT_STARTED', 'info', intent.goal, {
    agentId: agentIdOf(intent.agent),
    metadata: { repoPath: intent.repoPath, baseBranch: intent.baseBranch, paths: intent.paths },
  });

  setHandler(stateQuery, () => state);

  // Filled in as the intent goes: what the automation ladder and the review package need.
  let ladderLevel: LadderLevel = 0;
  let triage: TriageAssessment | undefined;
  let review: ReviewAssessment | undefined;
  let cascadeHigh = false;
  const gates = new GateKeeper({
    intent,
    state,
    ledger,
    // Every agent of the intent, by kind and by name: none of them decides a gate.
    agentNames: [intent.agent, ...Object.values(intent.stageAgents)].flatMap((a) => [a.kind, agentIdOf(a)]),
    autoPass: (gate) => ({ level: ladderLevel, risk: triage?.risk ?? 'MEDIUM', refusals: autoPassRefusals(gate) }),
    reviewPackage: async () =>
      state.attempts.impl === undefined || !triage
        ? undefined
        : git.buildReviewPackage({ intent, facts: { triage, review, tests: state.tests, spendUsd: state.spendUsd, ladderLevel } }),
    onWaiting: (gate) => setStatus('waiting', gate),
    onDecided: (decision) => {
      if (decision.decision === 'approve-with-conditions') pendingConditions = [...(decision.conditions ?? [])];
      setStatus(guard.paused ? 'paused' : 'running');
    },
  });

  /** Checks that must hold before the ladder may pass `gate` on its own. */
  function autoPassRefusals(gate: GateKind): string[] {
    const refusals: string[] = [];
    if (!triage) refusals.push('no triage yet');
    else {
      if (!triage.structured) refusals.push('triage gave no valid structured assessment');
      const confidence = confidenceRefusal(triage);
      if (confidence) refusals.push(`confidence gate: ${confidence}`);
    }
    if (cascadeHigh) refusals.push('a stage tried to widen the task (cascade HIGH)');
    if (gate === 'merge') {
      if (!review) refusals.push('no review');
      else {
        if (review.verdict !== 'APPROVE') refusals.push(`review verdict ${review.verdict}`);
        const judge = judgeRefusal(review.scores);
        if (judge) refusals.push(`judge rule: ${judge}`);
      }
    }
    return refusals;
  }

  /** A gate whose rejection ends the intent as rejected (not failed): the person said no. */
  async function requireApproval(gate: GateKind, prompt: string): Promise<void> {
    const decision = await gates.decide(gate, prompt);
    if (!approved(decision)) throw new GateRejected(gate, decision.reason ?? (decision.timedOut ? 'timed out' : 'rejected'));
  }
  setHandler(pauseSignal, (request) => {
    if (guard.paused) return;
    guard.paused = true;
    state.paused = { by: String(request?.by ?? 'unknown'), reason: request?.reason, at: new Date().toISOString() };
    setStatus('paused');
    ledger.event('OVERRIDE', 'info', `paused by ${state.paused.by}${request?.reason ? `: ${request.reason}` : ''}`, { stage: state.stage });
  });
  setHandler(resumeSignal, (request) => {
    if (!guard.paused) return;
    guard.paused = false;
    state.paused = undefined;
    setStatus(state.pendingGate ? 'waiting' : 'running', state.pendingGate?.gate ?? null);
    ledger.event('OVERRIDE', 'info', `resumed by ${String(request?.by ?? 'unknown')}`, { stage: state.stage });
  });

  // Git bookkeeping is idempotent, so it may retry freely.
  const gitOptions: ActivityOptions = {
    startToCloseTimeout: '2m',
    retry: { maximumAttempts: 5, initialInterval: '1s', nonRetryableErrorTypes: [...NON_RETRYABLE_FAILURES] },
  };
  const git = proxyActivities<WardenActivities>(gitOptions);
  const cleanupActivities = localBookkeeping ? proxyLocalActivities<WardenActivities>(gitOptions) : git;
  // Agents and tests heartbeat; waiting for cancellation to complete means a stopped intent's
  // process is dead before its worktree is removed.
  const work = proxyActivities<WardenActivities>({
    startToCloseTimeout: parseDuration(limits.stageTimeout),
    heartbeatTimeout: '10s',
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    // Five tries, backing off to a minute: an open circuit or an empty token bucket asks for a
    // later retry (nextRetryDelay) and should not cost the intent its stage.
    retry: { maximumAttempts: 5, initialInterval: '2s', maximumInterval: '1m', nonRetryableErrorTypes: [...NON_RETRYABLE_FAILURES] },
  });
  const testsRun = proxyActivities<WardenActivities>({
    startToCloseTimeout: parseDuration(limits.testTimeout) + 60_000,
    heartbeatTimeout: '10s',
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry: { maximumAttempts: 2, nonRetryableErrorTypes: [...NON_RETRYABLE_FAILURES] },
  });

  function enter(stage: Stage): void {
    state.stage = stage;
    state.attempts[stage] = (state.attempts[stage] ?? 0) + 1;
    if (stageStartsAndTests) ledger.event('STAGE_STARTED', 'info', `${stage} attempt ${state.attempts[stage]}`, { stage, metadata: { attempt: state.attempts[stage] } });
    upsertSearchAttributes([{ key: WardenStage, value: stage }]);
    setCurrentDetails(`**${intent.goal}**\n\nStage: \`${stage}\` (attempt ${state.attempts[stage]}), spend $${state.spendUsd}`);
  }

  function setStatus(status: IntentStatus, gate: GateKind | null = null): void {
    state.status = status;
    upsertSearchAttributes([
      { key: WardenStatus, value: status },
      { key: WardenGate, value: gate },
    ]);
  }

  /** Runs a stage's whole work (every attempt) under its time limit (see WORKFLOW_LIMITS_PATCH). */
  async function withinStageLimit<T>(stage: AgentStage, body: () => Promise<T>): Promise<T> {
    if (!workflowLimits) return body();
    const limitMs = parseDuration(limits.stageTimeLimits[stage]);
    return withTimeLimit(clock, limitMs, () => timeLimitHalt(`stage ${stage}`, limitMs, `limits.stageTimeLimits.${stage}`), body);
  }

  async function runStage(stage: AgentStage, feedback?: string): Promise<StageResult> {
    enter(stage);
    const attempt = state.attempts[stage]!;
    const conditions = pendingConditions;
    pendingConditions = undefined;
    const result = await work.runAgentStage({ intent, stage, attempt, feedback, maxCallUsd: limits.maxCallUsd, startCommit: head, conditions });
    if (result.commit) head = result.commit;
    state.spendUsd = addUsd(state.spendUsd, result.costUsd);
    const nearBudget = guard.recordSpend(result.costUsd, stage);
    state.artifacts[result.artifactPath.split('/').pop()!] = result.artifactPath;
    ledger.cost({ stage, attempt, agentId: agentIdOf(agentForStage(intent, stage)), modelId: result.model, inputTokens: result.inputTokens, outputTokens: result.outputTokens, usd: result.costUsd });
    ledger.event('STAGE_COMPLETED', 'info', result.summary || `${stage} attempt ${attempt} done`, {
      stage,
      agentId: agentIdOf(agentForStage(intent, stage)),
      modelId: result.model,
      costSnapshot: { intentUsd: state.spendUsd },
      metadata: { attempt, artifactPath: result.artifactPath, commit: result.commit ?? null, cascade: result.safety.cascade.level },
    });
    await ledger.flush();
    await watchBehaviour(stage, result);
    if (result.safety.cascade.level === 'HIGH') {
      cascadeHigh = true;
      await requireApproval('cascade', `The ${stage} answer tried to widen the task (${result.safety.cascade.patterns.slice(0, 3).join('; ')}). Let the intent go on?`);
    }
    if (nearBudget && gates.enabled('cost-overrun')) {
      await requireApproval('cost-overrun', `Spend is $${state.spendUsd} of the $${limits.budgetUsd} budget (${Math.round(limits.budgetWarnAt * 100)}% reached). Continue?`);
    }
    return result;
  }

  /**
   * HIGH findings of the behaviour monitor hold the intent at the anomaly gate, which only a
   * person decides; CRITICAL ones have already halted it in the worker (see WORKER_MONITOR_PATCH).
   */
  async function watchBehaviour(stage: AgentStage, result: StageResult): Promise<void> {
    if (monitorInWorker) {
      const high = (result.safety.anomalies ?? []).filter((a) => a.severity === 'high');
      if (high.length === 0) return;
      const more = high.length > 1 ? ` (and ${high.length - 1} more: ${high.slice(1).map((a) => a.kind).join(', ')})` : '';
      const decision = await gates.decide('anomaly', `The behaviour monitor found in ${stage}: ${high[0].reason}${more}. Let the intent go on?`);
      if (!approved(decision)) {
        throw ApplicationFailure.create({ type: FailureType.SafetyHalt, message: `stopped at the anomaly gate: ${decision.reason ?? 'rejected'}`, nonRetryable: true });
      }
      return;
    }
    const findings = monitor.observe({
      at: Date.now(),
      stage,
      agent: agentIdOf(agentForStage(intent, stage)),
      action: stage,
      outputHash: result.safety.outputHash,
      costUsd: result.costUsd,
      latencyMs: result.safety.latencyMs,
    });
    for (const finding of findings) {
      ledger.event('ANOMALY_DETECTED', finding.severity, finding.reason, { stage, suggestion: finding.suggestion, metadata: { kind: finding.kind } });
    }
    await ledger.flush();
    const critical = findings.find((f) => f.severity === 'critical');
    if (critical) {
      throw stopped(`anomaly (${critical.kind}): ${critical.reason}`, critical.suggestion);
    }
    const high = findings.find((f) => f.severity === 'high');
    if (high) {
      const decision = await gates.decide('anomaly', `The behaviour monitor found: ${high.reason}. Let the intent go on?`);
      if (!approved(decision)) {
        throw stopped(`stopped at the anomaly gate: ${decision.reason ?? 'rejected'}`, high.suggestion);
      }
    }
  }

  /** Conditions of the last approve-with-conditions, for the next stage's prompt. */
  let pendingConditions: string[] | undefined;
  const approved = (decision: RecordedDecision): boolean => decision.decision === 'approve' || decision.decision === 'approve-with-conditions';
  /** The intent branch's head as this run knows it: where the next stage starts (see resume). */
  let head: string | undefined;
  let blastRadiusApproved = false;
  /** The largest change a person let through at the blast-radius gate (see WORKFLOW_LIMITS_PATCH). */
  let approvedSize: ChangeSize | undefined;
  const hardCap = (): ChangeSize => ({ files: limits.blastRadius.maxFiles, lines: limits.blastRadius.maxLines });
  const sizeText = (size: ChangeSize): string => `${size.files} files / ${size.lines} lines`;
  const BLAST_RADIUS_REJECTED = 'A person stopped the change for its size: split the intent into smaller ones, or re-plan it with a prediction that says how large it really is.';

  /** Before any work: a triage prediction already over the hard cap stops at the blast-radius gate. */
  async function checkPredictedSize(predicted: ChangeSize | undefined): Promise<void> {
    if (!predicted) return;
    const check = checkPredictedBlastRadius(predicted, hardCap());
    if (check.verdict !== 'trip') return;
    ledger.event('ANOMALY_DETECTED', 'high', `blast radius: ${check.detail}`, {
      stage: 'triage',
      suggestion: check.suggestion,
      metadata: { kind: 'blast-radius', predicted, actual: null },
    });
    const decision = await gates.decide('blast-radius', `Triage predicts ${sizeText(predicted)}, over the hard cap of ${sizeText(hardCap())}. Start the work anyway?`);
    if (!approved(decision)) throw stopped(`stopped at the blast-radius gate: ${decision.reason ?? 'rejected'}`, BLAST_RADIUS_REJECTED);
    approvedSize = predicted;
  }

  /**
   * After every impl attempt: a change beyond 1.5× triage's prediction or the hard cap stops at a
   * gate. An approval covers the size the person saw; a later attempt beyond 1.5× that, or beyond
   * both the hard cap and that, stops at the gate again.
   */
  async function checkChangeSize(predicted: ChangeSize | undefined): Promise<void> {
    const actual = await git.measureChange({ intent });
    state.blastRadius = { predicted, actual };
    if (!workflowLimits && blastRadiusApproved) return;
    const check = checkBlastRadius({
      predicted: predicted ?? hardCap(),
      actual,
      factor: limits.blastRadius.factor,
      hardCap: hardCap(),
      approved: workflowLimits ? approvedSize : undefined,
    });
    if (check.verdict !== 'trip') return;
    const predictedText = predicted ? sizeText(predicted) : 'no prediction';
    ledger.event('ANOMALY_DETECTED', 'high', `blast radius: ${check.detail}`, {
      stage: 'impl',
      suggestion: check.suggestion,
      metadata: { kind: 'blast-radius', predicted: predicted ?? null, actual, approved: approvedSize ?? null },
    });
    const decision = await gates.decide(
      'blast-radius',
      `The change is ${sizeText(actual)}; triage predicted ${predictedText}${approvedSize ? `; ${sizeText(approvedSize)} was approved before` : ''}. Let it go on?`,
    );
    if (!approved(decision)) throw stopped(`stopped at the blast-radius gate: ${decision.reason ?? 'rejected'}`, BLAST_RADIUS_REJECTED);
    blastRadiusApproved = true;
    approvedSize = approvedSize ? largerSize(approvedSize, actual) : actual;
  }

  /** How this run counts on the ladder: success, and what the people at the gates said. */
  function ladderRun(): LadderRun {
    const human = state.decisions.filter((d) => d.decision !== 'defer' && !d.timedOut && !d.by.startsWith('warden'));
    const rejected = human.some((d) => d.decision === 'reject');
    const mergeByHuman = human.find((d) => d.gate === 'merge');
    return {
      success: state.status === 'merged',
      ...(human.length > 0 ? { humanApproved: !rejected } : {}),
      // Review said APPROVE and a person still turned the change down.
      falsePositive: review?.verdict === 'APPROVE' && mergeByHuman?.decision === 'reject',
      // Missed critical bugs show up after the merge: a person reports them (warden ladder missed-bug).
    };
  }

  /**
   * Runs lld or spec until its document passes the mechanical checks; each failure goes back to
   * the agent with the errors. The stage guard bounds the attempts (MAX_ITERATIONS_EXCEEDED).
   */
  async function runDesignStage(stage: 'lld' | 'spec'): Promise<void> {
    let feedback: string | undefined;
    for (;;) {
      const result = await runStage(stage, feedback);
      const check = await git.checkDocument({ intent, stage, artifactPath: result.artifactPath });
      if (check.ok) return;
      ledger.event('STAGE_FAILED', 'medium', `${stage} attempt ${state.attempts[stage]}: the document failed its mechanical checks: ${check.errors.join('; ').slice(0, 1000)}`, {
        stage,
        suggestion: 'the next attempt is told what to fix',
        metadata: { errors: check.errors.slice(0, 20) },
      });
      feedback = `The ${stage === 'lld' ? 'design' : 'test specification'} was refused by the mechanical checks. Fix each of these and answer with the whole document again:\n${check.errors.map((e) => `- ${e}`).join('\n')}`;
    }
  }

  /** Cross-model review: review on another model family than impl, and never on a forbidden model. */
  function checkReviewPolicy(): void {
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

  /** Records triage's assessment; PROHIBITED never reaches a gate: the intent halts here. */
  function assessRisk(assessment: TriageAssessment): void {
    state.risk = { class: assessment.risk, confidence: assessment.confidence, structured: assessment.structured };
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
    ledger.event(
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

  /** The result of a test run for the two-strike rule; counts the runner did not print stay unknown. */
  function testOutcome(tests: TestRunResult): TestOutcome {
    if (workflowLimits) return { passed: tests.passedCount, failed: tests.failedCount, failingTests: tests.failingTests, green: tests.passed };
    return { passed: tests.passedCount ?? 0, failed: tests.failedCount ?? (tests.passed ? 0 : 1), failingTests: tests.failingTests };
  }

  /**
   * impl: edit → test → mechanical checks, until the tests pass and the checks hold. Each further
   * attempt is dispatched through the stage guard, which halts the intent once the impl cap
   * (MAX_ITERATIONS_EXCEEDED) or the two-strike rule (STAGNATION_DETECTED) says so; the
   * completeness gate's own cap halts it after its last refusal.
   */
  async function runImplStage(predicted: ChangeSize | undefined): Promise<void> {
    let feedback: string | undefined;
    let refusals = 0;
    for (let attempt = 1; ; attempt++) {
      await runStage('impl', feedback);
      const tests = await testsRun.runTests({ intent, attempt });
      if (tests.commit) head = tests.commit;
      state.tests.push({ attempt, passed: tests.passed, summary: tests.summary });
      if (stageStartsAndTests) {
        ledger.event(tests.passed ? 'TESTS_PASSED' : 'TESTS_FAILED', tests.passed ? 'info' : 'medium', `impl attempt ${attempt}: tests ${tests.summary}`, {
          stage: 'impl',
          metadata: { attempt, ran: tests.ran, passed: tests.passedCount ?? null, failed: tests.failedCount ?? null, logPath: tests.logPath ?? null },
          ...(tests.passed ? {} : { suggestion: 'the next impl attempt, if the limits allow one, is given the end of the test output' }),
        });
      }
      guard.recordTests(testOutcome(tests));
      if (tests.logPath) state.artifacts[tests.logPath.split('/').pop()!] = tests.logPath;
      await checkChangeSize(predicted);
      // Passing tests are not enough: no stubs, and the tests themselves left as they were.
      const gates = await git.checkImplementation({ intent });
      if (!gates.ok) {
        refusals += 1;
        const cap = limits.attempts.completeness;
        ledger.event('STAGE_FAILED', 'medium', `impl attempt ${attempt}: ${gates.stubCount} stub(s), ${gates.tamperCount} test tampering finding(s)${workflowLimits ? ` (completeness gate refusal ${refusals} of ${cap})` : ''}`, {
          stage: 'impl',
          suggestion: 'the next attempt is told what was found',
          metadata: { stubs: gates.stubCount, tampering: gates.tamperCount },
        });
        if (workflowLimits) {
          const completeness = checkCompleteness(refusals, cap);
          if (completeness.verdict === 'trip') throw haltFailure('MAX_ITERATIONS_EXCEEDED', completeness);
        }
      }
      if (tests.passed && gates.ok) return;
      feedback = [
        tests.instruction,
        `Tests ${tests.summary}. End of their output:\n${tests.tail}`,
        gates.ok ? '' : `The mechanical checks refused this attempt:\n${gates.feedback}`,
      ]
        .filter(Boolean)
        .join('\n\n');
    }
  }

  async function pipeline(): Promise<MutableOutcome> {
    setStatus('running');
    const prepared = await git.prepareWorktree({ intent });
    state.worktreePath = prepared.worktreePath;
    head = prepared.head;

    ladderLevel = (await ledgerActivities.readLadder({ scope: ladderScope(intent.agent) })).level;
    state.ladderLevel = ladderLevel;

    triage = (await withinStageLimit('triage', () => runStage('triage'))).triage ?? UNANSWERED_TRIAGE;
    assessRisk(triage);
    if (workflowLimits) await checkPredictedSize(triage.predicted);
    if (triage.risk === 'HIGH') {
      await requireApproval('architecture', `Triage rates this intent HIGH risk (${triage.rationale || 'no rationale given'}). Approve the approach before the design is written?`);
    }
    await withinStageLimit('lld', () => runDesignStage('lld'));
    if (gates.enabled('lld') && riskAtLeast(triage.risk, gates.settings('lld').minRisk ?? 'HIGH')) {
      await requireApproval('lld', `Approve the low-level design (${state.artifacts['02-lld.md'] ?? 'in the lineage'}) before the spec and the implementation?`);
    }
    await withinStageLimit('spec', () => runDesignStage('spec'));
    const predicted = triage.predicted;
    await withinStageLimit('impl', () => runImplStage(predicted));

    checkReviewPolicy();
    review = (await withinStageLimit('review', () => runStage('review'))).review ?? UNANSWERED_REVIEW;
    const security = criticalSecurityFindings(review);
    state.review = { verdict: review.verdict, findings: review.findings.length, criticalSecurity: security.length };
    if (security.length > 0) {
      await requireApproval('security', `Review reported ${security.length} critical security finding(s): ${security.map((f) => f.message).join(' | ').slice(0, 500)}`);
    }
    if (intent.environment === 'production') {
      await requireApproval('production', `This change targets production. Sign off on merging ${state.branch}?`);
    }
    await requireApproval('merge', `Merge ${state.branch} into ${intent.baseBranch}?${review.verdict === 'BLOCK' ? ' Review says BLOCK.' : ''}`);

    enter('merge');
    const { lineagePath } = await git.archiveLineage({ intent });
    const { mergedCommit } = await git.mergeIntent({ intent });
    state.mergedCommit = mergedCommit;
    state.lineagePath = `${intent.repoPath}/${lineagePath}`;
    relocateArtifacts(state, activeLineageDir(intent.id), lineagePath);
    state.stage = 'done';
    setStatus('merged');
    return { intentId: intent.id, status: 'merged', mergedCommit, lineagePath: state.lineagePath, spendUsd: state.spendUsd };
  }

  let outcome: MutableOutcome | undefined;
  // The total time limit is a workflow timer: when it fires, the pipeline's scope is cancelled.
  let timeLimitHit = false;
  /** What a person could do about the failure, for INTENT_FAILED too. */
  let failureSuggestion: string | undefined;
  const totalMs = parseDuration(limits.totalTimeout);
  const pipelineScope = new CancellationScope();
  const timerScope = new CancellationScope();
  timerScope
    .run(() => (workflowLimits ? clock.elapse(totalMs) : sleep(totalMs)))
    .then(
      () => {
        timeLimitHit = true;
        pipelineScope.cancel();
      },
      () => undefined, // the timer was cancelled because the pipeline ended first
    );
  try {
    outcome = await pipelineScope.run(pipeline);
    return outcome;
  } catch (caught) {
    let error = caught;
    if (error instanceof GateRejected && !timeLimitHit) {
      setStatus('rejected');
      outcome = { intentId: intent.id, status: 'rejected', spendUsd: state.spendUsd, reason: error.reason };
      return outcome;
    }
    if (timeLimitHit && workflowLimits) {
      error = timeLimitHalt('the intent', totalMs, 'limits.totalTimeout');
    } else if (timeLimitHit) {
      setStatus('failed');
      state.error = `total time limit of ${limits.totalTimeout} reached`;
      failureSuggestion = 'raise limits.totalTimeout, or split the intent';
      ledger.event('STAGE_FAILED', 'high', state.error, { stage: state.stage, suggestion: failureSuggestion });
      throw ApplicationFailure.create({ type: FailureType.SafetyHalt, message: `TIME_LIMIT_EXCEEDED: ${state.error}`, nonRetryable: true });
    }
    // The global stop killed the running agent, and `warden stop --all` cancels the intent right
    // after setting it: wait a moment for that, so the intent ends cancelled like the others.
    if (stoppedMidRun(error)) error = (await cancellationWithin(STOPPED_MID_RUN_WAIT_MS)) ?? error;
    if (isCancellation(error)) {
      setStatus('cancelled');
    } else {
      setStatus('failed');
      const cause = error instanceof ApplicationFailure ? error : (error as { cause?: unknown }).cause;
      const failure = cause instanceof ApplicationFailure ? cause : undefined;
      const timeoutType = cause instanceof TimeoutFailure ? cause.timeoutType : undefined;
      state.error = (cause as Error | undefined)?.message ?? (error as Error).message ?? String(error);
      const halt = failure?.type === FailureType.SafetyHalt ? (failure.details?.[0] as Partial<HaltDetails> | undefined) : undefined;
      if (halt?.eventType) {
        ledger.event(halt.eventType, 'high', halt.reason ?? state.error, { stage: state.stage, suggestion: halt.suggestion, metadata: { current: halt.current, threshold: halt.threshold } });
      }
      failureSuggestion = halt?.suggestion || suggestionForFailure({ type: failure?.type ?? undefined, timeoutType }, intent.id);
      ledger.event('STAGE_FAILED', 'high', state.error, {
        stage: state.stage,
        suggestion: failureSuggestion,
        metadata: { attempts: state.attempts, failureType: failure?.type ?? (timeoutType ? `TIMEOUT_${timeoutType}` : null) },
      });
      // A halt from inside an activity: fail the intent with the halt itself, so its reason is
      // what `warden run` and the Web UI show rather than "Activity task failed".
      if (failure && failure !== error && failure.type === FailureType.SafetyHalt) throw failure;
    }
    throw error;
  } finally {
    timerScope.cancel();
    // Runs after cancellation too: no worktree is ever left behind. The branch is kept for a
    // failed or stopped intent (its commits are what a resume continues from).
    const { lineageCopy } = await CancellationScope.nonCancellable(() =>
      cleanupActivities.cleanupIntent({ intent, deleteBranch: outcome !== undefined }),
    );
    if (!state.lineagePath && lineageCopy) {
      state.lineagePath = lineageCopy;
      relocateArtifacts(state, activeLineageDir(intent.id), lineageCopy);
      if (outcome) outcome.lineagePath = lineageCopy;
    }
    state.worktreePath = undefined;
    const endings = { merged: 'INTENT_MERGED', rejected: 'INTENT_REJECTED', cancelled: 'INTENT_CANCELLED' } as const;
    const ending = state.status in endings ? endings[state.status as keyof typeof endings] : 'INTENT_FAILED';
    ledger.event(ending, ending === 'INTENT_FAILED' ? 'high' : 'info', state.error ?? outcome?.reason ?? state.status, {
      stage: state.stage,
      ...(ending === 'INTENT_FAILED' ? { suggestion: failureSuggestion ?? suggestionForFailure({}, intent.id) } : {}),
      costSnapshot: { intentUsd: state.spendUsd },
      metadata: { mergedCommit: state.mergedCommit ?? null, lineagePath: state.lineagePath ?? null },
    });
    await CancellationScope.nonCancellable(() => ledger.flush());
    // The run counts on the agent's ladder, unless a person stopped it (that says nothing about the agent).
    if (state.status !== 'cancelled' && state.ladderLevel !== undefined) {
      await CancellationScope.nonCancellable(() => ledgerActivities.recordLadderRun({ scope: ladderScope(intent.agent), intentId: intent.id, runId: workflowInfo().runId, run: ladderRun() }));
    }
    setCurrentDetails(`**${intent.goal}**\n\nFinished: ${state.status}`);
  }
}
