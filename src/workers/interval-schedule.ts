import { ScheduleAlreadyRunning, ScheduleNotFoundError, ScheduleOverlapPolicy, type Client, type ScheduleDescription } from '@temporalio/client';

export type ScheduleChange = 'created' | 'updated' | 'kept';

/**
 * Makes sure schedule `scheduleId` starts `workflowType` on `taskQueue` every `everyMs`, and
 * nothing else. Idempotent, and safe with many workers at once: a schedule that already does the
 * right thing is left as it is (so workers never rewrite each other's), a missing one is created
 * (a worker that loses that race finds the winner's), and one that differs is put right.
 */
export async function keepIntervalSchedule(client: Client, s: { readonly scheduleId: string; readonly workflowType: string; readonly taskQueue: string; readonly everyMs: number }): Promise<ScheduleChange> {
  const spec = { intervals: [{ every: s.everyMs }] };
  const action = { type: 'startWorkflow' as const, workflowType: s.workflowType, taskQueue: s.taskQueue, args: [] as [] };
  const handle = client.schedule.getHandle(s.scheduleId);
  try {
    if (asItShould(await handle.describe(), s)) return 'kept';
    await handle.update((previous) => ({ ...previous, spec, action }));
    return 'updated';
  } catch (error) {
    if (!(error instanceof ScheduleNotFoundError)) throw error;
  }
  try {
    await client.schedule.create({ scheduleId: s.scheduleId, spec, action, policies: { overlap: ScheduleOverlapPolicy.SKIP } });
    return 'created';
  } catch (error) {
    if (error instanceof ScheduleAlreadyRunning) return 'kept';
    throw error;
  }
}

function asItShould({ action, spec }: ScheduleDescription, s: { readonly workflowType: string; readonly taskQueue: string; readonly everyMs: number }): boolean {
  return (
    action.type === 'startWorkflow' &&
    action.workflowType === s.workflowType &&
    action.taskQueue === s.taskQueue &&
    spec.intervals?.length === 1 &&
    spec.intervals[0]!.every === s.everyMs &&
    !spec.calendars?.length
  );
}
