import type { Client, WorkflowHandle } from '@temporalio/client';
import { UserError } from '../shared/errors';
import { TASK_QUEUE } from '../shared/ids';
import { stateQuery } from '../shared/messages';
import type { IntentState } from '../shared/state';

/**
 * Whether a worker is there to answer: a running intent's state, its decisions and its stop
 * all go through a workflow task, which only a worker polling Warden's task queue runs. Without
 * one the server holds a query for its whole timeout and then says only "Failed to query
 * Workflow"; these say what is missing and what to run instead.
 */

/** How long a command waits for a running intent to answer its state query. */
export const STATE_QUERY_TIMEOUT_MS = 10_000;

/**
 * True if some worker (other than `exceptIdentity`) polled `taskQueue` (default Warden's) in the last
 * minute. Pollers long-poll for up to a minute, so an older entry is a worker that has gone.
 */
export async function hasLiveWorker(client: Client, namespace: string, exceptIdentity?: string, taskQueue = TASK_QUEUE): Promise<boolean> {
  const response = await client.workflowService.describeTaskQueue({
    namespace,
    taskQueue: { name: taskQueue },
    taskQueueType: 1, // TASK_QUEUE_TYPE_WORKFLOW
  });
  const cutoff = Date.now() - 70_000;
  return (response.pollers ?? []).some((poller) => {
    if (exceptIdentity !== undefined && poller.identity === exceptIdentity) return false;
    const seconds = Number(poller.lastAccessTime?.seconds ?? 0);
    return seconds * 1000 >= cutoff;
  });
}

/** The one line that says no worker runs, and what to run. */
export function noWorkerRunning(what: string, taskQueue = TASK_QUEUE): string {
  return `no Warden worker is polling the "${taskQueue}" task queue, so ${what}: start one with \`warden worker\` (or \`warden dev\`), then try again`;
}

/** The state of a running intent (its workflow on `taskQueue`), or a one-line error saying why it cannot answer. */
export async function answeringState(client: Client, handle: WorkflowHandle, intentId: string, taskQueue: string): Promise<IntentState> {
  if (!(await hasLiveWorker(client, client.options.namespace, undefined, taskQueue))) throw new UserError(noWorkerRunning(`intent ${intentId} cannot answer`, taskQueue));
  try {
    return await withTimeout(handle.query(stateQuery), STATE_QUERY_TIMEOUT_MS);
  } catch (error) {
    throw new UserError(
      `intent ${intentId} did not answer its state query (${(error as Error).message}): its worker may have just stopped; ` +
        'check that `warden worker` (or `warden dev`) runs, then try again',
    );
  }
}

/** `promise`, or a rejection saying no answer came within `ms`. */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise,
    new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${ms / 1000} s`)), ms))),
  ]).finally(() => clearTimeout(timer));
}
