import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { closeSync, fstatSync, openSync } from 'node:fs';
import { mkdir, open } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { SEARCH_ATTRIBUTE_DEFINITIONS } from '../shared/search-attributes';
import { findFreePort, isPortFree } from '../shared/ports';

export interface DevServerOptions {
  /** Absolute path of the `temporal` CLI binary. */
  readonly cliPath: string;
  /** SQLite file to persist to; undefined keeps everything in memory. */
  readonly dbFile?: string;
  /** Frontend gRPC port; default 7233; 0 picks a free port. */
  readonly port?: number;
  /** Web UI port; default port+1000; 0 picks a free port; false turns the UI off. */
  readonly uiPort?: number | false;
  /** Namespace to create and wait for; default 'default'. */
  readonly namespace?: string;
  /** File that receives the server's stdout and stderr (appended); otherwise they are dropped. */
  readonly logFile?: string;
  readonly log?: (m: string) => void;
}

export interface DevServer {
  /** host:port of the frontend. */
  readonly address: string;
  readonly namespace: string;
  /** Set when the UI is on. */
  readonly uiUrl?: string;
  readonly pid: number;
  /** SIGTERM, then SIGKILL after 5 s; resolves once the process has exited. Idempotent. */
  stop(): Promise<void>;
}

const HOST = '127.0.0.1';
const READY_TIMEOUT_MS = 60_000;
const STOP_GRACE_MS = 5_000;
const TAIL_BYTES = 4096;
const PANIC_LINE_BYTES = 500;
const PORT_ATTEMPTS = 3;

/** CLI type names (`--search-attribute NAME=Keyword`) to the SDK's SearchAttributeType names. */
const CLI_TO_SDK_TYPE = {
  Text: 'TEXT',
  Keyword: 'KEYWORD',
  Int: 'INT',
  Double: 'DOUBLE',
  Bool: 'BOOL',
  Datetime: 'DATETIME',
  KeywordList: 'KEYWORD_LIST',
} as const;



function tcpOpen(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

function splitAddress(address: string): { host: string; port: number } | undefined {
  const m = /^\[?([^\]]*?)\]?:(\d+)$/.exec(address);
  return m ? { host: m[1]!, port: Number(m[2]) } : undefined;
}

/**
 * True if a Temporal frontend answers at `address` (host:port) within `timeoutMs` (default 3 s).
 * A plain TCP probe first makes the common "nothing listens" case fail fast.
 */
export async function isTemporalReachable(address: string, timeoutMs = 3000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  const parts = splitAddress(address);
  if (parts && !(await tcpOpen(parts.host, parts.port, timeoutMs))) return false;
  const connection = Connection.lazy({ address, connectTimeout: Math.max(1, deadline - Date.now()) });
  try {
    await connection.ensureConnected();
    return true;
  } catch {
    return false;
  } finally {
    await connection.close();
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits for `promise` at most `ms`, leaving no timer behind either way. */
async function settledWithin(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([promise, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** The first `panic: …` line of a Go program's output (cut to a line's length), if any. */
export function firstPanicLine(output: string): string | undefined {
  return /^panic: .*$/m.exec(output)?.[0].slice(0, PANIC_LINE_BYTES);
}

/** What was written to `file` from byte `start` on (at most 1 MB of it), '' when unreadable. */
function fileFrom(file: string, start: number): Promise<string> {
  return fileRange(file, (size) => ({ position: start, length: Math.max(0, Math.min(size - start, 1024 * 1024)) }));
}

/** Reads the last bytes of a file, for error messages. */
export function fileTail(file: string): Promise<string> {
  return fileRange(file, (size) => ({ position: size - Math.min(size, TAIL_BYTES), length: Math.min(size, TAIL_BYTES) }));
}

/** The part of `file` that `pick` chooses from its size, as text; '' when unreadable. */
async function fileRange(file: string, pick: (size: number) => { position: number; length: number }): Promise<string> {
  try {
    const handle = await open(file, 'r');
    try {
      const { position, length } = pick((await handle.stat()).size);
      const buffer = Buffer.alloc(length);
      await handle.read(buffer, 0, length, position);
      return buffer.toString('utf8');
    } finally {
      await handle.close();
    }
  } catch {
    return '';
  }
}

async function waitForExit(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return true;
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** Connects and asks for the namespace, retrying until it answers or `deadline`. */
async function waitUntilReady(
  port: number,
  namespace: string,
  deadline: number,
  exited: () => string | undefined,
): Promise<Connection> {
  const address = `${HOST}:${port}`;
  let lastError: unknown = new Error('the port never opened');
  while (Date.now() < deadline) {
    const why = exited();
    if (why) throw new Error(why);
    // Cheap TCP probe first: the port stays closed for most of the start-up.
    if (!(await tcpOpen(HOST, port, 1000))) {
      await sleep(100);
      continue;
    }
    const attemptDeadline = Math.min(deadline, Date.now() + 2000);
    const connection = Connection.lazy({ address, connectTimeout: Math.max(1, attemptDeadline - Date.now()) });
    try {
      await connection.ensureConnected();
      await connection.withDeadline(attemptDeadline, () => connection.workflowService.describeNamespace({ namespace }));
      return connection;
    } catch (err) {
      lastError = err;
      await connection.close();
    }
    await sleep(250);
  }
  const why = exited();
  if (why) throw new Error(why);
  throw new Error(
    `Temporal dev server at ${address} was not ready within ${READY_TIMEOUT_MS / 1000} s: ` +
      (lastError instanceof Error ? lastError.message : String(lastError)),
  );
}

/**
 * Registers any of Warden's search attributes the namespace lacks. Needed because the CLI applies
 * `--search-attribute` only when it creates the namespace: on an existing --db-filename it
 * silently ignores attributes that were added since.
 */
export async function ensureSearchAttributes(connection: Connection, namespace: string, log: (m: string) => void): Promise<void> {
  const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
  const existing = customAttributes ?? {};
  const missing: Record<string, number> = {};
  for (const [name, cliType] of Object.entries(SEARCH_ATTRIBUTE_DEFINITIONS)) {
    const wanted = encodeSearchAttributeIndexedValueType(CLI_TO_SDK_TYPE[cliType]);
    if (wanted === undefined) throw new Error(`Unknown search attribute type ${cliType} for ${name}`);
    const have = existing[name];
    if (have === undefined || have === null) {
      missing[name] = wanted;
    } else if (have !== wanted) {
      throw new Error(
        `Search attribute ${name} is registered in namespace ${namespace} with another type than ${cliType}; ` +
          'use a fresh database file',
      );
    }
  }
  const names = Object.keys(missing);
  if (names.length === 0) return;
  log(`Registering search attributes ${names.join(', ')} in namespace ${namespace}`);
  await connection.operatorService.addSearchAttributes({ namespace, searchAttributes: missing });
}

/**
 * The server throttles its history task readers to 20 polls a second, so every workflow task
 * waited ~50 ms before it was dispatched (a six-activity workflow took 350 ms, 50 ms without the
 * throttle). One process on one machine has the headroom to poll as fast as tasks come.
 *
 * Eager start and eager activity dispatch skip a trip through the task queue: an intent started
 * by a process whose worker polls its queue gets its first workflow task in the start's answer,
 * and an activity on the workflow's own queue comes back in the answer to the workflow task that
 * scheduled it. The server still records each in the history before the worker has it; nothing is
 * skipped. (Eager start is on by default in the server the CLI runs; set so it stays on.)
 */
export const DEV_SERVER_DYNAMIC_CONFIG: Readonly<Record<string, number | boolean>> = {
  'history.transferProcessorMaxPollRPS': 1000,
  'history.timerProcessorMaxPollRPS': 1000,
  'history.visibilityProcessorMaxPollRPS': 1000,
  'system.enableEagerWorkflowStart': true,
  'system.enableActivityEagerExecution': true,
};

/**
 * Starts `temporal server start-dev` on 127.0.0.1 with Warden's search attributes, and resolves
 * once the namespace answers (60 s at most). Rejects with the server's output tail if it exits
 * early. The returned handle's `stop()` ends the process.
 */
export async function startDevServer(opts: DevServerOptions): Promise<DevServer> {
  const anyPort = opts.port === 0 || opts.uiPort === 0;
  // A port found free can be taken by another program (or another server being started beside
  // this one) before the server binds it: with any port allowed, try other ones rather than fail.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startDevServerOnce(opts);
    } catch (error) {
      const taken = error instanceof Error && /\bin use\b/i.test(error.message);
      if (!taken || !anyPort || attempt >= PORT_ATTEMPTS) throw error;
      opts.log?.(`a port was taken before the Temporal dev server could bind it; trying other ports`);
    }
  }
}

async function startDevServerOnce(opts: DevServerOptions): Promise<DevServer> {
  const log = opts.log ?? (() => undefined);
  const namespace = opts.namespace ?? 'default';
  const port = opts.port === undefined ? 7233 : opts.port === 0 ? await findFreePort() : opts.port;
  let uiPort: number | undefined;
  if (opts.uiPort !== false) {
    uiPort = opts.uiPort === undefined ? port + 1000 : opts.uiPort === 0 ? await findFreePort() : opts.uiPort;
  }
  for (const p of uiPort === undefined ? [port] : [port, uiPort]) {
    if (!(await isPortFree(p))) throw new Error(`Cannot start the Temporal dev server: port ${p} on ${HOST} is in use`);
  }

  const args = ['server', 'start-dev', '--ip', HOST, '--port', String(port)];
  if (uiPort === undefined) args.push('--headless');
  else args.push('--ui-port', String(uiPort));
  args.push('--namespace', namespace);
  if (opts.dbFile) {
    const dbFile = path.resolve(opts.dbFile);
    await mkdir(path.dirname(dbFile), { recursive: true });
    args.push('--db-filename', dbFile);
  }
  args.push('--log-level', 'warn');
  for (const [key, value] of Object.entries(DEV_SERVER_DYNAMIC_CONFIG)) args.push('--dynamic-config-value', `${key}=${value}`);
  for (const [name, type] of Object.entries(SEARCH_ATTRIBUTE_DEFINITIONS)) {
    args.push('--search-attribute', `${name}=${type}`);
  }

  // With a log file the child writes to it directly; without one we keep only a stderr tail.
  let logFd: number | undefined;
  let logStart = 0;
  if (opts.logFile) {
    await mkdir(path.dirname(path.resolve(opts.logFile)), { recursive: true });
    logFd = openSync(opts.logFile, 'a');
    logStart = fstatSync(logFd).size;
  }
  const address = `${HOST}:${port}`;
  log(`Starting Temporal dev server at ${address}${opts.dbFile ? ` (db ${opts.dbFile})` : ' (in memory)'}`);
  let child: ChildProcess;
  try {
    child = spawn(opts.cliPath, args, {
      stdio: ['ignore', logFd ?? 'ignore', logFd ?? 'pipe'],
      // Its own process group: a terminal's Ctrl-C meant for Warden does not kill the server
      // under it; Warden stops it (stop(), or at exit) once its worker is down.
      detached: true,
    });
  } finally {
    if (logFd !== undefined) closeSync(logFd);
  }

  let stderrTail = '';
  // The first line of a panic: a stack trace follows it, longer than the tail kept.
  let panicLine: string | undefined;
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    panicLine ??= firstPanicLine(stderrTail.slice(-PANIC_LINE_BYTES) + chunk);
    stderrTail = (stderrTail + chunk).slice(-TAIL_BYTES);
  });
  // 'close' fires once the stdio pipes are drained, so the stderr tail is complete by then.
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  let spawnError: Error | undefined;
  child.once('error', (err) => {
    spawnError = err;
  });
  // Do not leave an orphaned server behind when this process exits without calling stop().
  const killOnExit = (): void => {
    child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);

  const exitReason = (): string | undefined => {
    if (spawnError) return `Could not run ${opts.cliPath}: ${spawnError.message}`;
    if (child.exitCode === null && child.signalCode === null) return undefined;
    const how = child.exitCode !== null ? `code ${child.exitCode}` : `signal ${child.signalCode}`;
    return `Temporal dev server exited early (${how})`;
  };

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      if (!(await waitForExit(child, 0))) {
        child.kill('SIGTERM');
        if (!(await waitForExit(child, STOP_GRACE_MS))) {
          log('Temporal dev server did not stop after SIGTERM; sending SIGKILL');
          child.kill('SIGKILL');
          await waitForExit(child, STOP_GRACE_MS);
        }
      }
      process.removeListener('exit', killOnExit);
    })();
    return stopping;
  };

  try {
    const connection = await waitUntilReady(port, namespace, Date.now() + READY_TIMEOUT_MS, exitReason);
    try {
      await ensureSearchAttributes(connection, namespace, log);
    } finally {
      await connection.close();
    }
  } catch (err) {
    await stop();
    await settledWithin(closed, 1000);
    const tail = (opts.logFile ? await fileTail(opts.logFile) : stderrTail).trim();
    // A port the server picked for itself (HTTP, metrics, its services) can be taken under it: the
    // panic says so, and startDevServer then tries again (`in use`).
    const panic = panicLine ?? (opts.logFile ? firstPanicLine(await fileFrom(opts.logFile, logStart)) : undefined);
    const message = `${err instanceof Error ? err.message : String(err)}${panic ? `: ${panic}` : ''}`;
    throw new Error(tail ? `${message}\n--- server output (tail) ---\n${tail}` : message, { cause: err });
  }

  const uiUrl = uiPort === undefined ? undefined : `http://${HOST}:${uiPort}`;
  log(`Temporal dev server ready at ${address}${uiUrl ? `, UI at ${uiUrl}` : ''}`);
  return { address, namespace, uiUrl, pid: child.pid ?? -1, stop };
}
