import { randomBytes } from 'node:crypto';
import { mkdir, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { OneAtATime } from './one-at-a-time';

/**
 * Folders Warden is done with, taken out of the way in one step and deleted in the background.
 *
 * Deleting a worktree file by file took ~150 ms per intent when a stop cleaned up a hundred at
 * once, and each cleanup held a workflow task slot meanwhile; a rename is one system call. The
 * deletions then run one folder at a time per process, so they never crowd out the work that
 * matters. What a crash left in a trash is deleted when a worker starts (sweepTrash), or when
 * anything is next thrown into it.
 */
const deletions = new OneAtATime();
const sweptTrashes = new Set<string>();
/** Folders whose deletion is queued or running. */
const scheduled = new Set<string>();
let whenEmptied: Array<() => void> = [];

/** The trash of the worktrees under `root`: on the same file system as they are, so a rename moves them. */
export function trashOf(root: string): string {
  return path.join(root, '.trash');
}

/**
 * Moves `target` into `trash` (made if missing) and schedules its deletion; deletes it at once if
 * the two are on different file systems. False if `target` did not exist.
 */
export async function throwAway(target: string, trash: string): Promise<boolean> {
  await mkdir(trash, { recursive: true });
  const doomed = path.join(trash, `${path.basename(target)}-${randomBytes(4).toString('hex')}`);
  try {
    await rename(target, doomed);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return false;
    if (code !== 'EXDEV') throw error;
    await rm(target, { recursive: true, force: true }); // another file system: delete it here and now
    return true;
  }
  scheduleDeletion(doomed);
  await sweepTrash(trash);
  return true;
}

/** Schedules the deletion of whatever is in `trash` (left by an earlier process), once per process and trash. */
export async function sweepTrash(trash: string): Promise<void> {
  if (sweptTrashes.has(trash)) return;
  sweptTrashes.add(trash);
  for (const leftover of await readdir(trash).catch(() => [])) scheduleDeletion(path.join(trash, leftover));
}

function scheduleDeletion(folder: string): void {
  if (scheduled.has(folder)) return;
  scheduled.add(folder);
  void deletions
    .run('trash', () => rm(folder, { recursive: true, force: true }))
    .catch(() => undefined) // left for the next sweep
    .finally(() => {
      scheduled.delete(folder);
      if (scheduled.size > 0) return;
      const waiting = whenEmptied;
      whenEmptied = [];
      for (const resolve of waiting) resolve();
    });
}

/** Resolves once every deletion scheduled so far in this process has run (tests wait for it). */
export function trashEmptied(): Promise<void> {
  if (scheduled.size === 0) return Promise.resolve();
  return new Promise((resolve) => whenEmptied.push(resolve));
}
