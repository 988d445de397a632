import { readFileSync } from 'node:fs';
import { startTimeOf } from './proc-stat';

/**
 * A process told apart from any later one that reuses its pid: its pid and its start time
 * (clock ticks since boot, from /proc). What Warden records of a process it may have to find
 * again after a crash: a worker's agents, the owner of the embedded PostgreSQL.
 */
export interface ProcessIdentity {
  readonly pid: number;
  readonly startTicks: number;
}

/** When process `pid` started, or undefined when there is no such process. */
export function processStartTicks(pid: number): number | undefined {
  try {
    return startTimeOf(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

/** This process's identity. */
export function thisProcess(): ProcessIdentity {
  return { pid: process.pid, startTicks: processStartTicks(process.pid) ?? 0 };
}

/** Whether the process recorded as `identity` still runs. */
export function stillRuns(identity: ProcessIdentity): boolean {
  return processStartTicks(identity.pid) === identity.startTicks;
}
