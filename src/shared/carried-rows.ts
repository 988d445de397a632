/**
 * The field of an activity's first argument in which the workflow sends ledger rows ahead: rows
 * it owes the ledger before its next step acts (a stage's outcome, the next stage's start). The
 * worker writes them before anything else the attempt does and hands the activity its argument
 * without them (src/workers/interceptors/carried-rows.ts), so they cost no local activity, and
 * no workflow task waits for them. Pure data: workflow code imports it too.
 */
export const CARRIED_ROWS_FIELD = 'ledgerRowsFirst';
