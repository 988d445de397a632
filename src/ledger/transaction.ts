import type pg from 'pg';

/** Options of a transaction. */
export interface TransactionOptions {
  /**
   * false lets the commit return before its WAL reaches the disk (for state whose last instants
   * may be lost in a database crash, not for ledger records).
   */
  readonly synchronousCommit?: boolean;
}

/** The statement that opens a transaction with these options (one round trip for both parts). */
export function beginStatement(options: TransactionOptions = {}): string {
  return options.synchronousCommit === false ? 'BEGIN; SET LOCAL synchronous_commit TO off' : 'BEGIN';
}

/**
 * Runs `body` (which opens and commits its own transaction) on one pooled client: ROLLBACK when it
 * throws, and the client is dropped if even that fails, so no half-open transaction goes back to
 * the pool.
 */
export async function onPooledClient<T>(pool: pg.Pool, body: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    return await body(client);
  } catch (error) {
    await client.query('ROLLBACK').catch((rollbackError: unknown) => {
      broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
    });
    throw error;
  } finally {
    client.release(broken);
  }
}

/** BEGIN … COMMIT on one pooled client; ROLLBACK on error ({@link onPooledClient}). */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
  return onPooledClient(pool, async (client) => {
    await client.query(beginStatement(options));
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  });
}
