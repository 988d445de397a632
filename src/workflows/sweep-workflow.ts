import { proxyActivities } from '@temporalio/workflow';
import type { WardenActivities } from '../activities';

const { sweepClosedIntents } = proxyActivities<WardenActivities>({ startToCloseTimeout: '5m', retry: { maximumAttempts: 3 } });

/**
 * One sweep (the `warden-sweep` schedule starts it every 30 s): cleans what intents that ended
 * without their cleanup left behind. See src/activities/sweeper.ts.
 */
export async function sweepWorkflow(): Promise<{ readonly swept: number; readonly running: number; readonly leftAlone: number }> {
  const report = await sweepClosedIntents();
  return { swept: report.swept.length, running: report.running, leftAlone: report.leftAlone.length };
}
