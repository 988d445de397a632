/**
 * CPU time over a window, for the machine and for labelled process trees (a process and its
 * descendants, less those under another label), read from /proc: tells whether a slow step
 * waited for CPU, and whose. A descendant that exited counts once its parent has waited for it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { cpuTicksOf, parseProcStat, reapedChildrenTicksOf } from '../src/shared/proc-stat';

const TICKS_PER_SECOND = 100; // USER_HZ: 100 on every Linux the benchmarks run on

interface Snapshot {
  readonly machineBusy: number;
  readonly machineTotal: number;
  readonly trees: Map<string, number>;
}

function snapshot(roots: ReadonlyMap<string, number>): Snapshot {
  const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const idle = cpu[3]! + cpu[4]!; // idle + iowait
  const total = cpu.slice(0, 8).reduce((a, b) => a + b, 0);
  const parent = new Map<number, number>();
  const ticks = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const line = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parent.set(Number(entry), parseProcStat(line).ppid);
      // With its exited children's: a git process that ends inside the window still counts, for its parent.
      ticks.set(Number(entry), cpuTicksOf(line) + reapedChildrenTicksOf(line));
    } catch {
      // gone meanwhile
    }
  }
  const trees = new Map<string, number>();
  // Each process counts for its nearest labelled ancestor (or itself): a dev server started by
  // the worker is the dev server's, not the worker's.
  const labelOf = new Map([...roots].map(([label, pid]) => [pid, label]));
  for (const label of roots.keys()) trees.set(label, 0);
  for (const [pid, value] of ticks) {
    for (let p: number | undefined = pid; p !== undefined && p > 1; p = parent.get(p)) {
      const label = labelOf.get(p);
      if (label !== undefined) {
        trees.set(label, trees.get(label)! + value);
        break;
      }
    }
  }
  return { machineBusy: total - idle, machineTotal: total, trees };
}

/** Starts a window now; `end()` gives CPU seconds used since, by the machine and by each tree. */
export function startCpuWindow(roots: ReadonlyMap<string, number>): { end(): CpuWindow } {
  const first = snapshot(roots);
  return {
    end() {
      const last = snapshot(roots);
      const cores = readFileSync('/proc/stat', 'utf8').split('\n').filter((l) => /^cpu\d/.test(l)).length;
      const elapsed = (last.machineTotal - first.machineTotal) / cores / TICKS_PER_SECOND;
      return {
        elapsedSeconds: elapsed,
        machineBusyShare: (last.machineBusy - first.machineBusy) / Math.max(1, last.machineTotal - first.machineTotal),
        cpuSeconds: Object.fromEntries([...last.trees].map(([label, value]) => [label, (value - (first.trees.get(label) ?? 0)) / TICKS_PER_SECOND])),
      };
    },
  };
}

export interface CpuWindow {
  /** Wall time of the window as the kernel counted it. */
  readonly elapsedSeconds: number;
  /** Of all cores' time in the window, the share not idle (1 = every core busy throughout). */
  readonly machineBusyShare: number;
  /** CPU seconds (user + system) each labelled tree used in the window, its exited and waited-for processes included. */
  readonly cpuSeconds: Record<string, number>;
}

/** Profiles this process's main thread until `stopInto(file)`, which writes a .cpuprofile (Chrome DevTools opens it) and prints the top functions by self time. */
export async function startCpuProfile(): Promise<{ stopInto(file: string): Promise<void> }> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 500 });
  await session.post('Profiler.start');
  return {
    async stopInto(file) {
      const { profile } = await session.post('Profiler.stop');
      session.disconnect();
      await writeFile(file, JSON.stringify(profile));
      const selfMs = new Map<string, number>();
      const byId = new Map(profile.nodes.map((n) => [n.id, n]));
      const interval = (profile.endTime - profile.startTime) / 1000 / Math.max(1, profile.samples?.length ?? 1);
      for (const id of profile.samples ?? []) {
        const frame = byId.get(id)!.callFrame;
        const key = `${frame.functionName || '(anonymous)'} ${frame.url.split('/').slice(-2).join('/')}:${frame.lineNumber + 1}`;
        selfMs.set(key, (selfMs.get(key) ?? 0) + interval);
      }
      const top = [...selfMs].sort((a, b) => b[1] - a[1]).slice(0, 25);
      process.stdout.write(`cpu profile: ${file}; top self time on the main thread:\n`);
      for (const [key, ms] of top) process.stdout.write(`  ${ms.toFixed(0).padStart(6)} ms  ${key}\n`);
    },
  };
}
