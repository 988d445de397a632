import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chown, mkdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ensureExecutable } from './embedded-binaries';
import { canReach, SERVER_OS_USER, type OsUser } from './server-os-user';

/** The embedded server's superuser; its password is random, kept in the data folder. */
export const SUPERUSER = 'postgres';
/** Where the data of a `dataDir` the server's user cannot reach goes (root only). */
const RELOCATED_ROOT = '/var/lib/warden/postgres';
const PASSWORD_FILE = 'warden-password';

/** The files of an embedded server's folder. */
export function dataFiles(dataDir: string) {
  const pgdata = path.join(dataDir, 'pgdata');
  return {
    pgdata,
    password: path.join(pgdata, PASSWORD_FILE),
    postmasterPid: path.join(pgdata, 'postmaster.pid'),
    port: path.join(dataDir, 'warden-port'),
    log: path.join(dataDir, 'postgres.log'),
  };
}

/**
 * initdb into a temporary folder, then rename it into place, so two processes cannot both
 * initialise. As root, when `dataDir` sits below a folder the server's user cannot enter (a home
 * folder such as /root is 0700), the data goes to RELOCATED_ROOT instead and `dataDir/pgdata`
 * becomes a link to it: PostgreSQL cannot run as root, and opening up /root is not ours to do.
 */
export async function initialiseDataDir(dataDir: string, initdb: string, runAs: OsUser | undefined, log: (m: string) => void): Promise<void> {
  const files = dataFiles(dataDir);
  if (existsSync(path.join(files.pgdata, 'PG_VERSION'))) return;
  let home = dataDir;
  if (runAs && !(await canReach(dataDir, runAs))) {
    home = path.join(RELOCATED_ROOT, createHash('sha256').update(dataDir).digest('hex').slice(0, 16));
    await mkdir(home, { recursive: true, mode: 0o755 });
    log(`${dataDir} is closed to the user ${SERVER_OS_USER} the server runs as; its data goes to ${home}/pgdata, linked from ${files.pgdata}`);
  }
  const target = path.join(home, 'pgdata');
  const token = `${process.pid}-${randomBytes(4).toString('hex')}`;
  const staging = path.join(home, `pgdata.init-${token}`);
  const pwfile = path.join(home, `.pwfile-${token}`);
  const password = randomBytes(24).toString('hex');
  log(`initialising the embedded PostgreSQL in ${target}`);
  await mkdir(staging, { mode: 0o700 });
  await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
  try {
    if (runAs) {
      await chown(staging, runAs.uid, runAs.gid);
      await chown(pwfile, runAs.uid, runAs.gid);
    }
    await run(
      initdb,
      ['--pgdata', staging, '--username', SUPERUSER, '--pwfile', pwfile, '--auth', 'scram-sha-256', '--encoding', 'UTF8', '--locale', 'C'],
      home,
      runAs,
    );
    await writeFile(path.join(staging, PASSWORD_FILE), `${password}\n`, { mode: 0o600 });
    await rename(staging, target);
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    // Someone else won the race: fine.
    if (!existsSync(path.join(target, 'PG_VERSION'))) throw error;
  } finally {
    await rm(pwfile, { force: true });
  }
  if (home !== dataDir) {
    await symlink(target, files.pgdata).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error;
    });
  }
}

async function run(file: string, args: string[], cwd: string, runAs: OsUser | undefined): Promise<void> {
  await ensureExecutable(file);
  await new Promise<void>((resolve, reject) => {
    const child = spawn(file, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_MESSAGES: 'C' }, ...runAs });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`${path.basename(file)} failed (${signal ?? `exit ${code}`}):\n${output.trim().slice(-4000)}`));
    });
  });
}
