/**
 * The real Temporal server (not the CLI's dev server) and its SQL schema tool, built once per
 * machine from the Go module proxy into the Warden home's tools folder:
 *
 *   <tools>/temporal-server-<version>/temporal-server
 *   <tools>/temporal-server-<version>/temporal-sql-tool
 *   <tools>/temporal-server-<version>/schema/postgresql/v12/{temporal,visibility}/...
 *
 * A build takes minutes on two cores and its Go module and build caches about 3 GB, so they are
 * kept under the tools folder while it runs and removed afterwards (WARDEN_KEEP_GO_CACHE=1 keeps
 * them, which makes a rebuild take seconds). A lock file keeps two processes from building at once.
 *
 *   npx tsx src/runtime/temporal-server-install.ts    builds when missing, prints the folder
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { buildOnce } from '../shared/build-lock';
import { findGo, GO_FALLBACK, isExecutableFile } from './go-toolchain';
import { wardenHomeOf } from '../shared/warden-home';

const execFileAsync = promisify(execFile);

export const TEMPORAL_SERVER_VERSION = '1.32.2';
const SERVER_MODULE = 'go.temporal.io/server';
/** Where the Go toolchain lives on the machines Warden is tested on, when it is not on PATH. */
/** How often a running build says it still runs. */
const HEARTBEAT_MS = 30_000;
/** Set to 1 to keep the Go module and build caches after a build. */
export const KEEP_GO_CACHE_ENV = 'WARDEN_KEEP_GO_CACHE';

export interface TemporalServerInstall {
  /** The install folder. */
  readonly dir: string;
  readonly server: string;
  readonly sqlTool: string;
  /** The PostgreSQL schema folder (`.../schema/postgresql/v12`): `temporal/` and `visibility/`. */
  readonly postgresSchema: string;
}

/** Where the server is (or will be) installed under the tools folder. */
export function temporalServerInstall(toolsDir: string = path.join(wardenHomeOf(), 'tools')): TemporalServerInstall {
  const dir = path.join(path.resolve(toolsDir), `temporal-server-${TEMPORAL_SERVER_VERSION}`);
  return {
    dir,
    server: path.join(dir, 'temporal-server'),
    sqlTool: path.join(dir, 'temporal-sql-tool'),
    postgresSchema: path.join(dir, 'schema', 'postgresql', 'v12'),
  };
}

/** True when both binaries and the schema are in place. */
export async function isTemporalServerInstalled(install: TemporalServerInstall): Promise<boolean> {
  return (await isExecutableFile(install.server)) && (await isExecutableFile(install.sqlTool)) && existsSync(path.join(install.postgresSchema, 'temporal', 'versioned'));
}

/** The Go toolchain on PATH or at the usual place, or a clear error saying how to get one. */
export function findGoForTemporal(env: NodeJS.ProcessEnv = process.env, fallback: string = GO_FALLBACK): string {
  return findGo(
    {
      what: `building the Temporal server ${TEMPORAL_SERVER_VERSION}`,
      which: 'any go 1.21 or later: it fetches the newer one the server needs through the module proxy',
      command: 'npx tsx src/runtime/temporal-server-install.ts',
    },
    env,
    fallback,
  );
}

export interface EnsureTemporalServerOptions {
  readonly toolsDir?: string;
  readonly env?: NodeJS.ProcessEnv;
  readonly go?: string;
  readonly log?: (message: string) => void;
}

/**
 * The installed server: there already, built by another process this one waited for, or built
 * now. Throws when the build fails (or the build waited for failed).
 */
export async function ensureTemporalServer(options: EnsureTemporalServerOptions = {}): Promise<TemporalServerInstall> {
  const install = temporalServerInstall(options.toolsDir);
  const log = options.log ?? (() => undefined);
  const env = options.env ?? process.env;
  await mkdir(path.dirname(install.dir), { recursive: true });
  await buildOnce(
    { lock: `${install.dir}.lock`, failure: `${install.dir}.failed` },
    `Temporal server ${TEMPORAL_SERVER_VERSION}`,
    () => isTemporalServerInstalled(install),
    () => build(install, options.go ?? findGoForTemporal(env), env, log),
    log,
  );
  return install;
}

/**
 * Binaries without the symbol table and DWARF debug information: less for the linker to write and
 * a smaller install; a panic's stack trace still names every function.
 */
const STRIPPED = '-ldflags=-s -w';

/** Builds into a scratch folder beside the install and renames it into place when whole. */
async function build(install: TemporalServerInstall, go: string, env: NodeJS.ProcessEnv, log: (message: string) => void): Promise<void> {
  const started = Date.now();
  const elapsed = (): string => `${Math.round((Date.now() - started) / 1000)} s`;
  // A fixed place, so a kept cache makes the next build quick.
  const caches = path.join(path.dirname(install.dir), `.temporal-server-${TEMPORAL_SERVER_VERSION}.build`);
  const scratch = `${install.dir}.building`;
  await rm(scratch, { recursive: true, force: true });
  const bin = path.join(scratch, 'bin');
  const goEnv: NodeJS.ProcessEnv = {
    ...env,
    GOPATH: path.join(caches, 'gopath'),
    GOMODCACHE: path.join(caches, 'gopath', 'pkg', 'mod'),
    GOCACHE: path.join(caches, 'gocache'),
    GOBIN: bin,
    // The server needs a newer Go than many machines have: let go fetch it through the proxy.
    GOTOOLCHAIN: 'auto',
    // Writable module cache, so it can be removed afterwards without a chmod.
    GOFLAGS: '-modcacherw',
  };
  // Lowest priority: the build shares the machine with whatever else runs.
  const run = (args: readonly string[]): Promise<{ stdout: string }> =>
    execFileAsync('nice', ['-n', '19', go, ...args], { cwd: path.dirname(install.dir), env: goEnv, maxBuffer: 64 * 1024 * 1024 });
  let built = false;
  // The compile step is silent for minutes: say now and then that it still runs.
  const heartbeat = setInterval(() => log(`[${elapsed()}] still building`), HEARTBEAT_MS);
  try {
    await mkdir(bin, { recursive: true });
    log(`building the Temporal server ${TEMPORAL_SERVER_VERSION} from the Go module proxy into ${install.dir} (${go}; about 4 minutes on two idle cores, more on a busy machine, with 3.5 GB of caches in ${caches} while it runs)`);
    await run(['install', STRIPPED, `${SERVER_MODULE}/cmd/server@v${TEMPORAL_SERVER_VERSION}`]);
    log(`[${elapsed()}] server built; building the SQL schema tool`);
    await run(['install', STRIPPED, `${SERVER_MODULE}/cmd/tools/sql@v${TEMPORAL_SERVER_VERSION}`]);
    const { stdout } = await run(['mod', 'download', '-json', `${SERVER_MODULE}@v${TEMPORAL_SERVER_VERSION}`]);
    const source = (JSON.parse(stdout) as { Dir?: string }).Dir;
    if (!source) throw new Error(`go mod download ${SERVER_MODULE}@v${TEMPORAL_SERVER_VERSION} gave no source folder`);
    const schemaOut = path.join(scratch, 'schema', 'postgresql');
    await cp(path.join(source, 'schema', 'postgresql'), schemaOut, { recursive: true });
    await rename(path.join(bin, 'server'), path.join(scratch, 'temporal-server'));
    await rename(path.join(bin, 'sql'), path.join(scratch, 'temporal-sql-tool'));
    await rm(bin, { recursive: true, force: true });
    await execFileAsync(path.join(scratch, 'temporal-server'), ['--help']);
    await rm(install.dir, { recursive: true, force: true });
    await rename(scratch, install.dir);
    built = true;
    log(`[${elapsed()}] built: ${install.server}, ${install.sqlTool} and the PostgreSQL schema`);
  } catch (error) {
    log(`[${elapsed()}] the Temporal server build failed: ${errorText(error)}`);
    throw new Error(`building the Temporal server ${TEMPORAL_SERVER_VERSION} failed: ${errorText(error)}`);
  } finally {
    clearInterval(heartbeat);
    await rm(scratch, { recursive: true, force: true });
    if (env[KEEP_GO_CACHE_ENV] === '1') {
      log(`keeping the Go caches in ${caches} (${KEEP_GO_CACHE_ENV}=1)`);
    } else {
      await rm(caches, { recursive: true, force: true });
      if (built) log(`removed the Go caches (${caches}); set ${KEEP_GO_CACHE_ENV}=1 to keep them`);
    }
  }
}

/** One line: a failed command's message with the tail of its stderr. */
function errorText(error: unknown): string {
  const message = (error instanceof Error ? error.message : String(error)).trim().split('\n')[0] ?? '';
  const stderr = error && typeof error === 'object' && 'stderr' in error ? String((error as { stderr: unknown }).stderr ?? '').trim() : '';
  return stderr ? `${message}: ${stderr.split('\n').slice(-5).join(' | ')}` : message;
}

async function main(): Promise<void> {
  const install = await ensureTemporalServer({ log: (message) => process.stderr.write(`[temporal-server] ${message}\n`) });
  process.stdout.write(`${install.dir}\n`);
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`[temporal-server] ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}
