import type { DesignReviewSummary } from './assessments';
import type { RecordedDecision } from './decisions';
import type { GateName } from './gates';
import type { ReviewPackage } from './review-package';
import type { RiskClass } from './risk';
import type { Stage } from './stages';

/** Where an intent stands, as its search attribute and `state` query report it. */
export type IntentStatus = 'running' | 'waiting' | 'paused' | 'merged' | 'rejected' | 'failed' | 'cancelled';
export const INTENT_STATUSES: readonly IntentStatus[] = ['running', 'waiting', 'paused', 'merged', 'rejected', 'failed', 'cancelled'];

export interface PendingGate {
  readonly gate: GateName;
  readonly requestedAt: string;
  readonly timeoutAt: string;
  /** What approving means, for the person asked. */
  readonly prompt: string;
  /** The automation ladder never passes this gate. */
  readonly humanOnly?: boolean;
  /** Why the automation ladder did not pass it. */
  readonly whyNotAutomatic?: string;
  /** Whether `request-changes` may answer: the stage before the gate then runs again with the comments. */
  readonly changes?: boolean;
  /** The document `approve-with-edits` replaces (its path in the worktree), at the lld and spec gates. */
  readonly editable?: string;
  /** The lld and spec gates: what the document passed, after how many attempts, triage's predicted size, and the design reviewer's verdict. */
  readonly document?: { readonly checks: string; readonly attempts: number; readonly predicted?: { readonly files: number; readonly lines: number }; readonly review?: DesignReviewSummary };
  /** Gates after impl carry the review package. */
  readonly package?: ReviewPackage;
}

/** A cooldown wait in progress: the stage's agent is dispatched again at `until` (ISO time). */
export interface CooldownWait {
  readonly stage: string;
  readonly until: string;
}

export interface TestSummary {
  readonly attempt: number;
  readonly passed: boolean;
  readonly summary: string;
}

/** The `state` query's answer: small, so it is cheap to poll. */
export interface IntentState {
  readonly intentId: string;
  readonly goal: string;
  status: IntentStatus;
  stage: Stage | 'done';
  attempts: Partial<Record<Stage, number>>;
  /** Exact decimal USD. */
  spendUsd: string;
  /** Set while a `pause` signal holds the next stage. */
  paused?: { readonly by: string; readonly reason?: string; readonly at: string; readonly timeout?: string };
  /** Set while the stage guard waits out a cooldown before dispatching the stage's agent again. */
  cooldown?: CooldownWait;
  /** Triage's assessment, once triage has run. */
  risk?: { readonly class: RiskClass; readonly confidence: number; readonly structured: boolean };
  /** Review's verdict and how many findings it reported. */
  review?: { readonly verdict: 'APPROVE' | 'BLOCK'; readonly findings: number; readonly criticalSecurity: number };
  /** The agent profile's automation ladder level for this run (read once at the start). */
  ladderLevel?: number;
  /** The change's size after the last impl attempt, and what triage predicted. */
  blastRadius?: { readonly predicted?: { files: number; lines: number }; readonly actual: { files: number; lines: number } };
  pendingGate?: PendingGate;
  decisions: RecordedDecision[];
  /** Artifact name → path inside the worktree (or, once archived, the repo). */
  artifacts: Record<string, string>;
  branch: string;
  worktreePath?: string;
  /** The worker host whose disk holds the worktree (its stages run there). */
  host?: string;
  /** Where its hosts push its commits (config `placement`): a web app on another machine reads the change there. */
  pushedWork?: { readonly remoteUrl: string; readonly branch: string };
  tests: TestSummary[];
  mergedCommit?: string;
  /** The intent's pull request on the team's forge (`merge.via: pull-request`), once opened. */
  pullRequest?: { readonly number: number; readonly url: string; readonly headSha: string };
  /** The folder that holds the lineage once the intent has ended (the repository's done/ folder, or the worker's copy). */
  lineagePath?: string;
  /** The ref of the intent's repository that holds the lineage (`lineage.location: ref`): `git show REF:FILE`. */
  lineageRef?: string;
  error?: string;
  /** Decisions refused (invalid, unsigned where a signature is needed, not an approver, …), signal or update. */
  rejectedSignals: number;
  /** The last few refused decisions, newest last: what `warden status` and the Web UI's details show. */
  refusedDecisions?: RefusedDecision[];
}

/** A decision the workflow refused, as `warden status` shows it. */
export interface RefusedDecision {
  readonly at: string;
  readonly gate?: string;
  /** Who it said it was from (not proof of anything). */
  readonly by?: string;
  readonly reason: string;
}

/**
 * What an intent keeps in its workflow's memo: `warden status` reads it from the server's record
 * of the workflow, with no worker to ask. The goal is set at the start; a cooldown wait and a
 * pause while they hold the intent.
 */
export interface IntentMemo {
  readonly goal?: string;
  readonly cooldown?: CooldownWait;
  readonly paused?: IntentState['paused'];
}

/** What `intentWorkflow` returns. */
export interface IntentOutcome {
  readonly intentId: string;
  readonly status: Extract<IntentStatus, 'merged' | 'rejected'>;
  readonly mergedCommit?: string;
  /** Where it merged through the forge (`merge.via: pull-request`). */
  readonly pullRequestUrl?: string;
  readonly lineagePath?: string;
  /** See IntentState.lineageRef. */
  readonly lineageRef?: string;
  readonly spendUsd: string;
  readonly reason?: string;
}
