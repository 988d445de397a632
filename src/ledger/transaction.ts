import type pg from 'pg';

/**
 * BEGIN … COMMIT on one pooled client; ROLLBACK on error, and the client is dropped if even that
 * fails. `synchronousCommit: false` lets the commit return before its WAL reaches the disk (for
 * state whose last instants may be lost in a database crash, not for ledger records).
 */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>, options: { readonly synchronousCommit?: boolean } = {}): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    // Both statements in one round trip.
    await client.query(options.synchronousCommit === false ? 'BEGIN; SET LOCAL synchronous_commit TO off' : 'BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch((rollbackError: unknown) => {
      broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
    });
    throw error;
  } finally {
    client.release(broken);
  }
}
