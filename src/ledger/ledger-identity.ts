import type pg from 'pg';

/**
 * Which ledger a database is, as anchors name it: its database's name and object id. Two Warden
 * setups whose workers share one Temporal namespace (test worlds, a staging ledger) each verify
 * against their own anchors only.
 */
export async function ledgerIdentity(pool: pg.Pool): Promise<string> {
  const { rows } = await pool.query<{ ledger: string }>("SELECT current_database() || '/' || oid::text AS ledger FROM pg_database WHERE datname = current_database()");
  return rows[0]!.ledger;
}
