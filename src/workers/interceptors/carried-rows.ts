import type { Context } from '@temporalio/activity';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { Logger } from 'pino';
import { writeLedgerBatch, type LedgerBatch } from '../../activities/ledger-activities';
import type { Ledger } from '../../ledger/ledger';
import { CARRIED_ROWS_FIELD } from '../../shared/carried-rows';
import type { Redactor } from '../../shared/redact';
import { ledgerDeadlineOf, patientlyWithLedger } from './ledger-patience';

export interface CarriedRowsDeps {
  readonly ledger: Ledger;
  readonly redact: Redactor;
  readonly logger: Logger;
}

/**
 * Writes the ledger rows an activity's first argument carries (CARRIED_ROWS_FIELD, see
 * src/shared/carried-rows.ts) before anything else the attempt does: before the kill switches
 * and the safety layers, so a refused activity still leaves them on record, and before the
 * activity acts. Every attempt writes them (their ids come from the workflow: a repeat inserts
 * nothing). While the ledger cannot be reached the attempt waits for it, then fails retryably:
 * the activity never runs ahead of its rows. The activity gets its argument without them.
 */
export function carriedRowsInterceptor(deps: CarriedRowsDeps): ActivityInterceptorsFactory {
  return (ctx: Context) => ({
    inbound: {
      async execute(input, next) {
        const [first, ...rest] = input.args;
        if (!carriesRows(first)) return next(input);
        const { [CARRIED_ROWS_FIELD]: batch, ...own } = first;
        await patientlyWithLedger(ctx, deps.logger, ledgerDeadlineOf(ctx, Date.now()), 'write the ledger rows sent ahead of this activity', () => writeLedgerBatch(deps, batch));
        return next({ ...input, args: [own, ...rest] });
      },
    },
  });
}

function carriesRows(arg: unknown): arg is Record<string, unknown> & { readonly [CARRIED_ROWS_FIELD]: LedgerBatch } {
  return typeof arg === 'object' && arg !== null && CARRIED_ROWS_FIELD in arg;
}
