import { withTimeout } from './worker-presence';
import { formatUsd } from '../shared/format';
import { createInterface } from 'node:readline/promises';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import type { IntentOutcome, IntentState } from '../shared/state';
import { stateQuery } from '../shared/messages';
import { askAtGate } from './gate-prompt';
import { intentHandle, sendDecision } from './intents';
import { decideCommands } from '../shared/decide-commands';

export interface FollowOptions {
  readonly client: Client;
  readonly intentId: string;
  /** Approve the merge gate without asking (other gates are asked, or waited on). */
  readonly approve: boolean;
  /** Ask at the gate (stdin is a TTY). */
  readonly interactive: boolean;
  /** Who decides: recorded with the decision. */
  readonly by: string;
  readonly print: (line: string) => void;
  readonly pollMs?: number;
  /** Stop following when aborted (Ctrl-C): the intent goes on. */
  readonly signal?: AbortSignal;
}

export type FollowResult =
  | { readonly kind: 'completed'; readonly outcome: IntentOutcome; readonly state?: IntentState }
  | { readonly kind: 'failed'; readonly message: string; readonly state?: IntentState }
  | { readonly kind: 'cancelled'; readonly state?: IntentState };

/** Following stopped (Ctrl-C) while the intent still runs. */
export interface FollowInterrupted {
  readonly kind: 'interrupted';
  readonly state?: IntentState;
}

/**
 * Follows a running intent until it ends, printing a line whenever its stage, attempt, tests,
 * spend or gate changes, and answering the merge gate (approve flag, prompt, or instructions).
 */
export async function followIntent(options: FollowOptions): Promise<FollowResult | FollowInterrupted> {
  const handle = intentHandle(options.client, options.intentId);
  const started = Date.now();
  let lastLine = '';
  // Gates can follow one another closely (production, then merge): each is answered once.
  let answered = '';
  let state: IntentState | undefined;
  const interrupted = (): FollowInterrupted => ({ kind: 'interrupted', state });
  for (;;) {
    if (options.signal?.aborted) return interrupted();
    const { status } = await handle.describe();
    if (status.name !== 'RUNNING') break;
    state = (await withTimeout(handle.query(stateQuery), 5000).catch(() => undefined)) ?? state;
    if (state) {
      const line = progressLine(state);
      if (line !== lastLine) {
        options.print(`[${elapsed(started)}] ${line}`);
        lastLine = line;
      }
      const key = state.pendingGate ? `${state.pendingGate.gate}@${state.pendingGate.requestedAt}` : '';
      if (key && key !== answered) {
        answered = key;
        try {
          await answerGate(options, state);
        } catch (error) {
          if (options.signal?.aborted) return interrupted();
          throw error;
        }
      }
    }
    await sleep(options.pollMs ?? 300, options.signal);
  }
  try {
    const outcome = await handle.result();
    return { kind: 'completed', outcome, state };
  } catch (error) {
    if (error instanceof WorkflowFailedError) {
      if (error.cause?.name === 'CancelledFailure') return { kind: 'cancelled', state };
      return { kind: 'failed', message: failureMessage(error), state };
    }
    throw error;
  }
}

/** Why a workflow failed: the innermost message (a halt's reason rather than "Activity task failed"). */
export function failureMessage(error: WorkflowFailedError): string {
  const cause = error.cause as (Error & { cause?: Error }) | undefined;
  if (cause?.name === 'CancelledFailure') return 'cancelled';
  if (cause?.name === 'TerminatedFailure') return `terminated${cause.message && cause.message !== 'Workflow execution terminated' ? `: ${cause.message}` : ''}`;
  return cause?.cause?.message ?? cause?.message ?? error.message;
}

/** One line of progress: stage, attempt, latest tests, spend, gate. */
export function progressLine(state: IntentState): string {
  const parts = [`${state.stage}${state.attempts[state.stage as keyof typeof state.attempts] ? ` (attempt ${state.attempts[state.stage as keyof typeof state.attempts]})` : ''}`];
  const lastTest = state.tests.at(-1);
  if (lastTest) parts.push(`tests #${lastTest.attempt}: ${lastTest.summary}`);
  parts.push(`spend ${formatUsd(state.spendUsd)}`);
  if (state.pendingGate) parts.push(`waiting at the ${state.pendingGate.gate} gate`);
  return parts.join(' · ');
}

async function answerGate(options: FollowOptions, state: IntentState): Promise<void> {
  const gate = state.pendingGate!.gate;
  // --approve speaks for the merge gate only: a production, security or cost gate needs its own answer.
  if (options.approve && gate === 'merge') {
    await sendDecision(options.client, options.intentId, { gate, decision: 'approve', by: options.by });
    options.print(`approved the ${gate} gate as ${options.by} (--approve)`);
    return;
  }
  if (!options.interactive) {
    options.print(`${state.pendingGate!.prompt} Waiting for a decision (times out at ${state.pendingGate!.timeoutAt}):`);
    const commands = decideCommands(options.intentId, gate);
    options.print(`  approve: ${commands.approve}`);
    options.print(`  reject:  ${commands.reject}`);
    options.print(`  details: warden gates ${options.intentId}`);
    return;
  }
  // Gates after impl carry the review package; it is gathered just after the gate opens.
  let pending = state.pendingGate!;
  if (state.attempts.impl !== undefined && !pending.package) {
    await sleep(1500, options.signal);
    pending = (await intentHandle(options.client, options.intentId).query(stateQuery)).pendingGate ?? pending;
  }
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  // At the prompt the terminal's Ctrl-C reaches readline, not the process: pass it on.
  rl.on('SIGINT', () => process.kill(process.pid, 'SIGINT'));
  const signal = options.signal;
  const asker = { question: (text: string) => (signal ? rl.question(text, { signal }) : rl.question(text)) };
  try {
    const decision = await askAtGate(asker, options.intentId, pending, options.print);
    await sendDecision(options.client, options.intentId, { ...decision, by: options.by });
    options.print(`${decision.decision} sent for the ${decision.gate} gate as ${options.by}`);
  } finally {
    rl.close();
  }
}

function elapsed(since: number): string {
  const s = Math.floor((Date.now() - since) / 1000);
  return `${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`;
}

/** Sleeps `ms`, or less when `signal` aborts. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
