import { MERGE_CHECK_GATES } from '../shared/merge-conditions';
import { setHandler } from '@temporalio/workflow';
import type { ChangeSize } from '../safety/limits';
import { agentIdOf, networkOf } from '../shared/agent-routing';
import type { DesignReviewSummary, ReviewAssessment, TriageAssessment } from '../shared/assessments';
import type { ReviewPackage } from '../shared/review-package';
import type { Intent } from '../shared/intent';
import type { LadderLevel } from '../shared/ladder';
import { stateQuery } from '../shared/messages';
import type { IntentState } from '../shared/state';
import { autoPassRefusals } from './auto-pass';
import { GateKeeper } from './gate-keeper';
import { intentActivities, type IntentActivities } from './intent-activities';
import { HOST_KINDS, HostRouting, type HostKind } from './host-routing';
import { hostOfQueue, workBranchFor } from '../shared/ids';
import { setStatus, showInMemo, startingState } from './intent-status';
import { LedgerRecorder } from './ledger-recorder';
import { dueRowsFirst } from './due-rows';
import { StageGuard, installStageGuard } from './stage-guard';
import { WorkClock } from './time-limits';

/**
 * One run of one intent: what every part of the pipeline reads and updates. The workflow makes
 * it once, after the input check; making it writes INTENT_STARTED, answers the `state` query
 * from then on and opens the gates to decisions. It is handed to the stage runner, the limits,
 * the gates and the ending. Everything in it is workflow state, so it replays as it ran.
 */
export class IntentRun {
  readonly state: IntentState;
  /** Its activities: those that work in the worktree go to the host that holds it (see `hosts`). */
  readonly activities: IntentActivities;
  /** Which host's task queue the worktree activities go to, and the move when that host is gone. */
  readonly hosts: HostRouting;
  /** Ledger rows of this run, written in batches by `flush()`. */
  readonly ledger: LedgerRecorder;
  /** The limits checked before every agent dispatch, and the pause that holds stage activities. */
  readonly guard: StageGuard;
  /** Working time: it stops while a person is asked (a gate) or holds the intent (pause). */
  readonly clock: WorkClock;
  /** The intent's human gates: decisions, the automation ladder, timeouts. */
  readonly gates: GateKeeper;

  /** The automation ladder's level for this agent, read once when the pipeline starts. */
  ladderLevel: LadderLevel = 0;
  triage?: TriageAssessment;
  review?: ReviewAssessment;
  /** The design reviewer's last answer on each document, for its gate. */
  readonly designReviews: Partial<Record<'lld' | 'spec', DesignReviewSummary>> = {};
  /** A stage tried to widen the task: the ladder passes no gate on its own after that. */
  cascadeHigh = false;
  /** An agent of the intent has the worker's whole network (`network: 'host'`): the merge gate is a person's. */
  readonly hostNetwork: boolean;
  /** Agent-written code may run unconfined (`intent.confinement`): the merge gate is a person's. */
  readonly unconfinedCode: boolean;
  /** What agent-written code was seen trying in its sandbox (sandbox-evidence.ts): any makes the merge gate a person's. */
  attemptCount = 0;
  /** The first of them, in words, for the merge gate. */
  readonly attemptsSeen: string[] = [];
  /** The intent branch's head as this run knows it: where the next stage starts (and a resume from it). */
  head?: string;
  /** Conditions set at the gates before merge: checked (checkMergeConditions) before every merge attempt. */
  readonly mergeConditions: string[] = [];
  /** Conditions of the last approve-with-conditions, for the next stage's prompt. */
  pendingConditions?: string[];
  /** The merge goes through a pull request on the team's forge (`merge.via: pull-request`). */
  get viaPullRequest(): boolean {
    return this.intent.merge?.via === 'pull-request';
  }
  /** The largest change a person let through at the blast-radius gate. */
  approvedSize?: ChangeSize;
  /** The spec's planned tests as the last check after impl found them, for the review package. */
  testPlan?: ReviewPackage['testPlan'];

  constructor(readonly intent: Intent) {
    this.state = startingState(intent.id, intent.goal);
    const shared = intentActivities(intent.limits);
    this.hosts = new HostRouting(
      (kind, taskQueue) => (taskQueue ? intentActivities(intent.limits, { taskQueue, ...(intent.placement ? { moveAfter: intent.placement.moveAfter } : {}) }) : shared)[kind],
      (kind, lostQueue) => this.moveFrom(kind, lostQueue),
    );
    this.activities = dueRowsFirst({ ...shared, ...Object.fromEntries(HOST_KINDS.map((kind) => [kind, this.hosts.route(kind)])) } as IntentActivities, () => this.ledger);
    this.hostNetwork = [intent.agent, ...Object.values(intent.stageAgents)].some((a) => a.kind === 'command' && networkOf(a) === 'host');
    this.unconfinedCode = intent.confinement.allowUnconfinedCode || intent.confinement.testNetwork === 'host';
    this.ledger = new LedgerRecorder(intent.id, {
      local: (batch) => this.activities.ledger.appendToLedger(batch),
      'task-queue': (batch) => this.activities.ledgerQueued.appendToLedger(batch),
    });
    this.guard = new StageGuard(intent.limits, {
      onCooldown: (wait) => {
        this.state.cooldown = wait;
        showInMemo({ cooldown: wait ?? null });
      },
    });
    installStageGuard(this.guard);
    this.clock = new WorkClock(() => this.state.pendingGate !== undefined || this.guard.paused);
    this.ledger.event('INTENT_STARTED', 'info', intent.goal, {
      agentId: agentIdOf(intent.agent),
      // The notification dispatcher reads the intent's channels here (names of secrets only, never secrets).
      metadata: { repoPath: intent.repoPath, baseBranch: intent.baseBranch, paths: intent.paths, ...(intent.notify.length > 0 ? { notify: intent.notify } : {}) },
    });
    if (this.unconfinedCode) {
      const what = [
        ...(intent.confinement.allowUnconfinedCode ? ['agent-written code may run outside bubblewrap (allowUnconfinedCode)'] : []),
        ...(intent.confinement.testNetwork === 'host' ? ["the repo's tests run with the worker's whole network (testNetwork: host)"] : []),
      ];
      this.ledger.event('UNCONFINED_CODE_ALLOWED', 'high', `${what.join('; ')}: the merge gate needs a person, and only signed decisions count`, {
        metadata: { ...intent.confinement },
        suggestion: 'run the worker where bubblewrap works and leave confinement at its defaults',
      });
    }
    setHandler(stateQuery, () => this.state);
    this.gates = new GateKeeper({
      intent,
      state: this.state,
      ledger: this.ledger,
      // Every agent of the intent, by kind and by name: none of them decides a gate.
      agentNames: [intent.agent, ...Object.values(intent.stageAgents)].flatMap((a) => [a.kind, agentIdOf(a)]),
      // Code that can reach the network (or everything) could reach the frontend and sign as no one: only proofs count.
      signedOnly: this.unconfinedCode || this.hostNetwork,
      autoPass: (gate) => ({ level: this.ladderLevel, risk: this.triage?.risk ?? 'MEDIUM', refusals: autoPassRefusals(gate, this) }),
      openGate: async (request) => {
        const { triage, review, state, ladderLevel } = this;
        if (state.attempts.impl === undefined || !triage) {
          await this.activities.ledgerQueued.appendToLedger(request);
          return undefined;
        }
        const attempts = this.attemptCount > 0 ? { attempts: { listed: [...this.attemptsSeen], total: this.attemptCount } } : {};
        const testPlan = this.testPlan ? { testPlan: this.testPlan } : {};
        return this.activities.git.buildReviewPackage({ intent, facts: { triage, review, tests: state.tests, spendUsd: state.spendUsd, ladderLevel, ...attempts, ...testPlan }, ledgerBatch: request });
      },
      onWaiting: (gate) => setStatus(this.state, 'waiting', gate),
      onDecided: (decision) => {
        // Before merge no agent stage follows: those conditions are checked before merging instead.
        if (decision.decision === 'approve-with-conditions' && MERGE_CHECK_GATES.includes(decision.gate)) this.mergeConditions.push(...(decision.conditions ?? []));
        else if (decision.decision === 'approve-with-conditions') this.pendingConditions = [...(decision.conditions ?? [])];
        setStatus(this.state, this.guard.paused ? 'paused' : 'running');
      },
    });
  }

  /** The worktree is made (or taken over): with placement, its activities go to the host that made it from now on. */
  placeOn(prepared: { readonly worktreePath: string; readonly head: string; readonly hostQueue?: string }): void {
    // Only hosts with no shared disk (placement) pin an intent: without it every worker reaches
    // the repository the intent names, and any of them may take its next step.
    this.hosts.placeOn(this.intent.placement ? prepared.hostQueue : undefined);
    this.state.worktreePath = prepared.worktreePath;
    if (prepared.hostQueue && this.intent.placement) this.state.host = hostOfQueue(prepared.hostQueue);
    if (this.intent.placement) this.state.pushedWork = { remoteUrl: this.intent.placement.remoteUrl, branch: workBranchFor(this.intent.id) };
    this.head = prepared.head;
  }

  /**
   * The host that held the worktree took no step within `placement.moveAfter`: another host takes
   * the intent over from the commit its last step pushed (INTENT_MOVED). The final cleanup needs no
   * worktree: it runs wherever the workflow does, and deletes the work branch on the remote.
   */
  private async moveFrom(kind: HostKind, lostQueue: string): Promise<void> {
    const from = hostOfQueue(lostQueue);
    if (kind === 'cleanup') {
      this.hosts.placeOn(undefined);
      this.ledger.event('INTENT_MOVED', 'medium', `host ${from}, which held the worktree, is gone: the cleanup ran elsewhere; its copy stays on that host until its worker sweeps it`, { metadata: { from, step: kind } });
      return;
    }
    const prepared = await this.hosts.anyHost('git').prepareWorktree({ intent: this.intent, ...(this.head ? { resumeAt: this.head } : {}) });
    this.placeOn(prepared);
    const to = prepared.hostQueue ? hostOfQueue(prepared.hostQueue) : 'the shared queue';
    this.ledger.event('INTENT_MOVED', 'medium', `host ${from}, which held the worktree, took no ${kind} step within ${this.intent.placement?.moveAfter ?? 'its time'}: host ${to} took the intent over from ${prepared.head.slice(0, 12)}, its last pushed commit`, {
      stage: this.state.stage === 'done' ? undefined : this.state.stage,
      metadata: { from, to, head: prepared.head, step: kind },
    });
    await this.ledger.flush();
  }
}
