/**
 * The activity header that hands ledger rows from the workflow to the activity it schedules: the
 * worker writes them before the activity does anything else (see
 * src/workers/interceptors/ledger-handover.ts), so rows a decision owes the ledger cost no workflow
 * task of their own. Pure data: the workflow sandbox imports it too.
 */
export const LEDGER_ROWS_HEADER = 'warden-ledger-rows';
