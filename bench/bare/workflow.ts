import { proxyActivities } from '@temporalio/workflow';
import type * as activities from './activities';

const { noop } = proxyActivities<typeof activities>({ startToCloseTimeout: '1m' });

/** The overhead benchmark's baseline: a bare Temporal workflow with six no-op stages. */
export async function bareSixStages(): Promise<void> {
  for (const stage of ['triage', 'lld', 'spec', 'impl', 'review', 'merge']) await noop(stage);
}
