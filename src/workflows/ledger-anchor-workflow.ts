import { proxyActivities } from '@temporalio/workflow';
import type { WardenActivities } from '../activities';

const { readChainHead } = proxyActivities<WardenActivities>({ startToCloseTimeout: '1m', retry: { maximumAttempts: 5 } });

/** The ledger chain's head as an anchor run saw it: its result, kept in the run's history. */
export interface LedgerAnchor {
  readonly pos: number;
  readonly hash: string;
  /** When the head was read (ISO), by the worker's clock. */
  readonly at: string;
}

/**
 * One anchor (the `warden-ledger-anchor` schedule starts it every hour): reads the head of the
 * ledger's hash chain and ends with it, so that the head and its time are in a workflow history
 * on the Temporal server, out of reach of whoever controls only the database. `warden ledger
 * verify` checks the chain against every anchor the server still keeps.
 */
export async function ledgerAnchorWorkflow(): Promise<LedgerAnchor> {
  return readChainHead();
}
