/**
 * The Gitea the forge tests run against: built once from the Go module proxy into the Warden
 * home's tools folder (`<tools>/gitea-<version>/gitea`), as the Temporal CLI and the embedded
 * PostgreSQL are installed there. A build takes minutes on two cores, so .ci/run starts it in the
 * background right after `npm ci` and the forge tests wait for it:
 *
 *   npx tsx test/setup/gitea-forge.ts --build    builds when missing, prints the binary's path
 *
 * A lock file beside the install keeps two processes from building at once: the second waits
 * for the first, and fails with the first one's error when that build failed. The binary is
 * built with the `bindata` tag, so it carries its templates and locales and needs no source tree.
 */
import { buildOnce } from '../../src/shared/build-lock';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { findGo as findGoToolchain, GO_FALLBACK, isExecutableFile } from '../../src/runtime/go-toolchain';
import { wardenHomeOf } from '../../src/shared/warden-home';

const execFileAsync = promisify(execFile);

/**
 * The release that builds from the module proxy as it is: later ones moved to a module path
 * and dependencies the proxy does not serve.
 */
export const GITEA_VERSION = '1.26.0';
const GITEA_MODULE = 'code.gitea.io/gitea';
const BUILD_TAGS = 'bindata sqlite sqlite_unlock_notify';
/** The packages whose generated files embed the assets (go generate -tags bindata). */
const BINDATA_PACKAGES = ['modules/options', 'modules/templates', 'modules/public', 'modules/migration'];
/** Where the Go toolchain lives on the machines Warden is tested on, when it is not on PATH. */
/** How often a waiting process looks at the lock again. */

export interface GiteaInstall {
  /** The folder the binary is installed in. */
  readonly dir: string;
  readonly binary: string;
  /** Held while a process builds; holds that process's pid. */
  readonly lock: string;
  /** Written by a build that failed, for the processes waiting on it. */
  readonly failure: string;
}

/** Where Gitea is (or will be) installed under the tools folder. */
export function giteaInstall(toolsDir: string = path.join(wardenHomeOf(), 'tools')): GiteaInstall {
  const dir = path.join(path.resolve(toolsDir), `gitea-${GITEA_VERSION}`);
  return { dir, binary: path.join(dir, 'gitea'), lock: `${dir}.lock`, failure: `${dir}.failed` };
}

/** The Go toolchain on PATH or at `fallback`, or a clear error saying how to get one. */
export function findGo(env: NodeJS.ProcessEnv = process.env, fallback: string = GO_FALLBACK): string {
  return findGoToolchain(
    { what: `building Gitea ${GITEA_VERSION} for the forge tests`, which: 'go 1.25 or later, with gcc for SQLite', command: 'npx tsx test/setup/gitea-forge.ts --build' },
    env,
    fallback,
  );
}

export interface EnsureGiteaOptions {
  readonly toolsDir?: string;
  readonly env?: NodeJS.ProcessEnv;
  /** The Go toolchain to build with; found with {@link findGo} when left out. */
  readonly go?: string;
  readonly log?: (message: string) => void;
}

/**
 * The Gitea binary's absolute path: there already, built by another process this one waited
 * for, or built now. Throws when the build fails (or the build waited for failed).
 */
export async function ensureGitea(options: EnsureGiteaOptions = {}): Promise<string> {
  const install = giteaInstall(options.toolsDir);
  const log = options.log ?? (() => undefined);
  const env = options.env ?? process.env;
  await mkdir(path.dirname(install.dir), { recursive: true });
  await buildOnce(install, 'Gitea', () => isExecutableFile(install.binary), () => build(install, options.go ?? findGo(env), env, log), log);
  return install.binary;
}

/** Builds into a scratch folder beside the install and moves the binary into place when whole. */
async function build(install: GiteaInstall, go: string, env: NodeJS.ProcessEnv, log: (message: string) => void): Promise<void> {
  const started = Date.now();
  const elapsed = (): string => `${Math.round((Date.now() - started) / 1000)} s`;
  const scratch = await mkdtemp(`${install.dir}.building-`);
  const goEnv = { ...env, CGO_ENABLED: '1' };
  // Lowest priority: the build shares the machine with the test run.
  const run = async (args: readonly string[], cwd: string): Promise<string> => {
    const { stdout } = await execFileAsync('nice', ['-n', '19', go, ...args], { cwd, env: goEnv, maxBuffer: 64 * 1024 * 1024 });
    return stdout;
  };
  try {
    log(`building Gitea ${GITEA_VERSION} from the Go module proxy into ${install.dir} (${go}; several minutes on two cores)`);
    const downloaded = JSON.parse(await run(['mod', 'download', '-json', `${GITEA_MODULE}@v${GITEA_VERSION}`], scratch)) as { Dir?: string; Error?: string };
    if (!downloaded.Dir) throw new Error(`go mod download ${GITEA_MODULE}@v${GITEA_VERSION} gave no source folder${downloaded.Error ? `: ${downloaded.Error}` : ''}`);
    // The module cache is read-only: build in a writable copy.
    const source = path.join(scratch, 'src');
    await execFileAsync('cp', ['-r', downloaded.Dir, source]);
    await execFileAsync('chmod', ['-R', 'u+w', source]);
    log(`[${elapsed()}] source copied; downloading its dependencies`);
    await run(['mod', 'download'], source);
    log(`[${elapsed()}] dependencies downloaded; embedding templates, locales and assets (bindata)`);
    for (const pkg of BINDATA_PACKAGES) await run(['generate', '-tags', 'bindata', './...'], path.join(source, pkg));
    log(`[${elapsed()}] compiling (the longest step)`);
    const output = path.join(scratch, 'gitea');
    await run(['build', '-tags', BUILD_TAGS, '-ldflags', `-s -w -X main.Version=${GITEA_VERSION} -X 'main.Tags=${BUILD_TAGS}'`, '-o', output, '.'], source);
    const { stdout: version } = await execFileAsync(output, ['--version'], { env: { ...env, GITEA_WORK_DIR: scratch } });
    await mkdir(install.dir, { recursive: true });
    await rename(output, install.binary);
    log(`[${elapsed()}] built: ${version.trim()} at ${install.binary}`);
  } catch (error) {
    log(`[${elapsed()}] the Gitea build failed: ${errorText(error)}`);
    throw new Error(`building Gitea ${GITEA_VERSION} failed: ${errorText(error)}`);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/** One line: a failed command's message with the tail of its stderr. */
function errorText(error: unknown): string {
  const message = (error instanceof Error ? error.message : String(error)).trim().split('\n')[0] ?? '';
  const stderr = error && typeof error === 'object' && 'stderr' in error ? String((error as { stderr: unknown }).stderr ?? '').trim() : '';
  return stderr ? `${message}: ${stderr.split('\n').slice(-5).join(' | ')}` : message;
}

async function main(): Promise<void> {
  if (!process.argv.includes('--build')) {
    process.stderr.write('usage: npx tsx test/setup/gitea-forge.ts --build\n');
    process.exit(2);
  }
  const binary = await ensureGitea({ log: (message) => process.stderr.write(`[gitea] ${message}\n`) });
  process.stdout.write(`${binary}\n`);
}

if (require.main === module) {
  main().catch((error: unknown) => {
    process.stderr.write(`[gitea] ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}
