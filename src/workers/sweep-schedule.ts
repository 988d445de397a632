import { ScheduleAlreadyRunning, ScheduleNotFoundError, ScheduleOverlapPolicy, type Client, type ScheduleDescription } from '@temporalio/client';
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

export type SweepScheduleChange = 'created' | 'updated' | 'kept';

/**
 * Makes sure the sweep schedule of `taskQueue` exists and sweeps as it should. Idempotent, and
 * safe with many workers at once: a schedule that already does the right thing is left as it is
 * (so workers never rewrite each other's), a missing one is created (a worker that loses that
 * race finds the winner's), and one that differs is put right.
 */
export async function keepSweepSchedule(client: Client, taskQueue: string = TASK_QUEUE): Promise<SweepScheduleChange> {
  const scheduleId = sweepScheduleId(taskQueue);
  const spec = { intervals: [{ every: SWEEP_EVERY_MS }] };
  const action = { type: 'startWorkflow' as const, workflowType: 'sweepWorkflow', taskQueue, args: [] as [] };
  const handle = client.schedule.getHandle(scheduleId);
  try {
    const described = await handle.describe();
    if (sweepsAsItShould(described, taskQueue)) return 'kept';
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

function sweepsAsItShould(described: ScheduleDescription, taskQueue: string): boolean {
  const { action, spec } = described;
  return (
    action.type === 'startWorkflow' &&
    action.workflowType === 'sweepWorkflow' &&
    action.taskQueue === taskQueue &&
    spec.intervals?.length === 1 &&
    spec.intervals[0]!.every === SWEEP_EVERY_MS &&
    !spec.calendars?.length
  );
}
