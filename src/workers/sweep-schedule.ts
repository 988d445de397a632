import type { Client } from '@temporalio/client';
import { keepIntervalSchedule, type ScheduleChange } from './interval-schedule';
import { TASK_QUEUE } from '../shared/ids';

/*
 * The `warden-sweep` schedule: every half minute, a sweep workflow on the worker's task queue
 * cleans what intents terminated from outside (the Web UI, `temporal workflow terminate`) or
 * timed out left behind, and records their ending. Every worker installs it as it starts and
 * checks it again every minute, so it is there without `warden schedules install`.
 */

/** Id of the schedule of the default task queue. */
export const SWEEP_SCHEDULE_ID = 'warden-sweep';

/** How often the sweep runs: with the ten seconds a closed intent is left to settle, a terminated intent is swept within a minute. */
export const SWEEP_EVERY_MS = 30_000;

/** The schedule's id for `taskQueue`: one per queue, since each queue's workers sweep their own worktrees. */
export function sweepScheduleId(taskQueue: string = TASK_QUEUE): string {
  return taskQueue === TASK_QUEUE ? SWEEP_SCHEDULE_ID : `${SWEEP_SCHEDULE_ID}-${taskQueue}`;
}

export type SweepScheduleChange = ScheduleChange;

/** Makes sure the sweep schedule of `taskQueue` exists and sweeps as it should (see keepIntervalSchedule). */
export async function keepSweepSchedule(client: Client, taskQueue: string = TASK_QUEUE): Promise<SweepScheduleChange> {
  return keepIntervalSchedule(client, { scheduleId: sweepScheduleId(taskQueue), workflowType: 'sweepWorkflow', taskQueue, everyMs: SWEEP_EVERY_MS });
}
