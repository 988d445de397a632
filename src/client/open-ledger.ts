import { openDatabase, type LedgerDatabase } from '../ledger/database';
import { Ledger } from '../ledger/ledger';
import type { RuntimeConfig } from '../runtime/config';

/** Opens the ledger: DATABASE_URL, or the embedded PostgreSQL under the Warden home's `postgres/`; `announce` shows its first-use steps. */
export async function openLedger(config: RuntimeConfig, log: (message: string) => void, announce?: (message: string) => void): Promise<{ ledger: Ledger; database: LedgerDatabase }> {
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.postgresDataDir, log, ...(announce ? { announce } : {}) });
  return { ledger: new Ledger(database.pool), database };
}
