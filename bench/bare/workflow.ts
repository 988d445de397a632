import { condition, defineQuery, defineSignal, proxyActivities, setHandler } from '@temporalio/workflow';
import type * as activities from './activities';

const { noop } = proxyActivities<typeof activities>({ startToCloseTimeout: '1m' });

/** The overhead benchmark's baseline: a bare Temporal workflow with six no-op stages. */
export async function bareSixStages(): Promise<void> {
  for (const stage of ['triage', 'lld', 'spec', 'impl', 'review', 'merge']) await noop(stage);
}

export const bareApproveSignal = defineSignal('approve');
export const bareAtGateQuery = defineQuery<boolean>('atGate');

/**
 * The same six no-op stages with a gate before merge: a signal the workflow waits for. Temporal's
 * own floor for a gate (signal → next activity started) and for a gated pipeline, on one machine.
 */
export async function bareSixStagesWithGate(): Promise<void> {
  let approved = false;
  let atGate = false;
  setHandler(bareApproveSignal, () => void (approved = true));
  setHandler(bareAtGateQuery, () => atGate);
  for (const stage of ['triage', 'lld', 'spec', 'impl', 'review']) await noop(stage);
  atGate = true;
  await condition(() => approved);
  await noop('merge');
}

const { hang } = proxyActivities<typeof activities>({ startToCloseTimeout: '10m', heartbeatTimeout: '10s' });

/**
 * One activity that runs until it is cancelled: the kill benchmark's floor, what cancelling a
 * running workflow costs Temporal itself (a cancel request and one workflow task, the activity's
 * cancellation delivered on its next heartbeat).
 */
export async function bareHanging(): Promise<void> {
  await hang();
}
