import { ScheduleAlreadyRunning, ScheduleNotFoundError, ScheduleOverlapPolicy, type Client } from '@temporalio/client';
import { TASK_QUEUE } from '../shared/ids';

/*
 * The `warden-ledger-anchor` schedule: every hour, an anchor workflow records the head of the
 * ledger's hash chain in its history (see src/workflows/ledger-anchor-workflow.ts). Every worker
 * installs it as it starts, like the sweep schedule.
 */

export const ANCHOR_SCHEDULE_ID = 'warden-ledger-anchor';

/** How often the chain's head is anchored: an hour, so a rewrite of the ledger older than that is caught by an anchor. */
export const ANCHOR_EVERY_MS = 3_600_000;

export const ANCHOR_WORKFLOW_TYPE = 'ledgerAnchorWorkflow';

/** The schedule's id for `taskQueue`: one per queue, as each queue's workers may use their own database. */
export function anchorScheduleId(taskQueue: string = TASK_QUEUE): string {
  return taskQueue === TASK_QUEUE ? ANCHOR_SCHEDULE_ID : `${ANCHOR_SCHEDULE_ID}-${taskQueue}`;
}

/** Makes sure the anchor schedule of `taskQueue` exists and anchors as it should; safe with many workers at once. */
export async function keepAnchorSchedule(client: Client, taskQueue: string = TASK_QUEUE): Promise<'created' | 'updated' | 'kept'> {
  const scheduleId = anchorScheduleId(taskQueue);
  const spec = { intervals: [{ every: ANCHOR_EVERY_MS }] };
  const action = { type: 'startWorkflow' as const, workflowType: ANCHOR_WORKFLOW_TYPE, taskQueue, args: [] as [] };
  const handle = client.schedule.getHandle(scheduleId);
  try {
    const { action: current, spec: currentSpec } = await handle.describe();
    const right =
      current.type === 'startWorkflow' && current.workflowType === ANCHOR_WORKFLOW_TYPE && current.taskQueue === taskQueue &&
      currentSpec.intervals?.length === 1 && currentSpec.intervals[0]!.every === ANCHOR_EVERY_MS && !currentSpec.calendars?.length;
    if (right) return 'kept';
    await handle.update((previous) => ({ ...previous, spec, action }));
    return 'updated';
  } catch (error) {
    if (!(error instanceof ScheduleNotFoundError)) throw error;
  }
  try {
    await client.schedule.create({ scheduleId, spec, action, policies: { overlap: ScheduleOverlapPolicy.SKIP } });
    return 'created';
  } catch (error) {
    if (error instanceof ScheduleAlreadyRunning) return 'kept';
    throw error;
  }
}
