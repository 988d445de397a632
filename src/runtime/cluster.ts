/**
 * `npm run cluster:up` / `npm run cluster:down`: a real Temporal server (not the dev server) on
 * PostgreSQL for this machine, for trying Warden the way it runs in production. A script rather
 * than a `warden` subcommand: it builds a Go server and runs it beside Warden, which is setup
 * work for a checkout, not something an installed Warden does for its users.
 *
 *   up [--port N]      builds the server once, starts (or reuses) PostgreSQL, sets up the schema,
 *                      starts the server, registers the namespace and search attributes
 *   down [--wipe]      stops the server (and the PostgreSQL `up` started); --wipe drops its databases
 *
 * The PostgreSQL is the ledger's: DATABASE_URL's server when set, else Warden's embedded one
 * (<warden home>/postgres). State (pid, ports, rendered config, log) is in <warden home>/cluster/.
 */
import { randomBytes } from 'node:crypto';
import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { handOverServer } from '../ledger/embedded-owner';
import { findRunningServer, ensureEmbeddedServer } from '../ledger/embedded-server';
import { processStartTicks } from '../shared/process-identity';
import { isAlive } from '../shared/build-lock';
import { isPortFree } from '../shared/ports';
import { loadRuntimeConfig } from './config';
import { isTemporalReachable } from './dev-server';
import {
  choosePorts,
  DEFAULT_FRONTEND_PORT,
  prepareNamespace,
  renderServerConfig,
  setUpTemporalDatabases,
  startTemporalServer,
  stopProcess,
  TEMPORAL_DATABASES,
  writePrivateFile,
  type ClusterPorts,
  type TemporalDatabaseSettings,
} from './temporal-cluster';
import { ensureTemporalServer, TEMPORAL_SERVER_VERSION } from './temporal-server-install';

const { database: DATABASE, visibilityDatabase: VISIBILITY_DATABASE } = TEMPORAL_DATABASES;
const DATABASE_USER = 'temporal';
const UI_VERSION = '2.34.0';

/** What `up` leaves for the next `up` and for `down`. */
interface ClusterState {
  readonly pid: number;
  readonly ports: ClusterPorts;
  readonly namespace: string;
  /** Set when `up` started the embedded PostgreSQL (then `down` stops it). */
  readonly startedPostgresDataDir?: string;
}

interface ClusterPaths {
  readonly dir: string;
  readonly state: string;
  readonly config: string;
  readonly log: string;
  readonly password: string;
}

function clusterPaths(wardenHome: string): ClusterPaths {
  const dir = path.join(wardenHome, 'cluster');
  return {
    dir,
    state: path.join(dir, 'state.json'),
    config: path.join(dir, 'temporal-server.yaml'),
    log: path.join(dir, 'temporal-server.log'),
    password: path.join(dir, 'database-password'),
  };
}

async function readState(file: string): Promise<ClusterState | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as ClusterState;
  } catch {
    return undefined;
  }
}

const say = (message: string): void => void process.stderr.write(`[cluster] ${message}\n`);

class UsageError extends Error {}

function parseArgs(argv: readonly string[]): { command: 'up' | 'down'; port?: number; wipe: boolean } {
  const [command, ...rest] = argv;
  if (command !== 'up' && command !== 'down') throw new UsageError('usage: npm run cluster:up [-- --port N] | npm run cluster:down [-- --wipe]');
  let port: number | undefined;
  let wipe = false;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!;
    if (command === 'up' && arg === '--port') {
      const text = rest[++i] ?? '';
      port = Number(text);
      if (!/^\d+$/.test(text) || port < 1024 || port > 65535) throw new UsageError(`--port wants a port from 1024 to 65535, not "${text}"`);
    } else if (command === 'down' && arg === '--wipe') {
      wipe = true;
    } else {
      throw new UsageError(`unknown argument for cluster:${command}: ${arg}`);
    }
  }
  return { command, port, wipe };
}

/** The admin URL of the PostgreSQL the server's databases live in, and whether `up` started it. */
async function postgresFor(databaseUrl: string | undefined, dataDir: string): Promise<{ adminUrl: string; embeddedDataDir?: string; startedDataDir?: string }> {
  if (databaseUrl) {
    say('using the PostgreSQL in DATABASE_URL (its user must be allowed to create roles and databases)');
    return { adminUrl: databaseUrl };
  }
  const server = await ensureEmbeddedServer(dataDir, undefined, say);
  return { adminUrl: server.url, embeddedDataDir: dataDir, startedDataDir: server.startedHere ? dataDir : undefined };
}

async function up(port: number | undefined): Promise<void> {
  const config = loadRuntimeConfig(process.env);
  const files = clusterPaths(config.wardenHome);
  const install = await ensureTemporalServer({ log: say });
  const previous = await readState(files.state);
  const { adminUrl, embeddedDataDir, startedDataDir } = await postgresFor(config.databaseUrl, config.postgresDataDir);
  // The embedded PostgreSQL is the ledger's too: the Warden process that started it would stop it
  // as its ledger closes, so the Temporal server becomes its owner while it runs.
  const holdPostgres = async (serverPid: number): Promise<void> => {
    const startTicks = processStartTicks(serverPid);
    if (embeddedDataDir && startTicks !== undefined) await handOverServer(embeddedDataDir, { pid: serverPid, startTicks }, 'temporal-server');
  };
  const address = (ports: ClusterPorts): string => `127.0.0.1:${ports.frontend}`;

  if (previous && isAlive(previous.pid) && (await isTemporalReachable(address(previous.ports)))) {
    say(`the Temporal server is already running (pid ${previous.pid})`);
    await holdPostgres(previous.pid);
    await prepareNamespace(address(previous.ports), config.namespace, say);
    report(address(previous.ports), config.namespace, files);
    return;
  }

  let password = (await readFile(files.password, 'utf8').catch(() => '')).trim();
  if (!password) {
    password = randomBytes(18).toString('hex');
    await writePrivateFile(files.password, `${password}\n`);
  }
  const db: TemporalDatabaseSettings = { adminUrl, user: DATABASE_USER, password, database: DATABASE, visibilityDatabase: VISIBILITY_DATABASE };
  await setUpTemporalDatabases(install, db, say);

  // The same ports as last time, so clients configured then still reach it.
  const ports = previous && (port === undefined || port === previous.ports.frontend) ? previous.ports : await choosePorts(port ?? DEFAULT_FRONTEND_PORT);
  for (const [name, value] of Object.entries(ports)) {
    if (!(await isPortFree(value))) {
      throw new Error(`port ${value} (${name}) on 127.0.0.1 is in use: ${name === 'frontend' ? 'is the dev server or another Temporal running there? choose another with `npm run cluster:up -- --port N`' : 'run cluster:up again to pick others'}`);
    }
  }
  await writePrivateFile(files.config, await renderServerConfig(ports, db));
  const server = await startTemporalServer({ install, configFile: files.config, frontendPort: ports.frontend, logFile: files.log, log: say });
  const state: ClusterState = { pid: server.pid, ports, namespace: config.namespace, startedPostgresDataDir: startedDataDir ?? previous?.startedPostgresDataDir };
  await writeFile(files.state, `${JSON.stringify(state, null, 2)}\n`);
  await holdPostgres(server.pid);
  await prepareNamespace(server.address, config.namespace, say);
  report(server.address, config.namespace, files);
}

function report(address: string, namespace: string, files: ClusterPaths): void {
  process.stdout.write(
    [
      `Temporal server ${TEMPORAL_SERVER_VERSION} (PostgreSQL persistence) at ${address}, namespace ${namespace}`,
      `  point Warden at it:  export TEMPORAL_ADDRESS=${address}   (then: warden worker, warden run ...)`,
      `  config: ${files.config}   log: ${files.log}`,
      `  Web UI: not built here; with Docker: docker run --network host -e TEMPORAL_ADDRESS=${address} -e TEMPORAL_UI_PORT=8080 temporalio/ui:${UI_VERSION}`,
      '          then open http://127.0.0.1:8080 (docs/operations.md, "Temporal server")',
      '  stop it: npm run cluster:down   (add -- --wipe to drop its databases)',
      '',
    ].join('\n'),
  );
}

async function down(wipe: boolean): Promise<void> {
  const config = loadRuntimeConfig(process.env);
  const files = clusterPaths(config.wardenHome);
  const state = await readState(files.state);
  if (state && isAlive(state.pid)) {
    say(`stopping the Temporal server (pid ${state.pid})`);
    await stopProcess(state.pid, say);
  } else {
    say('no Temporal server from cluster:up is running');
  }
  if (wipe) {
    const running = config.databaseUrl ? { url: config.databaseUrl } : await findRunningServer(config.postgresDataDir);
    if (running) {
      const client = new pg.Client({ connectionString: running.url });
      await client.connect();
      try {
        for (const name of [DATABASE, VISIBILITY_DATABASE]) await client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(name)} WITH (FORCE)`);
        await client.query(`DROP ROLE IF EXISTS ${client.escapeIdentifier(DATABASE_USER)}`);
      } finally {
        await client.end();
      }
      await rm(files.password, { force: true });
      say(`dropped the databases ${DATABASE} and ${VISIBILITY_DATABASE} and the role ${DATABASE_USER}`);
    } else {
      say('the PostgreSQL is not running: start it (npm run cluster:up) to wipe the databases');
    }
  }
  if (state?.startedPostgresDataDir) {
    const running = await findRunningServer(state.startedPostgresDataDir);
    if (running) {
      const others = await otherConnections(running.url);
      if (others > 0) {
        say(`leaving the embedded PostgreSQL (pid ${running.pid}) running: ${others} other connection(s), e.g. a Warden ledger`);
      } else {
        say(`stopping the embedded PostgreSQL that cluster:up started (pid ${running.pid})`);
        await running.stop();
      }
    }
  }
  await rm(files.state, { force: true });
  if (wipe) await rm(files.config, { force: true });
}

async function otherConnections(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const result = await client.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()");
    return (result.rows[0] as { n: number }).n;
  } finally {
    await client.end();
  }
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  if (args.command === 'up') await up(args.port);
  else await down(args.wipe);
}

main().catch((error: unknown) => {
  if (error instanceof UsageError) {
    process.stderr.write(`warden: ${error.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`[cluster] ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
