import type { Context } from '@temporalio/activity';
import { defaultPayloadConverter } from '@temporalio/common';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { Logger } from 'pino';
import { appendLedgerBatch, type LedgerBatch } from '../../activities/ledger-activities';
import type { Ledger } from '../../ledger/ledger';
import { LEDGER_ROWS_HEADER } from '../../shared/ledger-handover';
import type { Redactor } from '../../shared/redact';
import { ledgerDeadlineOf, patientlyWithLedger } from './ledger-patience';

export interface LedgerHandOverDeps {
  readonly ledger: Ledger;
  readonly redact: Redactor;
  readonly logger: Logger;
}

/**
 * Writes the ledger rows the workflow handed to this activity (header LEDGER_ROWS_HEADER: a gate's
 * decision, see LedgerRecorder.writeBeforeNextStep) before anything else the attempt does: before
 * the kill switches and the safety layers, so a refused activity still leaves the decision on
 * record, and before the activity itself acts on it. Every attempt writes them (their ids come
 * from the workflow: a repeat inserts nothing). While the ledger cannot be reached the attempt
 * waits for it and then fails retryably: the activity never runs ahead of the rows.
 */
export function ledgerHandOverInterceptor(deps: LedgerHandOverDeps): ActivityInterceptorsFactory {
  return (ctx: Context) => ({
    inbound: {
      async execute(input, next) {
        const header = input.headers[LEDGER_ROWS_HEADER];
        if (header) {
          const batch = defaultPayloadConverter.fromPayload<LedgerBatch>(header);
          await patientlyWithLedger(ctx, deps.logger, ledgerDeadlineOf(ctx, Date.now()), 'write the rows the workflow handed over', () =>
            appendLedgerBatch(deps.ledger, deps.redact, batch),
          );
        }
        return next(input);
      },
    },
  });
}
