/**
 * A lock file for a long one-time build into the Warden home: the first process to create it
 * builds, the others wait for it to go away and then use the result (or report the builder's
 * failure, which it leaves in a file beside the lock). A lock whose process died is taken over.
 */
import { existsSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';

/** How often a waiting process looks at the lock again. */
const LOCK_POLL_MS = 2000;

export interface BuildLock {
  /** Held while a process builds; holds that process's pid. */
  readonly lock: string;
  /** Written by a build that failed, for the processes waiting on it. */
  readonly failure: string;
}

/**
 * Runs `build` under the lock unless `isDone()`; when another process holds the lock, waits for
 * it and checks again. Throws the build's error, or the error of the build waited for.
 */
export async function buildOnce(
  paths: BuildLock,
  what: string,
  isDone: () => Promise<boolean>,
  build: () => Promise<void>,
  log: (message: string) => void,
): Promise<void> {
  for (;;) {
    if (await isDone()) return;
    if (await takeLock(paths.lock)) {
      try {
        // Another process may have finished between our look and our lock.
        if (await isDone()) return;
        await rm(paths.failure, { force: true });
        try {
          await build();
        } catch (error) {
          await writeFile(paths.failure, `${error instanceof Error ? error.message : String(error)}\n`).catch(() => undefined);
          throw error;
        }
        return;
      } finally {
        await rm(paths.lock, { force: true });
      }
    }
    log(`waiting for the ${what} build that another process (${await lockHolder(paths.lock)}) is running; its lock is ${paths.lock}`);
    await waitForLockRelease(paths.lock);
    if (await isDone()) return;
    const failure = await readFile(paths.failure, 'utf8').catch(() => '');
    if (failure) throw new Error(`the ${what} build this process waited for failed: ${failure.trim()}`);
    // The holder died without a word: try again, and build here if nobody else does.
  }
}

/** Creates the lock with our pid; takes over a lock whose holder is gone. */
async function takeLock(lock: string): Promise<boolean> {
  try {
    await writeFile(lock, `${process.pid}\n`, { flag: 'wx' });
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const holder = await lockHolder(lock);
  if (holder !== undefined && isAlive(holder)) return false;
  await rm(lock, { force: true });
  try {
    await writeFile(lock, `${process.pid}\n`, { flag: 'wx' });
    return true;
  } catch {
    return false;
  }
}

async function lockHolder(lock: string): Promise<number | undefined> {
  const text = await readFile(lock, 'utf8').catch(() => '');
  const pid = Number.parseInt(text.trim(), 10);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function waitForLockRelease(lock: string): Promise<void> {
  for (;;) {
    if (!existsSync(lock)) return;
    const holder = await lockHolder(lock);
    if (holder !== undefined && !isAlive(holder)) return;
    await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
  }
}
