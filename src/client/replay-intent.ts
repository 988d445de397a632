/**
 * `warden replay ID`: runs a recorded intent again as a new intent of the same workflow, on a
 * scratch clone of its repository at the recorded base commit, every model call answered from
 * the recording by the worker's gateway (replay-book.ts). The user's repository is only read:
 * the replay's worktree, branch and merge are the scratch clone's, and the clone is removed after.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { defaultPayloadConverter } from '@temporalio/common';
import { WorkflowFailedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import type pg from 'pg';
import { ExchangeStore } from '../ledger/exchange-store';
import { readIntentRecord, type LedgerDecision } from '../ledger/intent-record';
import { UserError } from '../shared/errors';
import { REPLAY_ID_PREFIX, workflowIdForIntent } from '../shared/ids';
import type { IntentInput } from '../shared/intent';
import { stateQuery } from '../shared/messages';
import type { IntentState } from '../shared/state';
import type { temporal } from '@temporalio/proto';
import { failureMessage } from './follow';
import { branchReplayStart, replayFromStage, replayStartOf } from './replay-start';
import { intentHandle, sendDecision, startIntent } from './intents';

const run = promisify(execFile);

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

/** Who a replay's gate decisions are sent as, when the original gives none to take. */
export const REPLAY_DECIDER = 'warden-replay';

/** A gate as the replay met it: the original's decision taken again, or one the original never opened. */
export interface ReplayedGate {
  readonly gate: string;
  /** The stage the intent was at when the gate opened. */
  readonly stage: string;
  readonly decision: string;
  /** True when the original did not open this gate (this many times): the replay passed it to go on. */
  readonly wouldOpen: boolean;
}

/** How a replay ended. */
export interface ReplayRun {
  readonly intentId: string;
  readonly status: 'merged' | 'rejected' | 'failed' | 'cancelled' | string;
  /** Why it failed (a divergence says "diverged at …"). */
  readonly error?: string;
  readonly gates: readonly ReplayedGate[];
  /** The stage the replay started from (`--from`), when not the whole intent. */
  readonly from?: string;
}

export interface ReplayTarget {
  readonly client: Client;
  /** The ledger's database: the recording and the original's decisions are read there. */
  readonly pool: pg.Pool;
  /** The task queue a worker whose gateway reads recordings serves. */
  readonly taskQueue?: string;
  /** How often the running replay is looked at for an open gate; default 300 ms. */
  readonly pollMs?: number;
}

export interface ReplayOptions {
  /** `--from STAGE`: the stages before it are the original's (see replay-start.ts); none or triage, the whole intent. */
  readonly from?: string;
}

/** Runs intent `originalId` again (see the module comment); returns how the replay ended. */
export async function replayIntent(target: ReplayTarget, originalId: string, options: ReplayOptions = {}): Promise<ReplayRun> {
  const fromStage = replayFromStage(options.from);
  const baseCommit = await recordedBaseOf(target.pool, originalId);
  const events = await historyOf(target.client, originalId);
  const original = startInputOf(originalId, events);
  const start = fromStage ? replayStartOf(originalId, events, fromStage) : undefined;
  const intentId = await freeReplayId(target.client, originalId);
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'warden-replay-'));
  try {
    const repoPath = path.join(scratch, 'repo');
    await scratchClone(original.repoPath, repoPath, original.baseBranch ?? 'main', baseCommit);
    if (start) await branchReplayStart(repoPath, start, originalId, intentId);
    const replayOf = { intentId: originalId, repoPath: original.repoPath, ...(start ? { from: { stage: start.stage, triage: start.triage } } : {}) };
    const input: IntentInput = { ...withoutConfigRules(original), id: intentId, repoPath, replayOf };
    await startIntent(target.client, input, target.taskQueue);
    const decisions = (await readIntentRecord(target.pool, originalId)).decisions;
    return { ...(await answerUntilEnded(target, intentId, decisions)), ...(start ? { from: start.stage } : {}) };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/**
 * Fields of a start the worker completes from its config (config/intent-completion.ts), left out
 * so the replay's worker fills them from the config it runs with: a replay judges the intent by
 * that config's rules, not by those written into its start. What the start chose for itself (goal,
 * repository, branch, paths, agents, test command, confinement) stays.
 */
const CONFIG_RULES = ['limits', 'gates', 'approvals', 'reviewPolicy', 'secrets', 'customGates', 'notify', 'merge', 'lineage', 'placement', 'judge'] as const;

function withoutConfigRules<T extends object>(start: T): T {
  const kept = { ...start } as Record<string, unknown>;
  for (const field of CONFIG_RULES) delete kept[field];
  return kept as unknown as T;
}

/** The commit the intent's recording started from; a UserError when nothing replayable was recorded. */
export async function recordedBaseOf(pool: pg.Pool, intentId: string): Promise<string> {
  const baseCommit = (await new ExchangeStore(pool).recordingOf(intentId)).context?.baseCommit;
  if (!baseCommit) throw new UserError(`intent ${intentId} has no recording to replay (recording off, past its retention, or no agent attempt ran)`, 1);
  return baseCommit;
}

const NO_HISTORY = (intentId: string): UserError => new UserError(`intent ${intentId} has no workflow history left on this Temporal server to take its start from`, 1);

/** The original intent's workflow history. */
async function historyOf(client: Client, intentId: string): Promise<HistoryEvent[]> {
  try {
    return (await client.workflow.getHandle(workflowIdForIntent(intentId)).fetchHistory()).events ?? [];
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) throw NO_HISTORY(intentId);
    throw error;
  }
}

/** The input the original intent's workflow was started with, from its history. */
function startInputOf(intentId: string, events: readonly HistoryEvent[]): IntentInput & { readonly baseBranch?: string } {
  const payload = events[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
  if (!payload) throw NO_HISTORY(intentId);
  return defaultPayloadConverter.fromPayload<IntentInput>(payload);
}

/** `replay-N-ID` with the first N not yet used (cut to the 64 characters an id may have). */
async function freeReplayId(client: Client, originalId: string): Promise<string> {
  for (let n = 1; ; n++) {
    const id = `${REPLAY_ID_PREFIX}${n}-${originalId}`.slice(0, 64).replace(/[.-]+$/, '');
    try {
      await client.workflow.getHandle(workflowIdForIntent(id)).describe();
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return id;
      throw error;
    }
  }
}

/**
 * A clone of the repository with `baseBranch` at the recorded commit: the replay works, commits
 * and merges there. Objects are hard-linked where the file system allows (they never change);
 * nothing is written to the user's repository.
 */
async function scratchClone(repoPath: string, into: string, baseBranch: string, baseCommit: string): Promise<void> {
  await run('git', ['clone', '--quiet', '--no-checkout', repoPath, into]);
  await run('git', ['-C', into, 'checkout', '--quiet', '-B', baseBranch, baseCommit]);
  // The clone commits as the repository did: its own identity is not cloned (agents see it, too).
  for (const key of ['user.name', 'user.email']) {
    const value = await run('git', ['-C', repoPath, 'config', '--local', key]).then(({ stdout }) => stdout.trim(), () => '');
    if (value) await run('git', ['-C', into, 'config', key, value]);
  }
}

/**
 * Follows the replay to its end. Each gate it opens takes the original's decision at that gate
 * (the k-th opening the k-th decision); a gate the original did not open so often is approved,
 * reported as one that would open now, so the replay goes on to show what comes after it.
 */
async function answerUntilEnded(target: ReplayTarget, intentId: string, decisions: readonly LedgerDecision[]): Promise<ReplayRun> {
  const handle = intentHandle(target.client, intentId);
  const gates: ReplayedGate[] = [];
  const opened = new Map<string, number>();
  let answered = '';
  for (;;) {
    const { status } = await handle.describe();
    if (status.name !== 'RUNNING') break;
    const state: IntentState | undefined = await handle.query(stateQuery).catch(() => undefined);
    const pending = state?.pendingGate;
    const key = pending ? `${pending.gate}@${pending.requestedAt}` : '';
    if (pending && key !== answered) {
      answered = key;
      const times = (opened.get(pending.gate) ?? 0) + 1;
      opened.set(pending.gate, times);
      const then = decisions.filter((d) => d.gate === pending.gate)[times - 1];
      const decision = then && ['approve', 'reject', 'request-changes'].includes(then.decision) ? (then.decision as 'approve' | 'reject' | 'request-changes') : 'approve';
      await sendDecision(target.client, intentId, {
        gate: pending.gate,
        decision,
        by: REPLAY_DECIDER,
        ...(decision === 'approve' ? {} : { reason: then?.reason ?? `the original's decision at the ${pending.gate} gate` }),
      });
      gates.push({ gate: pending.gate, stage: state!.stage, decision, wouldOpen: !then });
    }
    await new Promise((resolve) => setTimeout(resolve, target.pollMs ?? 300));
  }
  try {
    const outcome = await handle.result();
    return { intentId, status: outcome.status, gates };
  } catch (error) {
    if (!(error instanceof WorkflowFailedError)) throw error;
    const message = failureMessage(error);
    return { intentId, status: message === 'cancelled' ? 'cancelled' : 'failed', error: message, gates };
  }
}
