import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** The script a child process runs: bundles and writes the code to the file it is given. */
const BUNDLER_SCRIPT = require.resolve('./workflow-bundler-main');

/**
 * Bundles the workflow code (with `interceptorModules`) in a child process and returns it.
 *
 * Bundling in the worker's own process leaves ~150 MB of webpack behind in its RSS for good, and
 * every process the worker spawns later (git, tests, agents) forks that much: with a hundred
 * cleanups at once, spawning from a 1 GB process took 4 s where a 50 MB one took 0.1 s.
 */
export async function bundleWorkflowsApart(interceptorModules: readonly string[]): Promise<{ readonly code: string }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'warden-bundle-'));
  const out = path.join(dir, 'workflows.js');
  try {
    await new Promise<void>((resolve, reject) => {
      const child = spawn(process.execPath, ['--require', require.resolve('tsx/cjs'), BUNDLER_SCRIPT, out, ...interceptorModules], {
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
