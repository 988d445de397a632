import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { processStartTicks as startTicksOf, stillRuns, thisProcess, type ProcessIdentity } from '../shared/process-identity';

/**
 * A file per process group this worker started (an agent, a test run), removed when it ends.
 * A worker killed with SIGKILL cannot remove them: the next worker to start on this machine
 * finds the groups whose worker is gone and kills what is left of them. Each record names its
 * worker (pid and start time), so a starting worker never touches the groups of one still
 * running, and each group's leader by start time too, so a reused pid is never taken for it.
 */

export interface ProcessRecord {
  readonly pgid: number;
  /** The leader's start time (clock ticks since boot), telling it from a later process with the same pid. */
  readonly startTicks: number;
  readonly owner: ProcessIdentity;
  /** What it runs, shortened: for the log. */
  readonly label: string;
}

let registryDir: string | undefined;

/** From now on, process groups this process starts are recorded in `dir`. */
export function recordProcessesIn(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  registryDir = dir;
}

/** Records the group led by `pid`; the function returned forgets it (call it once the group has ended). */
export function recordProcessGroup(pid: number, label: string): () => void {
  const dir = registryDir;
  const startTicks = startTicksOf(pid);
  if (dir === undefined || startTicks === undefined) return () => undefined;
  const file = path.join(dir, `${pid}-${startTicks}.json`);
  const record: ProcessRecord = { pgid: pid, startTicks, owner: thisProcess(), label: label.slice(0, 120) };
  try {
    writeFileSync(file, JSON.stringify(record), { mode: 0o600 });
  } catch {
    return () => undefined; // a registry that cannot be written costs the crash cleanup, not the run
  }
  return () => rmSync(file, { force: true });
}

/**
 * Kills (SIGKILL) the recorded process groups whose worker is no longer running, and forgets
 * them; returns what it found. Groups of a live worker are left alone.
 */
export function killStrays(dir: string): ProcessRecord[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((name) => name.endsWith('.json'));
  } catch {
    return [];
  }
  const strays: ProcessRecord[] = [];
  for (const name of names) {
    const file = path.join(dir, name);
    let record: ProcessRecord;
    try {
      record = JSON.parse(readFileSync(file, 'utf8')) as ProcessRecord;
    } catch {
      rmSync(file, { force: true });
      continue;
    }
    if (stillRuns(record.owner)) continue; // its worker still runs
    const leader = startTicksOf(record.pgid);
    // A leader with another start time is a new process that reused the pid: not ours. With no
    // leader at all, the pid is free, so no new group can have that id: what has it is ours.
    if (leader === undefined || leader === record.startTicks) {
      try {
        process.kill(-record.pgid, 'SIGKILL');
        strays.push(record);
      } catch {
        // the group is already gone
      }
    }
    rmSync(file, { force: true });
  }
  return strays;
}

