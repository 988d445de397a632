import { WorkflowFailedError, type Client } from '@temporalio/client';
import { formatUsd } from '../shared/format';
import { stateQuery } from '../shared/messages';
import { WardenStage, WardenStatus } from '../shared/search-attributes';
import type { RecordedDecision } from '../shared/decisions';
import type { IntentOutcome, IntentState } from '../shared/state';
import { failureMessage } from './follow';
import { describeOrExplain, intentHandle } from './intents';
import { hasLiveWorker, noWorkerRunning, withTimeout } from './worker-presence';

/** What `warden status` reports: running or finished, the same shape. */
export interface IntentStatusReport {
  readonly intentId: string;
  readonly workflowStatus: string;
  /** Warden's status (`merged`, `failed`, `waiting`, …), else the workflow's, lower-cased. */
  readonly wardenStatus: string;
  /** The stage it is at, or reached before it ended. */
  readonly stage?: string;
  readonly startTime: Date;
  readonly closeTime?: Date;
  /** What the workflow returned (merged or rejected). */
  readonly outcome?: IntentOutcome;
  /** Why it failed, was halted, terminated or timed out. */
  readonly failure?: string;
  /** The `state` query's answer; missing when no worker could answer it. */
  readonly state?: IntentState;
  /** Why `state` is missing. */
  readonly stateUnavailable?: string;
}

/** Workflow endings the intent's own code never saw. */
const ENDED_FROM_OUTSIDE = new Set(['TERMINATED', 'TIMED_OUT']);

/** A running intent's worker may be busy; a closed one's is asked only to replay. */
const QUERY_TIMEOUT_MS = { running: 10_000, closed: 5_000 };

/**
 * An intent's status. The ending (outcome or failure) comes from the workflow's history, so it
 * needs no worker. The full state (attempts, decisions, lineage) is the `state` query, which a
 * worker answers, for a closed workflow too, by replaying its history.
 */
export async function intentStatus(client: Client, namespace: string, intentId: string): Promise<IntentStatusReport> {
  const handle = intentHandle(client, intentId);
  const description = await describeOrExplain(handle, intentId);
  const running = description.status.name === 'RUNNING';
  let outcome: IntentOutcome | undefined;
  let failure: string | undefined;
  if (!running) {
    try {
      outcome = await handle.result();
    } catch (error) {
      if (!(error instanceof WorkflowFailedError)) throw error;
      failure = failureMessage(error);
    }
  }
  let state: IntentState | undefined;
  let stateUnavailable: string | undefined;
  const workerUp = await hasLiveWorker(client, namespace, undefined, description.taskQueue);
  if (workerUp) {
    state = await withTimeout(handle.query(stateQuery), running ? QUERY_TIMEOUT_MS.running : QUERY_TIMEOUT_MS.closed).catch((error: Error) => {
      stateUnavailable = `the state query did not answer: ${error.message}`;
      return undefined;
    });
  } else if (running) {
    stateUnavailable = noWorkerRunning('this running intent cannot answer its state query (what is shown comes from the server)', description.taskQueue);
  } else {
    stateUnavailable = 'no worker is running to answer the state query (start `warden worker` or `warden dev` for attempts, decisions and the lineage; `warden audit` shows the ledger)';
  }
  const attributes = description.typedSearchAttributes;
  return {
    intentId,
    workflowStatus: description.status.name,
    // Terminated or timed out, the workflow never got to say so itself: its last word would be "running".
    wardenStatus: ENDED_FROM_OUTSIDE.has(description.status.name)
      ? description.status.name.toLowerCase()
      : (state?.status ?? attributes.get(WardenStatus) ?? description.status.name.toLowerCase()),
    stage: state?.stage ?? attributes.get(WardenStage),
    startTime: description.startTime,
    closeTime: description.closeTime,
    ...(outcome ? { outcome } : {}),
    ...(failure ? { failure } : {}),
    ...(state ? { state } : {}),
    ...(stateUnavailable ? { stateUnavailable } : {}),
  };
}

/** The report as text, one fact a line. */
export function renderIntentStatus(report: IntentStatusReport, webUi?: string): string[] {
  const { state, outcome } = report;
  const reached = report.stage && report.stage !== 'done' ? ` (stage ${report.stage})` : '';
  const lines = [`${report.intentId}: ${report.wardenStatus}${reached}`];
  if (report.failure) lines.push(`  why: ${report.failure}`);
  if (outcome?.status === 'rejected') lines.push(`  why: ${outcome.reason ?? 'no reason given'}`);
  if (outcome?.mergedCommit) lines.push(`  merged commit: ${outcome.mergedCommit}`);
  const spend = state?.spendUsd ?? outcome?.spendUsd;
  if (state) lines.push(`  attempts ${JSON.stringify(state.attempts)}, spend ${formatUsd(state.spendUsd)}`);
  else if (spend !== undefined) lines.push(`  spend ${formatUsd(spend)}`);
  if (state?.pendingGate) lines.push(`  waiting at the ${state.pendingGate.gate} gate since ${state.pendingGate.requestedAt} (times out ${state.pendingGate.timeoutAt})`);
  if (state?.cooldown) lines.push(`  cooling down: ${state.cooldown.stage} runs again at ${state.cooldown.until}`);
  if (state?.paused) lines.push(`  paused by ${state.paused.by} at ${state.paused.at}${state.paused.reason ? `: ${state.paused.reason}` : ''}`);
  for (const t of state?.tests ?? []) lines.push(`  tests #${t.attempt}: ${t.summary}`);
  for (const d of state?.decisions ?? []) lines.push(`  decision: ${decisionLine(d)}`);
  for (const r of state?.refusedDecisions ?? []) lines.push(`  refused: ${r.at}${r.gate ? ` ${r.gate} gate` : ''}${r.by ? `, from "${r.by}"` : ''}: ${r.reason}`);
  if ((state?.rejectedSignals ?? 0) > (state?.refusedDecisions?.length ?? 0)) lines.push(`  refused decisions in all: ${state!.rejectedSignals} (warden audit lists each)`);
  if (state?.error && !report.failure) lines.push(`  error: ${state.error}`);
  const lineage = state?.lineagePath ?? outcome?.lineagePath;
  const lineageRef = state?.lineageRef ?? outcome?.lineageRef;
  if (lineage) lines.push(`  lineage: ${lineage}`);
  else if (state?.worktreePath) lines.push(`  worktree: ${state.worktreePath}`);
  if (lineageRef) lines.push(`  lineage ref: ${lineageRef} (in the repository: git show ${lineageRef}:FILE)`);
  if (report.closeTime) lines.push(`  started ${report.startTime.toISOString()}, ended ${report.closeTime.toISOString()}`);
  if (report.stateUnavailable) lines.push(`  note: ${report.stateUnavailable}`);
  if (webUi) lines.push(`  ${webUi}`);
  return lines;
}

function decisionLine(d: RecordedDecision): string {
  const who = d.timedOut ? 'its timeout' : `${d.by}${d.signed ? ' (signed)' : ''}`;
  const conditions = d.conditions?.length ? ` (conditions: ${d.conditions.join('; ')})` : '';
  return `${d.gate} gate: ${d.decision} by ${who} at ${d.at}${d.reason ? ` — ${d.reason}` : ''}${conditions}`;
}
