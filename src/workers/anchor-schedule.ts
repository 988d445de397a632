import type { Client } from '@temporalio/client';
import { keepIntervalSchedule, type ScheduleChange } from './interval-schedule';
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

/** Makes sure the anchor schedule of `taskQueue` exists and anchors as it should; safe with many workers at once (see keepIntervalSchedule). */
export async function keepAnchorSchedule(client: Client, taskQueue: string = TASK_QUEUE): Promise<ScheduleChange> {
  return keepIntervalSchedule(client, { scheduleId: anchorScheduleId(taskQueue), workflowType: ANCHOR_WORKFLOW_TYPE, taskQueue, everyMs: ANCHOR_EVERY_MS });
}
