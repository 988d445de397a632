import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { nodeOptionsFor } from '../shared/node-script';

/** The script a child process runs: bundles and writes the code to the file it is given. */
const BUNDLER_SCRIPT = require.resolve('./workflow-bundler-main');
/** Warden's root: its src/ is what the bundle is made of, its lock file fixes the SDK it is made with. */
const ROOT = path.resolve(__dirname, '..', '..');
/** Where bundles are kept between runs, as build tools keep their caches. */
const CACHE_DIR = path.join(ROOT, 'node_modules', '.cache', 'warden');
/** The workflow SDK the bundle is made with: an installed package has no lock file to say it. */
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a package's own version, read once
const SDK_VERSION: string = (require('@temporalio/workflow/package.json') as { version: string }).version;
/** Bundles kept at most: older ones are removed when a new one is written. */
const KEEP = 4;

/**
 * The workflow code bundled with `interceptorModules`: from the cache when the same sources were
 * bundled before, else bundled in a child process and cached.
 *
 * Bundling takes about two seconds of CPU, on every `warden run`, `warden dev` and worker start.
 * The cache key is a hash of every file under src/, the lock file (the SDK versions) and the
 * module list: the bundle can only change when one of them does.
 */
export async function bundleWorkflowsApart(interceptorModules: readonly string[]): Promise<{ readonly code: string }> {
  const cached = await cachedBundlePath(interceptorModules);
  const hit = await readFile(cached, 'utf8').catch(() => undefined);
  if (hit) return { code: hit };
  const bundle = await bundleInChild(interceptorModules);
  await keep(cached, bundle.code).catch(() => undefined); // a cache that cannot be written only costs time
  return bundle;
}

/**
 * Bundles in a child process. Bundling in the worker's own process leaves ~150 MB of webpack
 * behind in its RSS for good, and every process the worker spawns later forks that much.
 */
async function bundleInChild(interceptorModules: readonly string[]): Promise<{ readonly code: string }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'warden-bundle-'));
  const out = path.join(dir, 'workflows.js');
  try {
    await new Promise<void>((resolve, reject) => {
      const child = spawn(process.execPath, [...nodeOptionsFor(BUNDLER_SCRIPT), BUNDLER_SCRIPT, out, ...interceptorModules], {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => void (stderr = (stderr + chunk.toString()).slice(-4000)));
      child.on('error', reject);
      child.on('exit', (code, signal) =>
        code === 0 ? resolve() : reject(new Error(`bundling the workflow code failed (${signal ?? `exit ${code}`}): ${stderr.trim() || 'no output'}`)),
      );
    });
    // The code carries its source map inline.
    return { code: await readFile(out, 'utf8') };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Where the bundle of `interceptorModules` is cached (whether or not it is there yet). */
export async function cachedBundlePath(interceptorModules: readonly string[]): Promise<string> {
  return path.join(CACHE_DIR, `workflows-${await sourceKey(interceptorModules)}.js`);
}

/**
 * A hash of what the bundle is made of: Warden's code (src/ in a checkout, dist/ in the installed
 * package), the SDK's version, the lock file where there is one, the module list, and the
 * modules in it that live outside that code.
 */
export async function sourceKey(interceptorModules: readonly string[], root = ROOT): Promise<string> {
  const hash = createHash('sha256');
  hash.update(JSON.stringify(interceptorModules));
  hash.update(SDK_VERSION);
  const code = path.join(root, existsSync(path.join(root, 'src')) ? 'src' : 'dist');
  for (const file of await filesUnder(code)) {
    hash.update(`\0${path.relative(root, file)}\0`);
    hash.update(await readFile(file));
  }
  // An interceptor module from outside that code (a benchmark's, a test's) is part of the bundle too.
  for (const module of interceptorModules) {
    if (!module.startsWith(code + path.sep) && existsSync(module)) hash.update(await readFile(module));
  }
  const lock = path.join(root, 'package-lock.json');
  if (existsSync(lock)) hash.update(await readFile(lock));
  return hash.digest('hex').slice(0, 24);
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => path.join(entry.parentPath, entry.name))
    .sort();
}

/** Writes `code` as `file` (whole or not at all), then removes all but the newest bundles. */
async function keep(file: string, code: string): Promise<void> {
  await mkdir(CACHE_DIR, { recursive: true });
  const partial = `${file}.${randomBytes(4).toString('hex')}.partial`;
  await writeFile(partial, code);
  await rename(partial, file);
  const names = (await readdir(CACHE_DIR)).filter((name) => /^workflows-[0-9a-f]+\.js$/.test(name));
  const dated = await Promise.all(names.map(async (name) => ({ name, mtime: (await stat(path.join(CACHE_DIR, name))).mtimeMs })));
  for (const old of dated.sort((a, b) => b.mtime - a.mtime).slice(KEEP)) await rm(path.join(CACHE_DIR, old.name), { force: true });
}
