import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { ensureEmbeddedServer } from './embedded-server';
import { migrate } from './migrate';
import { createLedgerPool, LEDGER_TIMEOUTS, redactDatabaseUrl } from './pool';

export { startEmbeddedPostgres, type EmbeddedPostgres } from './embedded-server';
export { LEDGER_TIMEOUTS, redactDatabaseUrl } from './pool';

const LEDGER_DATABASE = 'warden';
/** application_name of a connection whose process is closing its LedgerDatabase. */
const CLOSING = 'warden-closing';

/** An open ledger database; every Warden process that writes or reads the ledger holds one. */
export interface LedgerDatabase {
  readonly pool: pg.Pool;
  /** Where it is, with the password redacted: safe to print. */
  readonly url: string;
  /** True when this is the embedded server under the data folder rather than DATABASE_URL. */
  readonly embedded: boolean;
  /** The embedded server, when `embedded`. */
  readonly server?: { readonly pid: number; readonly port: number; readonly dataDir: string; readonly startedHere: boolean };
  /**
   * Ends the pool. For the embedded server it then stops the server unless another client is
   * still connected (another Warden process sharing it), whichever process started it. Idempotent.
   */
  close(): Promise<void>;
}

interface OpenDatabaseOptions {
  /** A PostgreSQL server to use (DATABASE_URL); without it the embedded server is used. */
  readonly databaseUrl?: string;
  /** The embedded server's folder, e.g. `<wardenHome>/postgres`. */
  readonly dataDir: string;
  /** Port for a newly started embedded server; default 5433, or a free one if 5433 is taken. */
  readonly port?: number;
  readonly log?: (message: string) => void;
  /** false: leave the schema as it is (`warden db migrate` applies and reports the migrations itself). Default true. */
  readonly migrate?: boolean;
}

/**
 * Opens the ledger database and brings its schema up to date. With `databaseUrl`, a pool on that
 * server. Without it, the embedded PostgreSQL whose data lives in `dataDir`: initialised on first
 * use, started if not running, or joined if another Warden process already runs it (found through
 * its postmaster.pid); the `warden` database is created if missing.
 */
export async function openDatabase(opts: OpenDatabaseOptions): Promise<LedgerDatabase> {
  const log = opts.log ?? (() => undefined);
  // A name per open database, so close() can tell its own connections from other processes'.
  const applicationName = `warden-${process.pid}-${randomBytes(3).toString('hex')}`;

  if (opts.databaseUrl) {
    const url = redactDatabaseUrl(opts.databaseUrl);
    const pool = createLedgerPool(opts.databaseUrl, applicationName, log);
    try {
      await pool.query('SELECT 1').catch((error: unknown) => {
        throw new Error(`could not connect to the PostgreSQL server at ${url} (DATABASE_URL): ${errorMessage(error)}`, { cause: error });
      });
      const applied = opts.migrate === false ? [] : await migrate(pool);
      if (applied.length) log(`ledger migrations applied: ${applied.join(', ')}`);
    } catch (error) {
      await pool.end().catch(() => undefined);
      throw error;
    }
    let closed: Promise<void> | undefined;
    return { pool, url, embedded: false, close: () => (closed ??= pool.end()) };
  }

  const server = await ensureEmbeddedServer(opts.dataDir, opts.port, log);
  const serverUrl = withDatabase(server.url, LEDGER_DATABASE);
  let pool: pg.Pool | undefined;
  // Held open for the life of this LedgerDatabase: it tells other processes' close() we are here,
  // even while the pool has let every idle connection go.
  const presence = new pg.Client({
    connectionString: server.url,
    application_name: applicationName,
    connectionTimeoutMillis: LEDGER_TIMEOUTS.connectMs,
    query_timeout: LEDGER_TIMEOUTS.queryMs,
  });
  presence.on('error', (error) => log(`embedded PostgreSQL connection lost: ${error.message}`));
  try {
    await presence.connect();
    await createDatabaseIfMissing(presence, LEDGER_DATABASE);
    pool = createLedgerPool(serverUrl, applicationName, log);
    const applied = opts.migrate === false ? [] : await migrate(pool);
    if (applied.length) log(`ledger migrations applied: ${applied.join(', ')}`);
  } catch (error) {
    await pool?.end().catch(() => undefined);
    await presence.end().catch(() => undefined);
    if (server.startedHere) await server.stop().catch(() => undefined);
    throw error;
  }

  const openPool = pool;
  let closed: Promise<void> | undefined;
  const close = async (): Promise<void> => {
    await openPool.end();
    let others = 0;
    try {
      // Processes closing at the same moment ignore each other, so the last of them stops the server.
      await presence.query(`SET application_name = '${CLOSING}'`);
      const result = await presence.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
            AND coalesce(application_name, '') NOT IN ($1, '${CLOSING}')`,
        [applicationName],
      );
      others = result.rows[0]?.n ?? 0;
    } catch {
      // The server is already gone (or going): nothing to share.
    }
    await presence.end().catch(() => undefined);
    if (others > 0) {
      log(`leaving the embedded PostgreSQL (pid ${server.pid}) running: ${others} other connection(s)`);
      return;
    }
    log(`stopping the embedded PostgreSQL (pid ${server.pid})`);
    await server.stop();
  };
  return {
    pool: openPool,
    url: redactDatabaseUrl(serverUrl),
    embedded: true,
    server: { pid: server.pid, port: server.port, dataDir: opts.dataDir, startedHere: server.startedHere },
    close: () => (closed ??= close()),
  };
}

async function createDatabaseIfMissing(client: pg.Client, name: string): Promise<void> {
  const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
  if (exists.rowCount) return;
  try {
    await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
  } catch (error) {
    // 42P04 duplicate_database; 23505 when two processes create it at the same moment.
    const code = (error as { code?: string }).code;
    if (code !== '42P04' && code !== '23505') throw error;
  }
}

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
