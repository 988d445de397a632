import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type pg from 'pg';

/** Where the ordered `NNN_name.sql` files live; read from the source tree at run time (tsx, no build). */
const MIGRATIONS_DIR = path.join(__dirname, 'migrations');

/** pg_advisory_xact_lock key shared by every Warden process migrating the same database ('WMIG'). */
const MIGRATION_LOCK_KEY = 0x574d4947;

const MIGRATION_FILE = /^(\d{3,})_[a-z0-9_]+\.sql$/;

interface Migration {
  /** File name without `.sql`, e.g. `001_initial`; the order is the name's order. */
  readonly name: string;
  readonly sql: string;
  /** sha256 of the file, so a migration edited after it was applied is noticed. */
  readonly checksum: string;
}

/** The migrations shipped with Warden, in the order they apply. */
export async function loadMigrations(dir: string = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const migrations: Migration[] = [];
  for (const file of files) {
    if (!MIGRATION_FILE.test(file)) throw new Error(`migration file ${file} in ${dir} is not named NNN_lowercase_name.sql`);
    const sql = await readFile(path.join(dir, file), 'utf8');
    migrations.push({ name: file.slice(0, -'.sql'.length), sql, checksum: createHash('sha256').update(sql).digest('hex') });
  }
  return migrations;
}

/**
 * Applies the migrations that are not yet in `schema_migrations`, each in its own transaction,
 * under a transaction-level advisory lock so that processes starting together apply each one
 * exactly once. Throws if an applied migration's file has changed since. Returns the names this
 * call applied (empty when the schema was already current).
 */
export async function migrate(pool: pg.Pool, dir: string = MIGRATIONS_DIR): Promise<string[]> {
  const migrations = await loadMigrations(dir);
  const client = await pool.connect();
  const applied: string[] = [];
  let failure: Error | undefined;
  try {
    const done = await inTransaction(client, async () => {
      await client.query(`
        CREATE TABLE IF NOT EXISTS schema_migrations (
          name       text        PRIMARY KEY,
          checksum   text        NOT NULL,
          applied_at timestamptz NOT NULL DEFAULT now()
        )`);
      const rows = await client.query<{ name: string; checksum: string }>('SELECT name, checksum FROM schema_migrations');
      return new Map(rows.rows.map((r) => [r.name, r.checksum]));
    });
    for (const [name, checksum] of done) {
      const shipped = migrations.find((m) => m.name === name);
      // A database migrated by a newer Warden may hold names we do not know; that is not ours to judge.
      if (shipped && shipped.checksum !== checksum) {
        throw new Error(`migration ${name} has changed since it was applied to this database; add a new migration instead of editing it`);
      }
    }
    for (const migration of migrations) {
      if (done.has(migration.name)) continue;
      const ran = await inTransaction(client, async () => {
        // Another process may have applied it while we waited for the lock.
        const exists = await client.query('SELECT 1 FROM schema_migrations WHERE name = $1', [migration.name]);
        if (exists.rowCount) return false;
        try {
          await client.query(migration.sql);
        } catch (error) {
          throw new Error(`migration ${migration.name} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
        }
        await client.query('INSERT INTO schema_migrations (name, checksum) VALUES ($1, $2)', [migration.name, migration.checksum]);
        return true;
      });
      if (ran) applied.push(migration.name);
    }
    return applied;
  } catch (error) {
    failure = error instanceof Error ? error : new Error(String(error));
    throw error;
  } finally {
    // A client that failed mid-transaction is discarded rather than reused.
    client.release(failure);
  }
}

/** BEGIN, take the migration lock, run `fn`, COMMIT; ROLLBACK on any error. */
async function inTransaction<T>(client: pg.PoolClient, fn: () => Promise<T>): Promise<T> {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    const result = await fn();
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}
