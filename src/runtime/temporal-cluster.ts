/**
 * Warden's real Temporal server: its two PostgreSQL databases set up with the schema tool, the
 * server started from the config template kept in the repository (cluster/temporal-server.yaml),
 * and the namespace registered with Warden's search attributes. `npm run cluster:up`
 * (src/runtime/cluster.ts) and the tests put these steps together.
 */
import { execFile, spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import Long from 'long';
import pg from 'pg';
import { isAlive } from '../shared/build-lock';
import { findFreePort, isPortFree, LOOPBACK } from '../shared/ports';
import { ensureSearchAttributes, fileTail } from './dev-server';
import type { TemporalServerInstall } from './temporal-server-install';

const execFileAsync = promisify(execFile);

/** The config template and the dynamic config the server starts from, kept in the repository. */
export const CLUSTER_FILES = {
  serverConfig: path.join(__dirname, '..', '..', 'cluster', 'temporal-server.yaml'),
  dynamicConfig: path.join(__dirname, '..', '..', 'cluster', 'temporal-dynamic-config.yaml'),
} as const;

/** The schema tool's plugin for PostgreSQL 12 and later (the server config names the same). */
export const POSTGRES_PLUGIN = 'postgres12';
/** The frontend port a Temporal server listens on unless told otherwise. */
export const DEFAULT_FRONTEND_PORT = 7233;
/** How long a start may take before it counts as failed: the first start creates the shards. */
const START_TIMEOUT_MS = 180_000;
const STOP_GRACE_MS = 20_000;
/** How long Temporal keeps a closed workflow's history in a namespace this module registers. */
export const RETENTION_DAYS = 7;
const RETENTION_SECONDS = RETENTION_DAYS * 24 * 3600;
/** The server's two databases, as `cluster:up` and docker-compose.temporal.yml name them. */
export const TEMPORAL_DATABASES = { database: 'temporal', visibilityDatabase: 'temporal_visibility' } as const;

/** The ports of the server's four services: the frontend is the one clients use. */
export interface ClusterPorts {
  readonly frontend: number;
  readonly frontendHttp: number;
  readonly frontendMembership: number;
  readonly history: number;
  readonly historyMembership: number;
  readonly matching: number;
  readonly matchingMembership: number;
  readonly worker: number;
  readonly workerMembership: number;
}

/**
 * The server stores each service's membership port in a PostgreSQL smallint, so those must be
 * below 32768, where the OS's own free ports (the ephemeral range) usually are not.
 */
const MEMBERSHIP_PORT_RANGE = [20000, 32767] as const;

async function freeMembershipPort(taken: Set<number>): Promise<number> {
  const [low, high] = MEMBERSHIP_PORT_RANGE;
  for (let tries = 0; tries < 500; tries++) {
    const port = low + Math.floor(Math.random() * (high - low + 1));
    if (!taken.has(port) && (await isPortFree(port))) {
      taken.add(port);
      return port;
    }
  }
  throw new Error(`no free port from ${low} to ${high} for the Temporal server's membership ports`);
}

/** `frontend` as given (0 = a free one), every other port a free one. */
export async function choosePorts(frontend: number): Promise<ClusterPorts> {
  const free = findFreePort;
  const taken = new Set<number>();
  const membership = (): Promise<number> => freeMembershipPort(taken);
  return {
    frontend: frontend === 0 ? await free() : frontend,
    frontendHttp: await free(),
    frontendMembership: await membership(),
    history: await free(),
    historyMembership: await membership(),
    matching: await free(),
    matchingMembership: await membership(),
    worker: await free(),
    workerMembership: await membership(),
  };
}

/** Where the server's databases are and who it connects as. */
export interface TemporalDatabaseSettings {
  /** A URL whose user may create roles and databases (the embedded PostgreSQL's superuser). */
  readonly adminUrl: string;
  /** The role the server connects as; created (or its password set) by {@link setUpTemporalDatabases}. */
  readonly user: string;
  readonly password: string;
  readonly database: string;
  readonly visibilityDatabase: string;
}

/** Replaces each `{{NAME}}`; a placeholder without a value, or a value without a placeholder, is an error. */
export function renderTemplate(template: string, values: Readonly<Record<string, string | number>>): string {
  const used = new Set<string>();
  const rendered = template.replace(/\{\{([A-Z_]+)\}\}/g, (_match, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`the config template names {{${name}}}, which has no value`);
    used.add(name);
    return String(value);
  });
  const unused = Object.keys(values).filter((name) => !used.has(name));
  if (unused.length) throw new Error(`the config template has no placeholder for ${unused.join(', ')}`);
  return rendered;
}

/** The server config for these ports and databases, from the repository's template. */
export async function renderServerConfig(ports: ClusterPorts, db: TemporalDatabaseSettings, dynamicConfigFile: string = CLUSTER_FILES.dynamicConfig): Promise<string> {
  const admin = new URL(db.adminUrl);
  return renderTemplate(await readFile(CLUSTER_FILES.serverConfig, 'utf8'), {
    DATABASE: db.database,
    VISIBILITY_DATABASE: db.visibilityDatabase,
    DATABASE_ADDRESS: `${admin.hostname}:${admin.port || 5432}`,
    DATABASE_USER: db.user,
    DATABASE_PASSWORD: db.password,
    FRONTEND_PORT: ports.frontend,
    FRONTEND_HTTP_PORT: ports.frontendHttp,
    FRONTEND_MEMBERSHIP_PORT: ports.frontendMembership,
    HISTORY_PORT: ports.history,
    HISTORY_MEMBERSHIP_PORT: ports.historyMembership,
    MATCHING_PORT: ports.matching,
    MATCHING_MEMBERSHIP_PORT: ports.matchingMembership,
    WORKER_PORT: ports.worker,
    WORKER_MEMBERSHIP_PORT: ports.workerMembership,
    DYNAMIC_CONFIG: path.resolve(dynamicConfigFile),
  });
}

async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/**
 * Creates the server's role and its two databases where missing, then brings both schemas up to
 * date with the schema tool (`setup-schema` on a fresh database, `update-schema` always, which
 * does nothing on a current one). Safe to run again.
 */
export async function setUpTemporalDatabases(install: TemporalServerInstall, db: TemporalDatabaseSettings, log: (message: string) => void): Promise<void> {
  await withClient(db.adminUrl, async (client) => {
    const role = client.escapeIdentifier(db.user);
    const password = client.escapeLiteral(db.password);
    const exists = await client.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [db.user]);
    await client.query(exists.rowCount ? `ALTER ROLE ${role} WITH LOGIN PASSWORD ${password}` : `CREATE ROLE ${role} WITH LOGIN PASSWORD ${password}`);
    for (const name of [db.database, db.visibilityDatabase]) {
      const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
      if (found.rowCount) continue;
      log(`creating the database ${name}`);
      await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)} OWNER ${role}`);
    }
  });
  const admin = new URL(db.adminUrl);
  const toolEnv = {
    ...process.env,
    SQL_PLUGIN: POSTGRES_PLUGIN,
    SQL_HOST: admin.hostname,
    SQL_PORT: admin.port || '5432',
    SQL_USER: db.user,
    // In the environment, not the command line, where `ps` would show it.
    SQL_PASSWORD: db.password,
  };
  const tool = (database: string, args: readonly string[]): Promise<unknown> =>
    execFileAsync(install.sqlTool, ['--database', database, ...args], { env: toolEnv }).catch((error: unknown) => {
      const stderr = String((error as { stderr?: unknown }).stderr ?? '').trim();
      throw new Error(`temporal-sql-tool ${args[0]} on ${database} failed: ${stderr.split('\n').slice(-3).join(' | ') || String(error)}`);
    });
  for (const step of schemaToolSteps(install.postgresSchema, db)) {
    log(`${step.args[0]} on ${step.database}`);
    await tool(step.database, step.args);
  }
}

/**
 * The schema tool's runs that bring both databases to the server's schema: `setup-schema -v 0.0`
 * creates the version tables (a no-op on a set-up database), `update-schema` applies every
 * versioned step not applied yet. docker-compose.temporal.yml runs the same (test/compose.test.ts).
 */
export function schemaToolSteps(postgresSchema: string, db: Pick<TemporalDatabaseSettings, 'database' | 'visibilityDatabase'>): Array<{ database: string; args: string[] }> {
  return (
    [
      [db.database, 'temporal'],
      [db.visibilityDatabase, 'visibility'],
    ] as const
  ).flatMap(([database, schema]) => [
    { database, args: ['setup-schema', '-v', '0.0'] },
    { database, args: ['update-schema', '-d', path.join(postgresSchema, schema, 'versioned')] },
  ]);
}

function tcpOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: LOOPBACK, port });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export interface TemporalServerProcess {
  /** host:port of the frontend. */
  readonly address: string;
  readonly pid: number;
}

/**
 * Starts `temporal-server --config-file CONFIG start` detached (it outlives this process; its
 * output goes to `logFile`), and resolves once the frontend answers. Rejects with the log's tail
 * when the server exits first.
 */
export async function startTemporalServer(opts: { install: TemporalServerInstall; configFile: string; frontendPort: number; logFile: string; log?: (message: string) => void }): Promise<TemporalServerProcess> {
  const log = opts.log ?? (() => undefined);
  await mkdir(path.dirname(opts.logFile), { recursive: true });
  const address = `${LOOPBACK}:${opts.frontendPort}`;
  const logFd = openSync(opts.logFile, 'a');
  const child = spawn(opts.install.server, ['--config-file', path.resolve(opts.configFile), '--allow-no-auth', 'start'], {
    cwd: path.dirname(opts.logFile),
    detached: true,
    stdio: ['ignore', logFd, logFd],
  });
  closeSync(logFd);
  child.unref();
  let exited: string | undefined;
  child.once('exit', (code, signal) => (exited = code !== null ? `code ${code}` : `signal ${signal}`));
  child.once('error', (error) => (exited = error.message));
  log(`starting the Temporal server (pid ${child.pid}) at ${address}; its log is ${opts.logFile}`);
  const deadline = Date.now() + START_TIMEOUT_MS;
  let lastError: unknown;
  for (;;) {
    if (exited) throw new Error(`the Temporal server exited while starting (${exited}); the end of its log (${opts.logFile}):\n${(await fileTail(opts.logFile)).trim().slice(-1500)}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`the Temporal server at ${address} did not answer within ${START_TIMEOUT_MS / 1000} s (${String(lastError)}); see ${opts.logFile}`);
    }
    if (await tcpOpen(opts.frontendPort)) {
      const connection = Connection.lazy({ address, connectTimeout: 2000 });
      try {
        await connection.ensureConnected();
        await connection.withDeadline(Date.now() + 2000, () => connection.workflowService.getSystemInfo({}));
        return { address, pid: child.pid! };
      } catch (error) {
        lastError = error;
      } finally {
        await connection.close();
      }
    }
    await sleep(250);
  }
}

/** SIGTERM, SIGKILL after a grace period; resolves once the process is gone. */
export async function stopProcess(pid: number, log: (message: string) => void = () => undefined): Promise<void> {
  if (!isAlive(pid)) return;
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + STOP_GRACE_MS;
  let killed = false;
  while (isAlive(pid)) {
    if (!killed && Date.now() > deadline) {
      log(`pid ${pid} did not stop after SIGTERM; sending SIGKILL`);
      process.kill(pid, 'SIGKILL');
      killed = true;
    }
    await sleep(100);
  }
}

const ALREADY_EXISTS = 6;
const NOT_FOUND = 5;

/**
 * Registers `namespace` if the server lacks it, waits until the frontend serves it (it learns of
 * a new namespace on its cache refresh), and registers Warden's search attributes.
 */
export async function prepareNamespace(address: string, namespace: string, log: (message: string) => void): Promise<void> {
  const connection = await Connection.connect({ address });
  try {
    try {
      await connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: { seconds: Long.fromNumber(RETENTION_SECONDS) } });
      log(`registered the namespace ${namespace}`);
    } catch (error) {
      if ((error as { code?: number }).code !== ALREADY_EXISTS) throw error;
    }
    const deadline = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      try {
        await connection.workflowService.listWorkflowExecutions({ namespace, pageSize: 1 });
        break;
      } catch (error) {
        if ((error as { code?: number }).code !== NOT_FOUND || Date.now() > deadline) throw error;
        await sleep(500);
      }
    }
    await ensureSearchAttributes(connection, namespace, log);
  } finally {
    await connection.close();
  }
}

/** Writes a file only its owner reads (the rendered config holds the database password). */
export async function writePrivateFile(file: string, text: string): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, text, { mode: 0o600 });
  await chmod(file, 0o600);
}
