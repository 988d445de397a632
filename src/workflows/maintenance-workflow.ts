import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { WardenActivities } from '../activities';
import type { DailyReport } from '../ledger/types';

export interface MaintenanceInput {
  /** Ledger rows older than this many days are deleted. */
  readonly retentionDays: number;
  /** Daily budget the report compares spend with (exact decimal string, 0 = no limit); default: the worker's `worker.dayBudgetUsd`. */
  readonly dayBudgetUsd?: string;
}

export interface MaintenanceResult {
  readonly deleted: Record<string, number>;
  readonly report: DailyReport;
  /** Where the report was written (under the worker's Warden home). */
  readonly reportPath: string;
}

// Idempotent reads, deletes by date, and writes keyed by the run: safe to retry.
const { cleanupLedger, buildDailyReport, publishDailyReport } = proxyActivities<WardenActivities>({
  startToCloseTimeout: '5m',
  retry: { maximumAttempts: 5 },
});

/**
 * Daily upkeep, started by the `warden-maintenance` schedule (`warden schedules install`):
 * retention cleanup of the ledger, then the health report of the day that just ended, left in
 * the worker's log, a file and the ledger (a RED day is a high-severity safety event).
 */
export async function maintenanceWorkflow(input: MaintenanceInput): Promise<MaintenanceResult> {
  const deleted = await cleanupLedger({ retentionDays: input.retentionDays });
  const started = workflowInfo().startTime;
  const yesterday = new Date(started.getTime() - 86_400_000).toISOString().slice(0, 10);
  const report = await buildDailyReport({ date: yesterday, dayBudgetUsd: input.dayBudgetUsd });
  const { path } = await publishDailyReport({ report });
  return { deleted, report, reportPath: path };
}
