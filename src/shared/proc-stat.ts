/** The fields of a Linux `/proc/<pid>/stat` line that Warden reads. */
export interface ProcStat {
  /** R, S, D, … ; Z for a zombie (exited, not yet reaped), X for dead. */
  readonly state: string;
  readonly ppid: number;
  readonly pgrp: number;
}

/** Parses "<pid> (<comm>) <state> <ppid> <pgrp> …". */
export function parseProcStat(line: string): ProcStat {
  const [state = '', ppid, pgrp] = fieldsAfterComm(line);
  return { state, ppid: Number(ppid), pgrp: Number(pgrp) };
}

/** User plus system CPU time of the process so far, in clock ticks (fields 14 and 15 of the line). */
export function cpuTicksOf(line: string): number {
  const fields = fieldsAfterComm(line);
  return Number(fields[11]) + Number(fields[12]);
}

/** User plus system CPU time of the process's children that have exited and been waited for, in clock ticks (fields 16 and 17). */
export function reapedChildrenTicksOf(line: string): number {
  const fields = fieldsAfterComm(line);
  return Number(fields[13]) + Number(fields[14]);
}

/** Fields 3 (state) onwards: comm, field 2, may hold spaces and parentheses, so they start after the last ')'. */
function fieldsAfterComm(line: string): string[] {
  return line.slice(line.lastIndexOf(')') + 2).split(' ');
}

/** When the process started, in clock ticks since boot (field 22 of its stat line). */
export function startTimeOf(line: string): number {
  return Number(fieldsAfterComm(line)[19]);
}
