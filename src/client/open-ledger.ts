import { EmbeddedServerDown, openDatabase, type LedgerDatabase } from '../ledger/database';
import { Ledger } from '../ledger/ledger';
import type { RuntimeConfig } from '../runtime/config';
import { UserError } from '../shared/errors';

/**
 * Opens the ledger for a command that does not own the embedded PostgreSQL (status, audit,
 * costs, report, ladder, stop…): DATABASE_URL, or the embedded server that `warden dev`,
 * `warden worker`, `warden run` or the web app runs. With that server down it says so and how
 * to start it, rather than start one that would outlive the command or go down under the next
 * worker.
 */
export async function openLedger(config: RuntimeConfig, log: (message: string) => void): Promise<{ ledger: Ledger; database: LedgerDatabase }> {
  return ledgerOn(await joinDatabase(config, { log }));
}

/** The ledger's database as openLedger opens it; `migrate: false` leaves the schema as it is (`warden db migrate`). */
export async function joinDatabase(config: RuntimeConfig, options: { readonly log?: (message: string) => void; readonly migrate?: boolean }): Promise<LedgerDatabase> {
  try {
    return await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.postgresDataDir, ...options, startServer: false });
  } catch (error) {
    if (!(error instanceof EmbeddedServerDown)) throw error;
    throw new UserError(`${error.message}: start it with \`warden dev\` (or \`warden worker\`) in another terminal, or set DATABASE_URL; this command does not start one`, 1);
  }
}

/**
 * Opens the ledger for a command that owns the embedded PostgreSQL (`warden dev`, `warden worker`,
 * `warden run`, the web app): started if it is not running; `announce` shows its first-use steps.
 */
export async function openOwnedLedger(config: RuntimeConfig, log: (message: string) => void, announce?: (message: string) => void): Promise<{ ledger: Ledger; database: LedgerDatabase }> {
  return ledgerOn(await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.postgresDataDir, log, ...(announce ? { announce } : {}) }));
}

function ledgerOn(database: LedgerDatabase): { ledger: Ledger; database: LedgerDatabase } {
  return { ledger: new Ledger(database.pool), database };
}
