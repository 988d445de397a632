import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { claimServer, liveOwner, releaseServer } from './embedded-owner';
import { ensureEmbeddedServer, findRunningServer } from './embedded-server';
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
   * Ends the pool. For the embedded server it then stops the server if this database owns it
   * (started it, see embedded-owner.ts) or its owner has let go or gone, and no other client is
   * still connected (another Warden process sharing it). Idempotent.
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
  /** The first-use steps a person waits through (installing the embedded PostgreSQL, initialising its data); default: `log`. */
  readonly announce?: (message: string) => void;
  /** false: leave the schema as it is (`warden db migrate` applies and reports the migrations itself). Default true. */
  readonly migrate?: boolean;
  /**
   * false: join the embedded server only if it already runs, else throw {@link EmbeddedServerDown}.
   * Commands that only read pass false: a server they started would outlive them or stop under
   * the worker that starts next. Default true.
   */
  readonly startServer?: boolean;
}

/** The embedded PostgreSQL is not running, and the caller may not start it. */
export class EmbeddedServerDown extends Error {
  constructor(readonly dataDir: string) {
    super(`the ledger's embedded PostgreSQL (data in ${dataDir}) is not running`);
    this.name = 'EmbeddedServerDown';
  }
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
        throw new Error(`could not connect to the PostgreSQL server at ${url} (DATABASE_URL): ${errorMessage(error)}; is it running? (unset DATABASE_URL to use Warden's embedded one)`, { cause: error });
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

  const server =
    opts.startServer === false ? await joinRunningServer(opts.dataDir, log) : await ensureEmbeddedServer(opts.dataDir, opts.port, log, opts.announce ?? log);
  const serverUrl = withDatabase(server.url, LEDGER_DATABASE);
  let pool: pg.Pool | undefined;
  // Held open for the life of this LedgerDatabase, and opened again after a restart of the
  // server: it tells other processes' close() we are here, even while the pool is idle.
  const presence = new Presence(
    applicationName,
    () =>
      new pg.Client({
        connectionString: server.url,
        application_name: applicationName,
        connectionTimeoutMillis: LEDGER_TIMEOUTS.connectMs,
        query_timeout: LEDGER_TIMEOUTS.queryMs,
      }),
    log,
  );
  try {
    await createDatabaseIfMissing(await presence.open(), LEDGER_DATABASE);
    pool = createLedgerPool(serverUrl, applicationName, log);
    const applied = opts.migrate === false ? [] : await migrate(pool);
    if (applied.length) log(`ledger migrations applied: ${applied.join(', ')}`);
    if (server.startedHere) await claimServer(opts.dataDir, applicationName);
  } catch (error) {
    await pool?.end().catch(() => undefined);
    await presence.close();
    if (server.startedHere) await server.stop().catch(() => undefined);
    throw error;
  }

  const openPool = pool;
  let closed: Promise<void> | undefined;
  const close = async (): Promise<void> => {
    await openPool.end();
    // The owner lets go before it counts the others: a process closing at the same moment that
    // counts no one then finds no owner to leave the server to, and stops it. (Letting go after
    // counting, the owner could see that process still connected and leave the server to it
    // while that process, seeing the owner, left it to the owner: a server nobody stops.)
    await releaseServer(opts.dataDir, applicationName);
    const others = await presence.closeCountingOthers();
    if (others > 0) {
      // Whoever closes last stops it.
      log(`leaving the embedded PostgreSQL (pid ${server.pid}) running: ${others} other connection(s)`);
      return;
    }
    const owner = await liveOwner(opts.dataDir, applicationName);
    if (owner) {
      log(`leaving the embedded PostgreSQL (pid ${server.pid}) running: the Warden process that started it (pid ${owner.pid}) still runs`);
      return;
    }
    // The server running now: it may have been restarted since this database opened it.
    const running = (await findRunningServer(opts.dataDir).catch(() => undefined)) ?? server;
    log(`stopping the embedded PostgreSQL (pid ${running.pid})`);
    await running.stop();
  };
  return {
    pool: openPool,
    url: redactDatabaseUrl(serverUrl),
    embedded: true,
    server: { pid: server.pid, port: server.port, dataDir: opts.dataDir, startedHere: server.startedHere },
    close: () => (closed ??= close()),
  };
}

/** The server another Warden process runs on `dataDir`, never a new one. */
async function joinRunningServer(dataDir: string, log: (message: string) => void): Promise<Awaited<ReturnType<typeof ensureEmbeddedServer>>> {
  const running = await findRunningServer(dataDir);
  if (!running) throw new EmbeddedServerDown(dataDir);
  log(`using the embedded PostgreSQL already running on port ${running.port} (pid ${running.pid}, data in ${dataDir})`);
  return { ...running, startedHere: false };
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

/**
 * The one connection a LedgerDatabase keeps open on the embedded server so other processes can
 * count it: on the server's own `postgres` database, apart from the pools (on `warden`). When the
 * server restarts under it, it connects again (every 1 to 10 s) until closed.
 */
class Presence {
  private client: pg.Client | undefined;
  private closing = false;
  private retryMs = 1_000;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    /** Its application_name, which the pool of the same LedgerDatabase shares. */
    private readonly applicationName: string,
    private readonly connect: () => pg.Client,
    private readonly log: (message: string) => void,
  ) {}

  /** Connects (the first time: failures propagate). */
  async open(): Promise<pg.Client> {
    const client = this.connect();
    client.on('error', (error) => {
      this.log(`embedded PostgreSQL connection lost: ${error.message}`);
      this.lost(client);
    });
    client.on('end', () => this.lost(client));
    await client.connect();
    this.client = client;
    this.retryMs = 1_000;
    return client;
  }

  private lost(client: pg.Client): void {
    if (this.client !== client || this.closing) return;
    this.client = undefined;
    this.schedule();
  }

  private schedule(): void {
    if (this.closing || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.open().catch(() => {
        this.retryMs = Math.min(this.retryMs * 2, 10_000);
        this.schedule();
      });
    }, this.retryMs);
    this.timer.unref();
  }

  /**
   * How many other Warden processes the server has (their presence connections), then
   * disconnects. Processes closing at the same moment ignore each other (they rename themselves
   * first), so the last of them stops the server. Pool connections are not counted: a pool that
   * has just been ended may still show in pg_stat_activity for a moment, and two processes
   * closing together would each count the other's and both leave the server running.
   */
  async closeCountingOthers(): Promise<number> {
    this.closing = true;
    clearTimeout(this.timer);
    let others = 0;
    const client = this.client ?? (await this.open().catch(() => undefined));
    if (!client) return 0; // the server is already gone (or going): nothing to share
    try {
      await client.query(`SET application_name = '${CLOSING}'`);
      const result = await client.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND datname = current_database()
            AND coalesce(application_name, '') NOT IN ($1, '${CLOSING}')`,
        [this.applicationName],
      );
      others = result.rows[0]?.n ?? 0;
    } catch {
      // the server is already gone (or going)
    }
    await client.end().catch(() => undefined);
    return others;
  }

  async close(): Promise<void> {
    this.closing = true;
    clearTimeout(this.timer);
    await this.client?.end().catch(() => undefined);
  }
}
