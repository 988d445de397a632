import type { Client, WorkflowExecutionDescription, WorkflowHandle } from '@temporalio/client';
import { SWEEP_AFTER_CLOSE_MS } from '../activities/sweeper';
import { deterministicUuid } from '../ledger/event-id';
import type { Ledger } from '../ledger/ledger';
import { intentIdFromWorkflowId } from '../shared/ids';
import { describeRunning, intentHandle } from './intents';
import { hasLiveWorker } from './worker-presence';
import { STOP_WAIT_MS } from './stop-wait';

/**
 * The kill switch, told truthfully: a stop cancels the intent, then waits until its workflow has
 * closed. Closed as cancelled means its own cleanup ran (the worktree is removed only then). One
 * still running after the wait is terminated, saying what was still running, and a sweep is
 * started to remove what it left; one that ended some other way first is reported as such.
 */


export type StopOutcome =
  /** Closed as cancelled: its agent is dead, its worktree removed, nothing merged. */
  | { readonly intentId: string; readonly outcome: 'stopped'; readonly seconds: number }
  /** It closed some other way before the cancel took (it merged, failed or was rejected). */
  | { readonly intentId: string; readonly outcome: 'ended'; readonly status: string; readonly seconds: number }
  /** Still running after the wait: terminated; a sweep removes its worktree. */
  | { readonly intentId: string; readonly outcome: 'terminated'; readonly stillRunning: string; readonly seconds: number };

export interface StopOptions {
  readonly by: string;
  readonly reason: string;
  /** Default {@link STOP_WAIT_MS}. */
  readonly waitMs?: number;
  /** A line now and then while it waits. */
  readonly onProgress?: (line: string) => void;
  readonly namespace?: string;
}

/** Stops one running intent (refuses one that is not running). */
export async function stopIntent(client: Client, ledger: Ledger, intentId: string, options: StopOptions): Promise<StopOutcome> {
  const handle = intentHandle(client, intentId);
  const description = await describeRunning(handle, intentId);
  const started = Date.now();
  await recordStop(ledger, intentId, description, options);
  await handle.cancel();
  return settle(client, ledger, handle, intentId, started, options);
}

/**
 * The emergency stop: set the global stop flag first (so no worker starts new agent work and
 * `warden run` refuses), cancel every running intent until none is listed, then wait for each to
 * close as {@link stopIntent} does.
 */
export async function stopAll(client: Client, ledger: Ledger, options: StopOptions): Promise<StopOutcome[]> {
  await ledger.globalStop.set(options.by, options.reason);
  const started = Date.now();
  const cancelled = new Map<string, Promise<StopOutcome>>();
  // Visibility lags a moment behind: list again until nothing new is running (bounded).
  for (let round = 0; round < 30; round++) {
    const running = (await runningIntents(client)).filter((id) => !cancelled.has(id));
    if (running.length === 0 && round > 0) break;
    for (const workflowId of running) {
      const intentId = intentIdFromWorkflowId(workflowId);
      const handle = client.workflow.getHandle(workflowId);
      cancelled.set(workflowId, (async () => {
        // It may have just ended: then there is nothing to cancel, and the wait below says how it ended.
        await handle.cancel().catch(() => undefined);
        return settle(client, ledger, handle, intentId, started, options);
      })());
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  return Promise.all(cancelled.values());
}

/** Workflow ids of running intents, from visibility. */
async function runningIntents(client: Client): Promise<string[]> {
  const ids: string[] = [];
  for await (const wf of client.workflow.list({ query: "WorkflowType = 'intentWorkflow' AND ExecutionStatus = 'Running'" })) ids.push(wf.workflowId);
  return ids;
}

async function recordStop(ledger: Ledger, intentId: string, description: WorkflowExecutionDescription, options: StopOptions): Promise<void> {
  await ledger.audit.recordSafetyEvent({
    id: deterministicUuid('INTENT_STOPPED', description.workflowId, description.runId),
    timestamp: new Date(),
    eventType: 'INTENT_STOPPED',
    intentId,
    reason: `stopped by ${options.by}: ${options.reason}`,
    severity: 'high',
    metadata: { by: options.by, runId: description.runId },
  });
}

/**
 * Waits for a cancelled intent to close; past the wait, terminates it and starts a sweep. The
 * wait is one long poll for the workflow's close, not a describe every moment: a stop of a
 * hundred intents otherwise asks the server hundreds of times a second while it and the worker
 * are closing them, on the same cores.
 */
async function settle(client: Client, ledger: Ledger, handle: WorkflowHandle, intentId: string, started: number, options: StopOptions): Promise<StopOutcome> {
  const waitMs = options.waitMs ?? STOP_WAIT_MS;
  const seconds = () => Math.round((Date.now() - started) / 100) / 10;
  // A long poll that settles when the workflow closes, however it closed (the describe below says
  // how). Once it has settled (or failed) the wait looks every moment, as it would without it.
  let polling = true;
  let nextProgress = Date.now() + PROGRESS_EVERY_MS;
  const closed = handle.result().then(
    () => (polling = false),
    () => (polling = false),
  );
  for (;;) {
    const left = started + waitMs - Date.now();
    const nextLook = Math.min(left, options.onProgress ? nextProgress - Date.now() : left, polling ? left : LOOK_EVERY_MS);
    await untilFirst(polling ? closed : NEVER, Math.max(0, nextLook));
    const description = await handle.describe();
    const status = description.status.name;
    if (status === 'CANCELLED') return { intentId, outcome: 'stopped', seconds: seconds() };
    if (status !== 'RUNNING') return { intentId, outcome: 'ended', status: status.toLowerCase(), seconds: seconds() };
    if (Date.now() - started >= waitMs) {
      const stillRunning = await whatStillRuns(client, description, options.namespace ?? 'default');
      await escalate(client, ledger, handle, intentId, description, stillRunning, Math.round(waitMs / 1000), options);
      return { intentId, outcome: 'terminated', stillRunning, seconds: seconds() };
    }
    if (options.onProgress && Date.now() >= nextProgress) {
      nextProgress = Date.now() + PROGRESS_EVERY_MS;
      options.onProgress(`${intentId} has not closed yet (${seconds().toFixed(0)} s): ${await whatStillRuns(client, description, options.namespace ?? 'default')}`);
    }
  }
}

/** How often a stop that waits says so. */
const PROGRESS_EVERY_MS = 5_000;
/** How often a stop looks when it cannot long-poll. */
const LOOK_EVERY_MS = 250;
const NEVER = new Promise<never>(() => undefined);

/** Resolves when `promise` settles or after `ms`, whichever comes first. */
async function untilFirst(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([promise, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

/** What keeps a cancelled intent's workflow open, in words: its pending activities, a workflow task no worker takes. */
export async function whatStillRuns(client: Client, description: WorkflowExecutionDescription, namespace: string): Promise<string> {
  const parts: string[] = [];
  for (const activity of description.raw.pendingActivities ?? []) {
    const beat = activity.lastHeartbeatTime?.seconds;
    const since = beat ? `, last heartbeat ${Math.round(Date.now() / 1000 - Number(String(beat)))} s ago` : '';
    parts.push(`activity ${activity.activityType?.name ?? '?'} (attempt ${activity.attempt ?? 1}${since})`);
  }
  if (description.raw.pendingWorkflowTask) parts.push('a workflow task waiting for a worker');
  const workerUp = await hasLiveWorker(client, namespace, undefined, description.taskQueue).catch(() => true);
  if (!workerUp) parts.push(`no worker polls the ${description.taskQueue} task queue`);
  return parts.length > 0 ? parts.join('; ') : 'its workflow is finishing its cleanup';
}

async function escalate(
  client: Client,
  ledger: Ledger,
  handle: WorkflowHandle,
  intentId: string,
  description: WorkflowExecutionDescription,
  stillRunning: string,
  waitedSeconds: number,
  options: StopOptions,
): Promise<void> {
  const why = `warden stop by ${options.by}: still running ${waitedSeconds} s after the cancel (${stillRunning})`;
  await handle.terminate(why).catch((error: Error) => {
    // It closed between the look and the terminate: nothing to escalate.
    if (error.name !== 'WorkflowNotFoundError') throw error;
  });
  await ledger.audit.recordSafetyEvent({
    id: deterministicUuid('STOP_ESCALATED', description.workflowId, description.runId),
    timestamp: new Date(),
    eventType: 'STOP_ESCALATED',
    intentId,
    reason: why,
    severity: 'high',
    suggestion: 'The sweeper removes its worktree (a sweep was started now; the warden-sweep schedule and every worker start sweep too).',
    metadata: { by: options.by, runId: description.runId, stillRunning },
  });
  // Its own cleanup never runs now: start a sweep for once it has been closed long enough.
  await client.workflow
    .start('sweepWorkflow', {
      taskQueue: description.taskQueue,
      workflowId: `warden-sweep-after-stop-${intentId}-${description.runId}`,
      startDelay: SWEEP_AFTER_CLOSE_MS + 2_000,
      args: [],
    })
    .catch(() => undefined); // one already started for this run
}
