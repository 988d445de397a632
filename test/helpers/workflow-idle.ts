import type { WorkflowHandle } from '@temporalio/client';
import { waitFor } from './env';

/**
 * Resolves once the workflow has nothing in flight: no activity pending and no workflow task
 * scheduled or running. From there only a signal, an update or one of its timers moves it on, so
 * whatever it would have done by itself it has done. A check that something did not happen (a
 * pause held, a gate stayed shut) made after this is a check, not a sleep that was long enough
 * on an idle machine.
 */
export async function untilIdle(handle: WorkflowHandle, what = `${handle.workflowId} to have nothing in flight`): Promise<void> {
  await waitFor(
    async () => {
      const { raw } = await handle.describe();
      return (raw.pendingActivities ?? []).length === 0 && !raw.pendingWorkflowTask ? true : undefined;
    },
    120_000, // a hang guard: a workflow with nothing to wait for is idle within seconds
    what,
  );
}
