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
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { WardenActivities } from '../activities';
import { DecisionSchema, type GateKind, type RecordedDecision } from '../shared/decisions';
import { parseDuration } from '../shared/duration';
import { FailureType, NON_RETRYABLE_FAILURES } from '../shared/errors';
import { branchForIntent } from '../shared/ids';
import { IntentSchema, describeIssues, type Intent } from '../shared/intent';
import { decideSignal, stateQuery } from '../shared/messages';
import { WardenGate, WardenStage, WardenStatus } from '../shared/search-attributes';
import type { Stage } from '../shared/stages';
import type { IntentOutcome, IntentState, IntentStatus } from '../shared/state';
import { LedgerRecorder, usd } from './ledger-recorder';

/**
 * One intent, end to end: triage → lld → spec → impl (edit ⇄ test) → review → merge gate → merge.
 *
 * - Input is re-validated here (the client validated it too): a bad intent fails at once.
 * - Signal `decide` ({gate, decision, by, reason}) decides the pending gate; invalid payloads are
 *   logged, counted and ignored. The merge gate waits `limits.gateTimeout`, then rejects.
 * - Query `state` returns stage, attempts, spend, pending gate, decisions and artifact paths.
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
  const state: IntentState = {
    intentId: intent.id,
    goal: intent.goal,
    status: 'running',
    stage: 'triage',
    attempts: {},
    spendUsd: 0,
    decisions: [],
    artifacts: {},
    branch: branchForIntent(intent.id),
    tests: [],
    rejectedSignals: 0,
  };
  let gateDecision: RecordedDecision | undefined;
  const refuse = (reason: string, payload: unknown): void => {
    state.rejectedSignals += 1;
    log.warn('ignored a decide signal', { reason });
    ledger.event('DECISION_REFUSED', 'medium', reason, {
      stage: state.stage,
      metadata: { payload: JSON.stringify(payload ?? null).slice(0, 500) },
      suggestion: 'send {"gate":"<pending gate>","decision":"approve"|"reject","by":"<name>","reason":"…"}',
    });
  };

  // The ledger must not lose an event: while PostgreSQL is down, retry (with backoff) until it is back.
  const ledgerActivities = proxyActivities<WardenActivities>({
    startToCloseTimeout: '30s',
    retry: { initialInterval: '1s', maximumInterval: '10s', backoffCoefficient: 2 },
  });
  const ledger = new LedgerRecorder(intent.id, (batch) => ledgerActivities.appendToLedger(batch));
  ledger.event('INTENT_STARTED', 'info', intent.goal, {
    agentId: intent.agent.kind,
    metadata: { repoPath: intent.repoPath, baseBranch: intent.baseBranch, paths: intent.paths },
  });

  setHandler(stateQuery, () => state);
  setHandler(decideSignal, (raw: unknown) => {
    const decision = DecisionSchema.safeParse(raw);
    if (!decision.success) {
      refuse(`invalid decide payload: ${describeIssues(decision.error)}`, raw);
      return;
    }
    if (state.pendingGate?.gate !== decision.data.gate || gateDecision) {
      refuse(`decision for the ${decision.data.gate} gate, which is not pending`, raw);
      return;
    }
    gateDecision = { ...decision.data, at: new Date().toISOString(), timedOut: false };
  });

  // Git bookkeeping is idempotent, so it may retry freely.
  const git = proxyActivities<WardenActivities>({
    startToCloseTimeout: '2m',
    retry: { maximumAttempts: 5, initialInterval: '1s', nonRetryableErrorTypes: [...NON_RETRYABLE_FAILURES] },
  });
  // Agents and tests heartbeat; waiting for cancellation to complete means a stopped intent's
  // process is dead before its worktree is removed.
  const work = proxyActivities<WardenActivities>({
    startToCloseTimeout: parseDuration(intent.limits.stageTimeout),
    heartbeatTimeout: '10s',
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry: { maximumAttempts: 3, initialInterval: '2s', nonRetryableErrorTypes: [...NON_RETRYABLE_FAILURES] },
  });
  const testsRun = proxyActivities<WardenActivities>({
    startToCloseTimeout: parseDuration(intent.limits.testTimeout) + 60_000,
    heartbeatTimeout: '10s',
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry: { maximumAttempts: 2, nonRetryableErrorTypes: [...NON_RETRYABLE_FAILURES] },
  });

  const enter = (stage: Stage): void => {
    state.stage = stage;
    state.attempts[stage] = (state.attempts[stage] ?? 0) + 1;
    upsertSearchAttributes([{ key: WardenStage, value: stage }]);
    setCurrentDetails(`**${intent.goal}**\n\nStage: \`${stage}\` (attempt ${state.attempts[stage]}), spend $${state.spendUsd.toFixed(2)}`);
  };
  const setStatus = (status: IntentStatus, gate: GateKind | null = null): void => {
    state.status = status;
    upsertSearchAttributes([
      { key: WardenStatus, value: status },
      { key: WardenGate, value: gate },
    ]);
  };
  const runStage = async (stage: Exclude<Stage, 'merge'>, feedback?: string) => {
    enter(stage);
    const attempt = state.attempts[stage]!;
    const result = await work.runAgentStage({ intent, stage, attempt, feedback });
    state.spendUsd += result.costUsd;
    state.artifacts[result.artifactPath.split('/').pop()!] = result.artifactPath;
    const modelId = result.model ?? intent.agent.kind;
    ledger.cost({ stage, attempt, agentId: intent.agent.kind, modelId, inputTokens: result.inputTokens, outputTokens: result.outputTokens, usd: usd(result.costUsd) });
    ledger.event('STAGE_COMPLETED', 'info', result.summary || `${stage} attempt ${attempt} done`, {
      stage,
      agentId: intent.agent.kind,
      modelId,
      costSnapshot: { intentUsd: usd(state.spendUsd) },
      metadata: { attempt, artifactPath: result.artifactPath, commit: result.commit ?? null },
    });
    await ledger.flush();
    return result;
  };

  // Mutable so the cleanup in `finally` can add where the lineage was kept.
  let outcome: { -readonly [K in keyof IntentOutcome]: IntentOutcome[K] } | undefined;
  try {
    setStatus('running');
    const { worktreePath } = await git.prepareWorktree({ intent });
    state.worktreePath = worktreePath;

    await runStage('triage');
    await runStage('lld');
    await runStage('spec');

    let feedback: string | undefined;
    for (let attempt = 1; ; attempt++) {
      await runStage('impl', feedback);
      const tests = await testsRun.runTests({ intent, attempt });
      state.tests.push({ attempt, passed: tests.passed, summary: tests.summary });
      if (tests.logPath) state.artifacts[tests.logPath.split('/').pop()!] = tests.logPath;
      if (tests.passed) break;
      if (attempt >= intent.limits.implAttempts) {
        throw ApplicationFailure.create({
          type: FailureType.ImplAttemptsExhausted,
          message: `tests still fail after ${attempt} impl attempts: ${tests.summary}`,
          nonRetryable: true,
        });
      }
      feedback = `Tests ${tests.summary}. End of their output:\n${tests.tail}`;
    }

    await runStage('review');

    const decision = await waitForGate('merge', intent.limits.gateTimeout);
    if (decision.decision !== 'approve') {
      setStatus('rejected');
      outcome = { intentId: intent.id, status: 'rejected', spendUsd: state.spendUsd, reason: decision.reason };
      return outcome;
    }

    enter('merge');
    const { lineagePath } = await git.archiveLineage({ intent });
    const { mergedCommit } = await git.mergeIntent({ intent });
    state.mergedCommit = mergedCommit;
    state.lineagePath = `${intent.repoPath}/${lineagePath}`;
    state.stage = 'done';
    setStatus('merged');
    outcome = { intentId: intent.id, status: 'merged', mergedCommit, lineagePath: state.lineagePath, spendUsd: state.spendUsd };
    return outcome;
  } catch (error) {
    if (isCancellation(error)) {
      setStatus('cancelled');
    } else {
      setStatus('failed');
      state.error = error instanceof Error ? (error.cause as Error | undefined)?.message ?? error.message : String(error);
      ledger.event('STAGE_FAILED', 'high', state.error, { stage: state.stage, metadata: { attempts: state.attempts } });
    }
    throw error;
  } finally {
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
      costSnapshot: { intentUsd: usd(state.spendUsd) },
      metadata: { mergedCommit: state.mergedCommit ?? null, lineagePath: state.lineagePath ?? null },
    });
    await CancellationScope.nonCancellable(() => ledger.flush());
    setCurrentDetails(`**${intent.goal}**\n\nFinished: ${state.status}`);
  }

  /** Waits for a decision on `gate`; no decision within `timeout` rejects (the default policy). */
  async function waitForGate(gate: GateKind, timeout: string): Promise<RecordedDecision> {
    const requestedAt = new Date();
    state.pendingGate = {
      gate,
      requestedAt: requestedAt.toISOString(),
      timeoutAt: new Date(requestedAt.getTime() + parseDuration(timeout)).toISOString(),
      prompt: `Merge ${state.branch} into ${intent.baseBranch}?`,
    };
    setStatus('waiting', gate);
    setCurrentDetails(
      [
        `**${intent.goal}**`,
        `Waiting at the **${gate}** gate: merge \`${state.branch}\` into \`${intent.baseBranch}\`?`,
        `Tests: ${state.tests.at(-1)?.summary ?? 'not run'}. Spend: $${state.spendUsd.toFixed(2)}. Times out (reject) at ${state.pendingGate.timeoutAt}.`,
        'Approve: send signal `decide` with `{"gate":"' + gate + '","decision":"approve","by":"<your name>"}`',
        'Reject: `{"gate":"' + gate + '","decision":"reject","by":"<your name>","reason":"<why>"}`',
      ].join('\n\n'),
    );
    ledger.event('GATE_REQUESTED', 'info', state.pendingGate.prompt, {
      stage: state.stage,
      costSnapshot: { intentUsd: usd(state.spendUsd) },
      metadata: { gate, timeoutAt: state.pendingGate.timeoutAt },
    });
    await ledger.flush();
    // Wake for the decision, the deadline, or refused signals to write to the ledger.
    const deadline = requestedAt.getTime() + parseDuration(timeout);
    let decided = false;
    while (!decided) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) break;
      decided = (await condition(() => gateDecision !== undefined || ledger.pending, remaining)) && gateDecision !== undefined;
      await ledger.flush();
    }
    let decision: RecordedDecision;
    if (decided) {
      decision = gateDecision!;
    } else {
      decision = { gate, decision: 'reject', by: 'warden', reason: `no decision within ${timeout}`, at: new Date().toISOString(), timedOut: true };
      ledger.event('GATE_ESCALATED', 'high', `no decision at the ${gate} gate within ${timeout}; applying its timeout policy: reject`, {
        stage: state.stage,
        metadata: { gate, escalateTo: 'the intent owner', policy: 'reject' },
        suggestion: `decide sooner, or start the intent with a longer --gate-timeout`,
      });
    }
    ledger.gateDecision({
      gate,
      decision: decision.decision,
      by: decision.by,
      reason: decision.reason,
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
    state.pendingGate = undefined;
    gateDecision = undefined;
    setStatus('running');
    return decision;
  }
}
