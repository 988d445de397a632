import { WorkflowFailedError, type Client } from '@temporalio/client';
import type { IntentEnding, IntentRecord, LedgerDecision, LedgerRefusal, RecordedAttempt, RecordedDesignReview, RecordedPullRequest, RecordedTests } from '../ledger/intent-record';
import type { Ledger } from '../ledger/ledger';
import type { RuntimeConfig } from '../runtime/config';
import { connectTemporalIfRunning } from '../runtime/temporal';
import { UserError } from '../shared/errors';
import { formatUsd } from '../shared/format';
import { LADDER_DECIDER_PREFIX } from '../shared/ladder';
import { WardenGate, WardenStage } from '../shared/search-attributes';
import type { CooldownWait, IntentMemo, IntentOutcome, IntentState } from '../shared/state';
import { failureMessage } from './follow';
import { intentHandle, wardenStatusOf } from './intents';
import { openLedger, webUiLink } from './session';

/**
 * `warden status`: an intent's status from the Temporal server's record of its workflow (its
 * status and search attributes, and how it ended, all read without a worker) and from the
 * ledger (spend, attempts, tests, decisions, where its lineage went). No worker is asked: a
 * query needs one, and on a closed workflow it would replay the whole history to answer.
 */
export interface IntentStatusReport {
  readonly intentId: string;
  /** Warden's status (`merged`, `failed`, `waiting`, …): the workflow's word, else how the server or the ledger says it ended. */
  readonly wardenStatus: string;
  /** The workflow's status on the server; missing when the report is the ledger's alone (`note` says why). */
  readonly workflowStatus?: string;
  /** The stage it is at, or reached before it ended. */
  readonly stage?: string;
  readonly startTime?: Date;
  readonly closeTime?: Date;
  /** What the workflow returned (merged or rejected). */
  readonly outcome?: IntentOutcome;
  /** Why it failed, was halted, terminated or timed out. */
  readonly failure?: string;
  /** What its agent calls cost (the ledger's cost rows, exact). */
  readonly spendUsd: string;
  /** Per stage, the attempt it last started. */
  readonly attempts: Readonly<Record<string, number>>;
  /** The gate it waits at, since when. */
  readonly waitingAt?: { readonly gate: string; readonly since?: string };
  /** A cooldown wait holding its next agent call, and a pause holding it (from the workflow's memo). */
  readonly cooldown?: CooldownWait;
  readonly paused?: IntentState['paused'];
  readonly tests: readonly RecordedTests[];
  readonly decisions: readonly LedgerDecision[];
  readonly refusedDecisions: readonly LedgerRefusal[];
  /** What its agent-written code tried that the sandbox stopped or kept to itself. */
  readonly sandboxAttempts: readonly RecordedAttempt[];
  /** Each review of the lld and spec by another model, oldest first. */
  readonly designReviews: readonly RecordedDesignReview[];
  readonly mergedCommit?: string;
  /** Its pull request on the team's forge, where it merges through one. */
  readonly pullRequest?: RecordedPullRequest;
  /** Where its lineage was kept, as the intent recorded it when it ended. */
  readonly lineagePath?: string;
  /** The repository's ref that holds the lineage, when one was written. */
  readonly lineageRef?: string;
  readonly webUi?: string;
  /** Why the server's record is missing. */
  readonly note?: string;
}

/** Sandbox attempts shown one by one; `warden audit` lists them all. */
const SHOWN_ATTEMPTS = 20;

/** Refused decisions shown one by one; `warden audit` lists them all. */
const SHOWN_REFUSALS = 5;

/** `warden status ID`: opens the ledger, and the Temporal server if one runs (the embedded one is not started for this). */
export async function readIntentStatus(config: RuntimeConfig, intentId: string): Promise<IntentStatusReport> {
  const [ledger, temporal] = await Promise.allSettled([openLedger(config, () => undefined), connectTemporalIfRunning(config)]);
  try {
    if (ledger.status === 'rejected') throw ledger.reason;
    if (temporal.status === 'rejected') throw temporal.reason;
    const report = await intentStatus(temporal.value?.client, ledger.value.ledger, intentId, temporal.value ? undefined : 'the embedded Temporal server is not running');
    return temporal.value && report.workflowStatus ? { ...report, webUi: webUiLink(temporal.value, intentId) } : report;
  } finally {
    if (ledger.status === 'fulfilled') await ledger.value.database.close();
    if (temporal.status === 'fulfilled') await temporal.value?.close();
  }
}

/**
 * An intent's status from the server's record (`client`; undefined when no server runs, and
 * `withoutServer` says why) and the ledger's.
 */
export async function intentStatus(client: Client | undefined, ledger: Ledger, intentId: string, withoutServer?: string): Promise<IntentStatusReport> {
  const [server, record] = await Promise.all([client ? serverRecord(client, intentId) : undefined, ledger.queries.intentRecord(intentId)]);
  if (!server && !record.started) throw new UserError(`no intent with id ${intentId}${withoutServer ? ` in the ledger (${withoutServer})` : ''}`);
  const recorded = { spendUsd: record.spendUsd, attempts: record.attempts, tests: record.tests, decisions: record.decisions, refusedDecisions: record.refusedDecisions, sandboxAttempts: record.sandboxAttempts, designReviews: record.designReviews, ...(record.pullRequest ? { pullRequest: record.pullRequest } : {}) };
  if (!server) {
    const ending = record.ending;
    return {
      intentId,
      wardenStatus: ending ? endedAs(ending) : 'not ended',
      ...stageOf(ending?.stage ?? record.stage),
      ...(record.started ? { startTime: record.started.at } : {}),
      ...(ending ? { closeTime: ending.at, ...endingFacts(ending) } : waitingAt(record)),
      ...recorded,
      note: `${withoutServer ?? 'the Temporal server has no workflow for it (past its retention?)'}: this is the ledger's record`,
    };
  }
  const { description, outcome, failure } = server;
  const running = description.status.name === 'RUNNING';
  const attributes = description.typedSearchAttributes;
  // A resumed intent runs again: the ledger's ending is of its run before.
  const ending = running ? undefined : record.ending;
  const gate = attributes.get(WardenGate);
  const memo: IntentMemo = description.memo ?? {};
  return {
    intentId,
    workflowStatus: description.status.name,
    wardenStatus: wardenStatusOf(description),
    ...stageOf(ending?.stage ?? attributes.get(WardenStage) ?? record.stage),
    startTime: description.startTime,
    ...(description.closeTime ? { closeTime: description.closeTime } : {}),
    // What the ledger recorded of the ending; the server's own word on it, where it has one, after.
    ...(ending ? endingFacts(ending) : {}),
    ...(outcome ? { outcome } : {}),
    ...(failure ? { failure } : {}),
    ...(outcome?.mergedCommit ? { mergedCommit: outcome.mergedCommit } : {}),
    ...(outcome?.lineagePath ? { lineagePath: outcome.lineagePath } : {}),
    ...(outcome?.lineageRef ? { lineageRef: outcome.lineageRef } : {}),
    ...(running && gate ? { waitingAt: { gate, ...(record.openGate?.gate === gate ? { since: record.openGate.requestedAt } : {}) } } : {}),
    ...(running && memo.cooldown ? { cooldown: memo.cooldown } : {}),
    ...(running && memo.paused ? { paused: memo.paused } : {}),
    ...recorded,
  };
}

/** The workflow's description, and for a closed one how it ended: both from the server, no worker needed. Undefined when it has none. */
async function serverRecord(client: Client, intentId: string) {
  const handle = intentHandle(client, intentId);
  let description;
  try {
    description = await handle.describe();
  } catch (error) {
    if ((error as Error).name === 'WorkflowNotFoundError') return undefined;
    throw error;
  }
  if (description.status.name === 'RUNNING') return { description };
  try {
    return { description, outcome: await handle.result() };
  } catch (error) {
    if (!(error instanceof WorkflowFailedError)) throw error;
    return { description, failure: failureMessage(error) };
  }
}

function stageOf(stage: string | undefined): { stage?: string } {
  return stage ? { stage } : {};
}

/** Warden's status for an ending the ledger recorded. */
function endedAs(ending: IntentEnding): string {
  if (ending.type === 'INTENT_SWEPT') return (ending.workflowStatus ?? 'terminated').toLowerCase();
  return ending.type.slice('INTENT_'.length).toLowerCase();
}

/** What an ending recorded: its commit, its lineage, and a failure's error. */
function endingFacts(ending: IntentEnding): Partial<IntentStatusReport> {
  return {
    ...(ending.mergedCommit ? { mergedCommit: ending.mergedCommit } : {}),
    ...(ending.lineagePath ? { lineagePath: ending.lineagePath } : {}),
    ...(ending.lineageRef ? { lineageRef: ending.lineageRef } : {}),
    ...(ending.type === 'INTENT_FAILED' ? { failure: ending.reason } : {}),
  };
}

function waitingAt(record: IntentRecord): Partial<IntentStatusReport> {
  return record.openGate ? { waitingAt: { gate: record.openGate.gate, since: record.openGate.requestedAt } } : {};
}

/** The report as text, one fact a line. */
export function renderIntentStatus(report: IntentStatusReport): string[] {
  const { outcome } = report;
  const reached = report.stage && report.stage !== 'done' ? ` (stage ${report.stage})` : '';
  const lines = [`${report.intentId}: ${report.wardenStatus}${reached}`];
  if (report.failure) lines.push(`  why: ${report.failure}`);
  if (outcome?.status === 'rejected') lines.push(`  why: ${outcome.reason ?? 'no reason given'}`);
  if (report.mergedCommit) lines.push(`  merged commit: ${report.mergedCommit}`);
  if (report.pullRequest) lines.push(`  pull request (${report.pullRequest.state}): ${report.pullRequest.url} — ${report.pullRequest.last}`);
  const attempts = Object.keys(report.attempts).length > 0 ? `attempts ${JSON.stringify(report.attempts)}, ` : '';
  lines.push(`  ${attempts}spend ${formatUsd(report.spendUsd)}`);
  if (report.waitingAt) lines.push(`  waiting at the ${report.waitingAt.gate} gate${report.waitingAt.since ? ` since ${report.waitingAt.since}` : ''}`);
  if (report.cooldown) lines.push(`  cooling down: ${report.cooldown.stage} runs again at ${report.cooldown.until}`);
  if (report.paused) lines.push(`  paused by ${report.paused.by} at ${report.paused.at}${report.paused.reason ? `: ${report.paused.reason}` : ''}`);
  for (const r of report.designReviews) lines.push(`  design review: ${r.summary}`);
  for (const t of report.tests) lines.push(`  tests: ${t.summary}`);
  for (const a of report.sandboxAttempts.slice(0, SHOWN_ATTEMPTS)) lines.push(`  tried: ${a.at}${a.stage ? ` [${a.stage}]` : ''} ${a.reason}`);
  if (report.sandboxAttempts.length > SHOWN_ATTEMPTS) lines.push(`  tried in all: ${report.sandboxAttempts.length} (warden audit lists each)`);
  if (report.sandboxAttempts.length > 0) lines.push("  the sandbox's evidence makes the merge gate a person's and lowers the agent's ladder level");
  for (const d of report.decisions) lines.push(`  decision: ${decisionLine(d)}`);
  for (const r of report.refusedDecisions.slice(-SHOWN_REFUSALS)) lines.push(`  refused: ${r.at}${r.gate ? ` ${r.gate} gate` : ''}${r.by ? `, from "${r.by}"` : ''}: ${r.reason}`);
  if (report.refusedDecisions.length > SHOWN_REFUSALS) lines.push(`  refused decisions in all: ${report.refusedDecisions.length} (warden audit lists each)`);
  if (report.lineagePath) lines.push(`  lineage: ${report.lineagePath}`);
  if (report.lineageRef) lines.push(`  lineage ref: ${report.lineageRef} (in the repository: git show ${report.lineageRef}:FILE)`);
  if (report.startTime && report.closeTime) lines.push(`  started ${report.startTime.toISOString()}, ended ${report.closeTime.toISOString()}`);
  if (report.note) lines.push(`  note: ${report.note}`);
  if (report.webUi) lines.push(`  ${report.webUi}`);
  return lines;
}

function decisionLine(d: LedgerDecision): string {
  const who = d.timedOut ? 'its timeout' : `${d.by}${signedWord(d)}`;
  const conditions = d.conditions?.length ? ` (conditions: ${d.conditions.join('; ')})` : '';
  return `${d.gate} gate: ${d.decision} by ${who} at ${d.at}${d.reason ? ` — ${d.reason}` : ''}${conditions}`;
}

/** Whether a person's decision was signed; nothing for the automation ladder's or one the ledger does not know of. */
function signedWord(d: LedgerDecision): string {
  if (d.signed === undefined || d.by.startsWith(LADDER_DECIDER_PREFIX)) return '';
  return d.signed ? ' (signed)' : ' (unsigned)';
}
