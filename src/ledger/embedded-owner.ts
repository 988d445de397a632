import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { stillRuns, thisProcess, type ProcessIdentity } from '../shared/process-identity';

/**
 * Who owns the embedded PostgreSQL: the Warden process that started it (a worker, `warden dev`,
 * `warden run`, or a short command that found none running). The owner lets go as it closes and
 * stops the server if no other Warden process is connected; if one is, the last one out stops
 * it. A process that joined a server whose owner still runs never stops it, however few
 * connections it counts (the owner's may be between reconnects).
 */

interface Owner extends ProcessIdentity {
  /** The owning LedgerDatabase's application_name: one process may open several. */
  readonly app: string;
}

const ownerFile = (dataDir: string): string => path.join(dataDir, 'warden-owner.json');

async function readOwner(dataDir: string): Promise<Owner | undefined> {
  try {
    return JSON.parse(await readFile(ownerFile(dataDir), 'utf8')) as Owner;
  } catch {
    return undefined;
  }
}

/** Records the LedgerDatabase `app` of this process as the server's owner. */
export async function claimServer(dataDir: string, app: string): Promise<void> {
  await writeFile(ownerFile(dataDir), JSON.stringify({ ...thisProcess(), app }), { mode: 0o600 });
}

/**
 * Hands the server to another process that uses it without a ledger (the Temporal server of
 * `npm run cluster:up`, whose databases live there too): while that process runs, no closing
 * Warden process stops the server under it.
 */
export async function handOverServer(dataDir: string, owner: ProcessIdentity, app: string): Promise<void> {
  await writeFile(ownerFile(dataDir), JSON.stringify({ pid: owner.pid, startTicks: owner.startTicks, app }), { mode: 0o600 });
}

/** Whether `app` of this process owns the server. */
export async function ownsServer(dataDir: string, app: string): Promise<boolean> {
  const owner = await readOwner(dataDir);
  return owner?.app === app && owner.pid === process.pid;
}

/** The owner, when it is another LedgerDatabase that still runs (in this process or another). */
export async function liveOwner(dataDir: string, app: string): Promise<ProcessIdentity | undefined> {
  const owner = await readOwner(dataDir);
  if (!owner || owner.app === app || !stillRuns(owner)) return undefined;
  return owner;
}

/** Lets go of the server (only if `app` holds it). */
export async function releaseServer(dataDir: string, app: string): Promise<void> {
  if (await ownsServer(dataDir, app)) await rm(ownerFile(dataDir), { force: true });
}
