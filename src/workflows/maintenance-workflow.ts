import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { WardenActivities } from '../activities';
import type { DailyReport } from '../ledger/types';

export interface MaintenanceInput {
  /** Ledger rows older than this many days are deleted. */
  readonly retentionDays: number;
  /** Daily budget the report compares spend with (exact decimal string), if one is set. */
  readonly dayBudgetUsd?: string;
}

export interface MaintenanceResult {
  readonly deleted: Record<string, number>;
  readonly report: DailyReport;
}

// Idempotent reads and deletes by date: safe to retry.
const { cleanupLedger, buildDailyReport } = proxyActivities<WardenActivities>({
  startToCloseTimeout: '5m',
  retry: { maximumAttempts: 5 },
});

/**
 * Daily upkeep, started by the `warden-maintenance` schedule (`warden schedules install`):
 * retention cleanup of the ledger, then the health report of the day that just ended.
 */
export async function maintenanceWorkflow(input: MaintenanceInput): Promise<MaintenanceResult> {
  const deleted = await cleanupLedger({ retentionDays: input.retentionDays });
  const started = workflowInfo().startTime;
  const yesterday = new Date(started.getTime() - 86_400_000).toISOString().slice(0, 10);
  const report = await buildDailyReport({ date: yesterday, dayBudgetUsd: input.dayBudgetUsd });
  return { deleted, report };
}
