import type pg from 'pg';
import { writeChained } from './chain-writer';
import type { ChainedRow } from './chained-rows';
import type { CostEventInput, GateDecisionInput, SafetyEventInput } from './types';

/** What the ledger tells about each inserted row (see `LedgerWriter.observer`). */
export interface LedgerObserver {
  safetyEvent(event: SafetyEventInput): void;
  gateDecision(decision: GateDecisionInput): void;
  cost(cost: CostEventInput): void;
}

/**
 * How a Ledger's stores write chained rows (safety events, gate decisions, cost rows): every
 * such write goes through `write`, that is through writeChained (chain-writer.ts), the one place
 * the hash chains are kept. One per Ledger, shared by its stores, with the observer they tell.
 */
export class LedgerWriter {
  /** Told about each row actually inserted (not about repeats), once it is committed: the worker's metrics. */
  observer?: LedgerObserver;

  /** `chained: false` only in the chain's benchmark: the same writes without the hash chain, to compare. */
  constructor(private readonly chained: boolean) {}

  /** Writes `rows` in their order; returns those actually inserted (see writeChained). */
  write(db: pg.Pool | pg.PoolClient, rows: readonly ChainedRow[]): Promise<ChainedRow[]> {
    return writeChained(db, rows, { chained: this.chained });
  }
}
