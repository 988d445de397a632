import { proxyActivities } from '@temporalio/workflow';
import type { LedgerAnchor, WardenActivities } from '../activities';

export type { LedgerAnchor };

const { anchorLedger } = proxyActivities<WardenActivities>({ startToCloseTimeout: '1m', retry: { maximumAttempts: 5 } });

/**
 * One anchor (the `warden-ledger-anchor` schedule starts it every hour): lists the head of every
 * ledger hash chain that moved since the last anchor in a LEDGER_ANCHOR row of the system chain,
 * and ends with the system chain's head after it, so that head and its time are in a workflow
 * history on the Temporal server, out of reach of whoever controls only the database. `warden
 * ledger verify` checks the chains against every anchor the server still keeps.
 */
export async function ledgerAnchorWorkflow(): Promise<LedgerAnchor> {
  return anchorLedger();
}
