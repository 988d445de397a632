import type pg from 'pg';
import { LedgerWriter } from './ledger-writer';
import { AuditStore } from './audit-store';
import { BudgetStore } from './budget-store';
import { ModelCallStore } from './model-call-store';
import { ActivityRunStore } from './activity-run-store';
import { GlobalStopStore } from './global-stop-store';
import { LedgerQueries } from './ledger-queries';
import { Retention } from './retention';

/**
 * Warden's ledger on PostgreSQL, as stores of one concern each on one pool: the append-only
 * audit rows, the budget, model calls, activity runs, the global stop flag, the read side and
 * retention. Every chained row (safety event, gate decision, cost) any store writes goes through
 * the one `writer`. Writes are idempotent by id; money is exact (NUMERIC in SQL, decimal strings
 * in TypeScript).
 */
export class Ledger {
  /** The chained writes every store goes through, and the observer they tell. */
  readonly writer: LedgerWriter;
  readonly audit: AuditStore;
  readonly budget: BudgetStore;
  readonly modelCalls: ModelCallStore;
  readonly activityRuns: ActivityRunStore;
  readonly globalStop: GlobalStopStore;
  readonly queries: LedgerQueries;
  readonly retention: Retention;

  constructor(
    readonly pool: pg.Pool,
    opts: { readonly unchainedForBenchmark?: boolean } = {},
  ) {
    this.writer = new LedgerWriter(opts.unchainedForBenchmark !== true);
    this.audit = new AuditStore(pool, this.writer);
    this.budget = new BudgetStore(pool, this.writer);
    this.modelCalls = new ModelCallStore(pool);
    this.activityRuns = new ActivityRunStore(pool);
    this.globalStop = new GlobalStopStore(pool, this.writer);
    this.queries = new LedgerQueries(pool);
    this.retention = new Retention(pool);
  }
}
