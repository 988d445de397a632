import type pg from 'pg';
import { storable } from './storable';
import { CostEventSchema, GateDecisionRowSchema, SafetyEventSchema, type CostEventInput, type GateDecisionInput, type SafetyEventInput } from './types';
import { costRow, gateDecisionRow, safetyEventRow, type ChainedRow } from './chained-rows';
import type { LedgerWriter } from './ledger-writer';

/** One row written with others (see `AuditStore.recordBatch`). */
export type LedgerEntry = { readonly safetyEvent: SafetyEventInput } | { readonly gateDecision: GateDecisionInput } | { readonly cost: CostEventInput };

/**
 * The ledger's append-only audit rows: safety events, gate decisions and cost events, each in its
 * intent's hash chain. Writes are idempotent by id.
 */
export class AuditStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly writer: LedgerWriter,
  ) {}

  /** Appends a safety event. True if inserted; false if a row with this id already exists (a retry). */
  async recordSafetyEvent(input: SafetyEventInput): Promise<boolean> {
    return (await this.recordBatch([{ safetyEvent: input }])) === 1;
  }

  /** Appends a cost event (one agent call). True if inserted; false if the id already exists. */
  async recordCost(input: CostEventInput): Promise<boolean> {
    return (await this.recordBatch([{ cost: input }])) === 1;
  }

  /** Appends a gate decision. True if inserted; false if the id already exists. */
  async recordGateDecision(input: GateDecisionInput): Promise<boolean> {
    return (await this.recordBatch([{ gateDecision: input }])) === 1;
  }

  /**
   * Appends rows written together (a workflow's flush), in their order: one statement per hash
   * chain (one for a batch of one intent), so the batch is written whole or not at all. Rows
   * whose id exists already (a retry) are not written again. Returns how many were new.
   */
  async recordBatch(entries: readonly LedgerEntry[]): Promise<number> {
    const parsed = entries.map((entry): { row: ChainedRow; tell: () => void } => {
      if ('safetyEvent' in entry) {
        const e = SafetyEventSchema.parse(storable(entry.safetyEvent));
        return { row: safetyEventRow(e), tell: () => this.writer.observer?.safetyEvent(e) };
      }
      if ('gateDecision' in entry) {
        const g = GateDecisionRowSchema.parse(storable(entry.gateDecision));
        return { row: gateDecisionRow(g), tell: () => this.writer.observer?.gateDecision(g) };
      }
      const c = CostEventSchema.parse(storable(entry.cost));
      return { row: costRow(c), tell: () => this.writer.observer?.cost(c) };
    });
    const inserted = new Set(await this.writer.write(this.pool, parsed.map((p) => p.row)));
    for (const p of parsed) if (inserted.has(p.row)) p.tell();
    return inserted.size;
  }
}
