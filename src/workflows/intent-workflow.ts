import {
  ActivityCancellationType,
  ApplicationFailure,
  CancellationScope,
  condition,
  isCancellation,
  log,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { StageResult, WardenActivities } from '../activities';
import { BehaviourMonitor } from '../safety/behaviour-monitor';
import { checkBlastRadius } from '../safety/limits';
import { addUsd, ZERO_USD } from '../safety/money';
import { DecisionSchema, type Decision, type DecisionAnswer, type GateKind, type RecordedDecision } from '../shared/decisions';
import { parseDuration } from '../shared/duration';
import { FailureType, NON_RETRYABLE_FAILURES } from '../shared/errors';
import { branchForIntent } from '../shared/ids';
import { IntentSchema, describeIssues, type Intent } from '../shared/intent';
import { decideSignal, decideUpdate, pauseSignal, resumeSignal, stateQuery } from '../shared/messages';
import { WardenGate, WardenStage, WardenStatus } from '../shared/search-attributes';
import type { AgentStage, Stage } from '../shared/stages';
import type { IntentOutcome, IntentState, IntentStatus } from '../shared/state';
import { LedgerRecorder } from './ledger-recorder';
import { StageGuard, installStageGuard, type HaltDetails } from './stage-guard';

type MutableOutcome = { -readonly [K in keyof IntentOutcome]: IntentOutcome[K] };

/**
 * One intent, end to end: triage → lld → spec → impl (edit ⇄ test) → review → merge gate → merge.
 *
 * - Input is re-validated here (the client validated it too): a bad intent fails at once.
 * - Signal `decide` ({gate, decision, by, reason}) decides the pending gate; invalid payloads are
 *   refused, recorded as SafetyEvents, and change nothing. A gate waits its timeout, then rejects.
 * - Signals `pause` / `resume` hold and release the next stage.
 * - Query `state` returns stage, attempts, spend, pending gate, decisions and artifact paths.
 * - Before each agent call the stage-guard interceptor checks iteration caps, the two-strike
 *   rule, the intent budget and the cooldown; after it, the behaviour monitor and the blast
 *   radius check may stop the intent at a gate or halt it; a total time limit bounds the run.
 * - Cancellation (`warden stop`) kills the running agent and still removes the worktree.
 * History holds only references and summaries; documents and diffs stay in the worktree.
 */
export async function intentWorkflow(input: unknown): Promise<IntentOutcome> {
  const parsed = IntentSchema.safeParse(input);
  if (!parsed.success) {
    throw ApplicationFailure.create({
      type: FailureType.InvalidIntent,
      message: `invalid intent: ${describeIssues(parsed.error)}`,
      nonRetryable: true,
    });
  }
  const intent: Intent = parsed.data;
  const { limits } = intent;
  const state: IntentState = {
    intentId: intent.id,
    goal: intent.goal,
    status: 'running',
    stage: 'triage',
    attempts: {},
    spendUsd: ZERO_USD,
    decisions: [],
    artifacts: {},
    branch: branchForIntent(intent.id),
    tests: [],
    rejectedSignals: 0,
  };
  let gateDecision: RecordedDecision | undefined;

  // The ledger must not lose an event: while PostgreSQL is down, retry (with backoff) until it is back.
  const ledgerActivities = proxyActivities<WardenActivities>({
    startToCloseTimeout: '30s',
    retry: { initialInterval: '1s', maximumInterval: '10s', backoffCoefficient: 2 },
  });
  const ledger = new LedgerRecorder(intent.id, (batch) => ledgerActivities.appendToLedger(batch));
  const guard = new StageGuard(limits, (type, severity, reason, details) => ledger.event(type, severity, reason, details));
  installStageGuard(guard);
  const monitor = new BehaviourMonitor();

  ledger.event('INTENT_STARTED', 'info', intent.goal, {
    agentId: intent.agent.kind,
    metadata: { repoPath: intent.repoPath, baseBranch: intent.baseBranch, paths: intent.paths },
  });

  const refuse = (reason: string, payload: unknown): void => {
    state.rejectedSignals += 1;
    log.warn('ignored a decide signal', { reason });
    ledger.event('DECISION_REFUSED', 'medium', reason, {
      stage: state.stage,
      metadata: { payload: JSON.stringify(payload ?? null).slice(0, 500) },
      suggestion: 'send {"gate":"<pending gate>","decision":"approve"|"reject","by":"<name>","reason":"…"}',
    });
  };

  setHandler(stateQuery, () => state);
  /** Whether a parsed decision may decide now: the gate is pending, the sender may decide it. */
  const mayDecide = (decision: Decision): string | undefined => {
    const pending = state.pendingGate;
    if (pending?.gate !== decision.gate || gateDecision) return `decision for the ${decision.gate} gate, which is not pending`;
    // The agent never approves its own work.
    if (decision.by === intent.agent.kind || decision.by.toLowerCase() === 'agent') return `${decision.by} is the agent: it may not decide its own gate`;
    const approvers = intent.gates[decision.gate]?.approvers;
    if (approvers && !approvers.includes(decision.by)) return `${decision.by} may not decide the ${decision.gate} gate (approvers: ${approvers.join(', ')})`;
    if (decision.decision === 'defer' && deferredGates.has(decision.gate)) return `the ${decision.gate} gate was deferred once already`;
    return undefined;
  };
  const deferredGates = new Set<GateKind>();
  let gateDeadline = 0;
  /** Applies an accepted decision: defer extends the wait once; any other decides the gate. */
  const accept = (decision: Decision): void => {
    const at = new Date().toISOString();
    if (decision.decision === 'defer') {
      deferredGates.add(decision.gate);
      const period = intent.gates[decision.gate]?.deferPeriod ?? limits.gateTimeout;
      gateDeadline += parseDuration(period);
      state.pendingGate = { ...state.pendingGate!, timeoutAt: new Date(gateDeadline).toISOString() };
      state.decisions.push({ ...decision, at, timedOut: false });
      ledger.gateDecision({ gate: decision.gate, decision: 'defer', by: decision.by, reason: decision.reason, requestedAt: state.pendingGate.requestedAt, decidedAt: at, timedOut: false });
      ledger.event('GATE_DECIDED', 'info', `${decision.gate} gate deferred by ${decision.by} until ${state.pendingGate.timeoutAt}`, {
        stage: state.stage,
        metadata: { gate: decision.gate, decision: 'defer', by: decision.by },
      });
      return;
    }
    gateDecision = { ...decision, at, timedOut: false };
  };

  setHandler(decideSignal, (raw: unknown) => {
    const decision = DecisionSchema.safeParse(raw);
    if (!decision.success) {
      refuse(`invalid decide payload: ${describeIssues(decision.error)}`, raw);
      return;
    }
    const refusal = mayDecide(decision.data);
    if (refusal) return refuse(refusal, raw);
    accept(decision.data);
  });
  setHandler(
    decideUpdate,
    (raw: unknown): DecisionAnswer => {
      const decision = DecisionSchema.parse(raw); // the validator let only a valid payload through
      const refusal = mayDecide(decision);
      if (refusal) {
        refuse(refusal, raw);
        return { accepted: false, reason: refusal };
      }
      accept(decision);
      return { accepted: true };
    },
    {
      validator: (raw: unknown): void => {
        const decision = DecisionSchema.safeParse(raw);
        if (!decision.success) throw new Error(`invalid decision: ${describeIssues(decision.error)}`);
      },
    },
  );
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
  const git = proxyActivities<WardenActivities>({
    startToCloseTimeout: '2m',
    retry: { maximumAttempts: 5, initialInterval: '1s', nonRetryableErrorTypes: [...NON_RETRYABLE_FAILURES] },
  });
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

  async function runStage(stage: AgentStage, feedback?: string): Promise<StageResult> {
    enter(stage);
    const attempt = state.attempts[stage]!;
    const conditions = pendingConditions;
    pendingConditions = undefined;
    const result = await work.runAgentStage({ intent, stage, attempt, feedback, maxCallUsd: limits.maxCallUsd, startCommit: head, conditions });
    if (result.commit) head = result.commit;
    state.spendUsd = addUsd(state.spendUsd, result.costUsd);
    guard.recordSpend(result.costUsd, stage);
    state.artifacts[result.artifactPath.split('/').pop()!] = result.artifactPath;
    ledger.cost({ stage, attempt, agentId: intent.agent.kind, modelId: result.model, inputTokens: result.inputTokens, outputTokens: result.outputTokens, usd: result.costUsd });
    ledger.event('STAGE_COMPLETED', 'info', result.summary || `${stage} attempt ${attempt} done`, {
      stage,
      agentId: intent.agent.kind,
      modelId: result.model,
      costSnapshot: { intentUsd: state.spendUsd },
      metadata: { attempt, artifactPath: result.artifactPath, commit: result.commit ?? null, cascade: result.safety.cascade.level },
    });
    if (result.safety.cascade.level === 'HIGH' && !state.humanRequired) {
      state.humanRequired = `the ${stage} answer tried to widen the task (cascade HIGH): a person decides the next gate`;
    }
    await ledger.flush();
    await watchBehaviour(stage, result);
    return result;
  }

  /** Feeds the behaviour monitor; HIGH findings hold the intent at a gate, CRITICAL ones halt it. */
  async function watchBehaviour(stage: AgentStage, result: StageResult): Promise<void> {
    const findings = monitor.observe({
      at: Date.now(),
      stage,
      agent: intent.agent.kind,
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
      throw ApplicationFailure.create({ type: FailureType.SafetyHalt, message: `anomaly (${critical.kind}): ${critical.reason}`, nonRetryable: true });
    }
    const high = findings.find((f) => f.severity === 'high');
    if (high) {
      const decision = await waitForGate('anomaly', `The behaviour monitor found: ${high.reason}. Let the intent go on?`);
      if (!approved(decision)) {
        throw ApplicationFailure.create({ type: FailureType.SafetyHalt, message: `stopped at the anomaly gate: ${decision.reason ?? 'rejected'}`, nonRetryable: true });
      }
    }
  }

  /** Conditions of the last approve-with-conditions, for the next stage's prompt. */
  let pendingConditions: string[] | undefined;
  const approved = (decision: RecordedDecision): boolean => decision.decision === 'approve' || decision.decision === 'approve-with-conditions';
  /** The intent branch's head as this run knows it: where the next stage starts (see resume). */
  let head: string | undefined;
  let blastRadiusApproved = false;
  /** After an impl attempt: a change beyond 1.5× triage's prediction or the hard cap stops at a gate. */
  async function checkChangeSize(predicted: { files: number; lines: number } | undefined): Promise<void> {
    const actual = await git.measureChange({ intent });
    state.blastRadius = { predicted, actual };
    if (blastRadiusApproved) return;
    const check = checkBlastRadius({
      predicted: predicted ?? { files: limits.blastRadius.maxFiles, lines: limits.blastRadius.maxLines },
      actual,
      factor: limits.blastRadius.factor,
      hardCap: { files: limits.blastRadius.maxFiles, lines: limits.blastRadius.maxLines },
    });
    if (check.verdict !== 'trip') return;
    const predictedText = predicted ? `${predicted.files} files / ${predicted.lines} lines` : 'no prediction';
    ledger.event('ANOMALY_DETECTED', 'high', `blast radius: ${check.detail}`, {
      stage: 'impl',
      suggestion: check.suggestion,
      metadata: { kind: 'blast-radius', predicted: predicted ?? null, actual },
    });
    const decision = await waitForGate(
      'blast-radius',
      `The change is ${actual.files} files / ${actual.lines} lines; triage predicted ${predictedText}. Let it go on?`,
    );
    if (!approved(decision)) {
      throw ApplicationFailure.create({ type: FailureType.SafetyHalt, message: `stopped at the blast-radius gate: ${decision.reason ?? 'rejected'}`, nonRetryable: true });
    }
    blastRadiusApproved = true;
  }

  async function pipeline(): Promise<MutableOutcome> {
    setStatus('running');
    const prepared = await git.prepareWorktree({ intent });
    state.worktreePath = prepared.worktreePath;
    head = prepared.head;

    const triage = await runStage('triage');
    await runStage('lld');
    await runStage('spec');

    let feedback: string | undefined;
    for (let attempt = 1; ; attempt++) {
      await runStage('impl', feedback);
      const tests = await testsRun.runTests({ intent, attempt });
      if (tests.commit) head = tests.commit;
      state.tests.push({ attempt, passed: tests.passed, summary: tests.summary });
      guard.recordTests({ passed: tests.passedCount ?? 0, failed: tests.failedCount ?? (tests.passed ? 0 : 1), failingTests: tests.failingTests });
      if (tests.logPath) state.artifacts[tests.logPath.split('/').pop()!] = tests.logPath;
      await checkChangeSize(triage.triage?.predicted);
      // Passing tests are not enough: no stubs, and the tests themselves left as they were.
      const gates = await git.checkImplementation({ intent });
      if (!gates.ok) {
        ledger.event('STAGE_FAILED', 'medium', `impl attempt ${attempt}: ${gates.stubCount} stub(s), ${gates.tamperCount} test tampering finding(s)`, {
          stage: 'impl',
          suggestion: 'the next attempt is told what was found',
          metadata: { stubs: gates.stubCount, tampering: gates.tamperCount },
        });
      }
      if (tests.passed && gates.ok) break;
      // The next attempt is dispatched through the stage guard, which halts the intent once the
      // impl cap (MAX_ITERATIONS_EXCEEDED) or the two-strike rule (STAGNATION_DETECTED) says so.
      feedback = [
        tests.instruction,
        `Tests ${tests.summary}. End of their output:\n${tests.tail}`,
        gates.ok ? '' : `The mechanical checks refused this attempt:\n${gates.feedback}`,
      ]
        .filter(Boolean)
        .join('\n\n');
    }

    await runStage('review');

    const decision = await waitForGate('merge', `Merge ${state.branch} into ${intent.baseBranch}?`);
    if (!approved(decision)) {
      setStatus('rejected');
      return { intentId: intent.id, status: 'rejected', spendUsd: state.spendUsd, reason: decision.reason };
    }

    enter('merge');
    const { lineagePath } = await git.archiveLineage({ intent });
    const { mergedCommit } = await git.mergeIntent({ intent });
    state.mergedCommit = mergedCommit;
    state.lineagePath = `${intent.repoPath}/${lineagePath}`;
    state.stage = 'done';
    setStatus('merged');
    return { intentId: intent.id, status: 'merged', mergedCommit, lineagePath: state.lineagePath, spendUsd: state.spendUsd };
  }

  let outcome: MutableOutcome | undefined;
  // The total time limit is a workflow timer: when it fires, the pipeline's scope is cancelled.
  let timeLimitHit = false;
  const pipelineScope = new CancellationScope();
  const timerScope = new CancellationScope();
  timerScope
    .run(() => sleep(parseDuration(limits.totalTimeout)))
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
  } catch (error) {
    if (timeLimitHit) {
      setStatus('failed');
      state.error = `total time limit of ${limits.totalTimeout} reached`;
      ledger.event('STAGE_FAILED', 'high', state.error, { stage: state.stage, suggestion: 'raise limits.totalTimeout, or split the intent' });
      throw ApplicationFailure.create({ type: FailureType.SafetyHalt, message: `TIME_LIMIT_EXCEEDED: ${state.error}`, nonRetryable: true });
    }
    if (isCancellation(error)) {
      setStatus('cancelled');
    } else {
      setStatus('failed');
      const failure = (error instanceof ApplicationFailure ? error : (error as { cause?: unknown }).cause) as ApplicationFailure | undefined;
      state.error = failure?.message ?? (error as Error).message ?? String(error);
      const halt = failure?.type === FailureType.SafetyHalt ? (failure.details?.[0] as HaltDetails | undefined) : undefined;
      if (halt) {
        ledger.event(halt.eventType, 'high', halt.reason, { stage: state.stage, suggestion: halt.suggestion, metadata: { current: halt.current, threshold: halt.threshold } });
      }
      ledger.event('STAGE_FAILED', 'high', state.error, { stage: state.stage, metadata: { attempts: state.attempts, failureType: failure?.type ?? null } });
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
      git.cleanupIntent({ intent, deleteBranch: outcome !== undefined }),
    );
    if (!state.lineagePath && lineageCopy) {
      state.lineagePath = lineageCopy;
      if (outcome) outcome.lineagePath = lineageCopy;
    }
    state.worktreePath = undefined;
    const endings = { merged: 'INTENT_MERGED', rejected: 'INTENT_REJECTED', cancelled: 'INTENT_CANCELLED' } as const;
    const ending = state.status in endings ? endings[state.status as keyof typeof endings] : 'INTENT_FAILED';
    ledger.event(ending, ending === 'INTENT_FAILED' ? 'high' : 'info', state.error ?? outcome?.reason ?? state.status, {
      stage: state.stage,
      costSnapshot: { intentUsd: state.spendUsd },
      metadata: { mergedCommit: state.mergedCommit ?? null, lineagePath: state.lineagePath ?? null },
    });
    await CancellationScope.nonCancellable(() => ledger.flush());
    setCurrentDetails(`**${intent.goal}**\n\nFinished: ${state.status}`);
  }

  /**
   * Waits for a decision on `gate`. Refused signals are written to the ledger as they come; no
   * decision before the gate's timeout escalates (a SafetyEvent) and then rejects.
   */
  async function waitForGate(gate: GateKind, prompt: string): Promise<RecordedDecision> {
    const timeout = limits.gateTimeout;
    const requestedAt = new Date();
    // Set with the pending gate, before any await: a defer may arrive during the ledger write below.
    gateDeadline = requestedAt.getTime() + parseDuration(timeout);
    state.pendingGate = {
      gate,
      requestedAt: requestedAt.toISOString(),
      timeoutAt: new Date(requestedAt.getTime() + parseDuration(timeout)).toISOString(),
      prompt,
    };
    setStatus('waiting', gate);
    setCurrentDetails(
      [
        `**${intent.goal}**`,
        `Waiting at the **${gate}** gate: ${prompt}`,
        `Tests: ${state.tests.at(-1)?.summary ?? 'not run'}. Spend: $${state.spendUsd}. Times out (reject) at ${state.pendingGate.timeoutAt}.`,
        state.humanRequired ? `A person must decide: ${state.humanRequired}.` : '',
        'Approve: send signal `decide` with `{"gate":"' + gate + '","decision":"approve","by":"<your name>"}`',
        'Reject: `{"gate":"' + gate + '","decision":"reject","by":"<your name>","reason":"<why>"}`',
      ]
        .filter(Boolean)
        .join('\n\n'),
    );
    ledger.event('GATE_REQUESTED', 'info', prompt, {
      stage: state.stage,
      costSnapshot: { intentUsd: state.spendUsd },
      metadata: { gate, timeoutAt: state.pendingGate.timeoutAt },
    });
    await ledger.flush();
    // Wake for the decision, the deadline (a defer moves it), or refused signals to record.
    let decided = false;
    while (!decided) {
      const remaining = gateDeadline - Date.now();
      if (remaining <= 0) break;
      decided = (await condition(() => gateDecision !== undefined || ledger.pending, remaining)) && gateDecision !== undefined;
      await ledger.flush();
    }
    let decision: RecordedDecision;
    if (decided) {
      decision = gateDecision!;
    } else {
      decision = { gate, decision: 'reject', by: 'warden', reason: `no decision within ${timeout}`, at: new Date().toISOString(), timedOut: true };
      const escalateTo = intent.gates[gate]?.escalateTo ?? 'the intent owner';
      ledger.event('GATE_ESCALATED', 'high', `no decision at the ${gate} gate in time; escalated to ${escalateTo}; applying its timeout policy: reject`, {
        stage: state.stage,
        metadata: { gate, escalateTo, policy: 'reject' },
        suggestion: 'decide sooner, or start the intent with a longer --gate-timeout',
      });
    }
    ledger.gateDecision({
      gate,
      decision: decision.decision,
      by: decision.by,
      reason: decision.reason,
      conditions: decision.conditions,
      requestedAt: state.pendingGate.requestedAt,
      decidedAt: decision.at,
      timedOut: decision.timedOut,
    });
    ledger.event('GATE_DECIDED', 'info', `${gate} gate: ${decision.decision} by ${decision.by}${decision.reason ? ` (${decision.reason})` : ''}`, {
      stage: state.stage,
      metadata: { gate, decision: decision.decision, by: decision.by, timedOut: decision.timedOut },
    });
    await ledger.flush();
    state.decisions.push(decision);
    if (decision.decision === 'approve-with-conditions') pendingConditions = [...(decision.conditions ?? [])];
    state.pendingGate = undefined;
    gateDecision = undefined;
    setStatus(guard.paused ? 'paused' : 'running');
    return decision;
  }
}
