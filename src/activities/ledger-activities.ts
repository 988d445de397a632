import { deterministicUuid } from '../ledger/event-id';
import { LadderStore, type LadderDefaults, type LadderState } from '../ledger/ladder-store';
import type { Ledger } from '../ledger/ledger';
import type { LadderRun } from '../shared/ladder';
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
  /** Where agent profiles start on the automation ladder and whether they may climb (config `automation`). */
  readonly automation?: LadderDefaults;
}

/** Before a profile's first run: Manual, allowed to climb (the default profile's setting). */
export const DEFAULT_LADDER: LadderDefaults = { level: 0, allowLevelUp: true };

export function createLedgerActivities(deps: LedgerActivityDeps) {
  const ladder = new LadderStore(deps.ledger.pool);
  const defaults = deps.automation ?? DEFAULT_LADDER;
  return {
    /** The agent profile's ladder level and metrics, read once per intent (the workflow records it). */
    async readLadder({ scope }: { readonly scope: string }): Promise<LadderState> {
      return ladder.state(scope, defaults);
    },

    /**
     * Counts a finished intent on its profile's ladder. The id is made from the workflow run,
     * so a retried activity counts it once. Returns the level before and after.
     */
    async recordLadderRun(input: { readonly scope: string; readonly intentId: string; readonly runId: string; readonly run: LadderRun }): Promise<{ readonly before: number; readonly after: number }> {
      const { before, after } = await ladder.recordRun({ id: deterministicUuid('ladder-run', input.intentId, input.runId), scope: input.scope, intentId: input.intentId, run: input.run, defaults });
      return { before: before.level, after: after.level };
    },

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
