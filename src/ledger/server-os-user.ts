import { execFile } from 'node:child_process';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/** The system user the embedded server runs as when Warden runs as root (PostgreSQL refuses root). */
export const SERVER_OS_USER = 'postgres';

export interface OsUser {
  readonly uid: number;
  readonly gid: number;
}

/**
 * undefined unless we are root; then SERVER_OS_USER, created if missing. Created as a system
 * user, as Debian's postgresql-common creates it, so installing that package later still works.
 */
export async function osUserForServer(log: (m: string) => void): Promise<OsUser | undefined> {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return undefined;
  const existing = await lookupOsUser(SERVER_OS_USER);
  if (existing) return existing;
  log(`running as root: creating the system user ${SERVER_OS_USER} for the embedded PostgreSQL (it refuses to run as root)`);
  const groupExists = await execFileAsync('getent', ['group', SERVER_OS_USER]).then(
    () => true,
    () => false,
  );
  const groupArgs = groupExists ? ['--gid', SERVER_OS_USER] : ['--user-group'];
  try {
    await execFileAsync('useradd', ['--system', ...groupArgs, '--no-create-home', '--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin', SERVER_OS_USER]);
  } catch (error) {
    // Another process may have created it in the meantime.
    const created = await lookupOsUser(SERVER_OS_USER);
    if (created) return created;
    throw new Error(`could not create the system user ${SERVER_OS_USER} to run the embedded PostgreSQL as: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  const created = await lookupOsUser(SERVER_OS_USER);
  if (!created) throw new Error(`created the system user ${SERVER_OS_USER} but cannot find it`);
  return created;
}

async function lookupOsUser(name: string): Promise<OsUser | undefined> {
  try {
    const [uid, gid] = await Promise.all([execFileAsync('id', ['-u', name]), execFileAsync('id', ['-g', name])]);
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  } catch {
    return undefined;
  }
}

/** Whether `user` can pass through `dir` and every folder above it. */
export async function canReach(dir: string, user: OsUser): Promise<boolean> {
  for (let current = dir; ; current = path.dirname(current)) {
    const info = await stat(current);
    const bit = info.uid === user.uid ? 0o100 : info.gid === user.gid ? 0o010 : 0o001;
    if (!(info.mode & bit)) return false;
    if (current === path.dirname(current)) return true;
  }
}
