import { spawn } from 'node:child_process';
import { findExecutable } from '../shared/executables';

/**
 * Installing system programs from Debian's (or Ubuntu's) packages, for the few Warden cannot run
 * without (bubblewrap): only as root, only where apt-get exists, never when WARDEN_INSTALL=0.
 */

/** Why this process may not install packages here, or undefined when it may. */
export function whyNotInstall(env: NodeJS.ProcessEnv = process.env): string | undefined {
  // WARDEN_TEST_INSTALL is the older name the test setup used; both turn installing off.
  if (env.WARDEN_INSTALL === '0' || env.WARDEN_TEST_INSTALL === '0') return `${env.WARDEN_INSTALL === '0' ? 'WARDEN_INSTALL' : 'WARDEN_TEST_INSTALL'}=0`;
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return 'installing system packages needs root';
  if (!findExecutable('apt-get', env.PATH ?? '')) return 'no apt-get on this machine';
  return undefined;
}

/** `apt-get update` then `apt-get install` of `packages`, without recommends or questions. */
export async function aptInstall(packages: readonly string[]): Promise<void> {
  // Another apt-get (an upgrade, a second Warden) may hold dpkg's lock for a while: wait for it.
  const waitForLock = ['-o', 'DPkg::Lock::Timeout=300'];
  await runInstaller('apt-get', [...waitForLock, 'update', '-q']);
  await runInstaller('apt-get', [...waitForLock, 'install', '-y', '-q', '--no-install-recommends', ...packages]);
}

/** Runs an installer quietly (with `env` added to ours); a failure carries the end of its output. */
export function runInstaller(file: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive', ...env },
    });
    let output = '';
    const keep = (chunk: Buffer): void => {
      output = (output + chunk.toString()).slice(-4000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`${file} ${args[0] ?? ''} exited ${code}:\n${output.trim()}`))));
  });
}
