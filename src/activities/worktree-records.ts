import { readdir, readFile, realpath } from 'node:fs/promises';
import path from 'node:path';

/**
 * git's records of linked worktrees, read without running git (the layout gitrepository-layout(5)
 * documents): each linked worktree has an admin folder `<common dir>/worktrees/<name>`, its
 * `gitdir` file names the worktree's `.git`, and that `.git` file names the admin folder back
 * ("gitdir: <path>"). A repo with a thousand intents has a thousand records: callers look at
 * the one they need rather than listing them all with git.
 */

/** The admin folder that the `.git` file of the worktree at `worktreePath` names (a real path), if it names one. */
export async function recordNamedBy(worktreePath: string): Promise<string | undefined> {
  const pointer = /^gitdir: (.+)$/m.exec(await readFile(path.join(worktreePath, '.git'), 'utf8').catch(() => ''))?.[1];
  if (!pointer) return undefined;
  return realpath(path.resolve(worktreePath, pointer.trim())).catch(() => undefined);
}

/** The folder a record's `gitdir` says its worktree is in; undefined unless it names that folder's `.git`. */
export async function folderOfRecord(admin: string): Promise<string | undefined> {
  const pointer = (await readFile(path.join(admin, 'gitdir'), 'utf8').catch(() => '')).trim();
  if (!pointer || path.basename(pointer) !== '.git') return undefined;
  return path.dirname(path.resolve(admin, pointer));
}

/**
 * The admin folders in `<commonDir>/worktrees` whose worktree folder `isIt` accepts, read from the
 * registry side (the worktree's own `.git` is not trusted). git names a record after its
 * worktree's folder (with a number added when that is taken), so records whose names start with
 * `folderName` are read first, and `firstOnly` usually stops there.
 */
export async function recordsOfFolder(
  commonDir: string,
  folderName: string,
  isIt: (folder: string) => boolean,
  { firstOnly = false } = {},
): Promise<string[]> {
  const registry = path.join(commonDir, 'worktrees');
  const names = await readdir(registry).catch(() => [] as string[]);
  const ordered = [...names.filter((name) => name.startsWith(folderName)), ...names.filter((name) => !name.startsWith(folderName))];
  const found: string[] = [];
  for (const name of ordered) {
    const admin = path.join(registry, name);
    const folder = await folderOfRecord(admin);
    if (folder === undefined || !isIt(folder)) continue;
    found.push(admin);
    if (firstOnly) break;
  }
  return found;
}
