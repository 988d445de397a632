import type { Ledger } from '../ledger/ledger';
import type { CostEventInput, DailyReport, GateDecisionInput, SafetyEventInput } from '../ledger/types';
import { redactDeep, type Redactor } from '../shared/redact';

/** Rows the workflow wants written together. Ids are made in the workflow, so retries are no-ops. */
export interface LedgerBatch {
  readonly safetyEvents?: readonly SafetyEventInput[];
  readonly costs?: readonly CostEventInput[];
  readonly gateDecisions?: readonly GateDecisionInput[];
}

export interface LedgerActivityDeps {
  readonly ledger: Ledger;
  readonly redact: Redactor;
}

export function createLedgerActivities(deps: LedgerActivityDeps) {
  return {
    /**
     * Appends a batch to the ledger. Idempotent by row id (a retry after a partial write inserts
     * only what is missing); while PostgreSQL is unreachable it fails and Temporal retries it.
     * Returns how many rows were new.
     */
    async appendToLedger(batch: LedgerBatch): Promise<{ readonly inserted: number }> {
      let inserted = 0;
      for (const row of batch.gateDecisions ?? []) if (await deps.ledger.recordGateDecision(redactDeep(row, deps.redact))) inserted++;
      for (const row of batch.costs ?? []) if (await deps.ledger.recordCost(row)) inserted++;
      for (const row of batch.safetyEvents ?? []) if (await deps.ledger.recordSafetyEvent(redactDeep(row, deps.redact))) inserted++;
      return { inserted };
    },

    /** Retention cleanup: the only path that deletes ledger rows. */
    async cleanupLedger({ retentionDays }: { readonly retentionDays: number }): Promise<Record<string, number>> {
      return deps.ledger.cleanup(retentionDays);
    },

    /** The daily health report for `date` (YYYY-MM-DD). */
    async buildDailyReport(input: { readonly date: string; readonly dayBudgetUsd?: string }): Promise<DailyReport> {
      return deps.ledger.dailyReport(input);
    },
  };
}
