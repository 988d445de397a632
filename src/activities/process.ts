import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { parseProcStat } from '../shared/proc-stat';
import { recordProcessGroup } from './process-registry';
import { addChildTime, countLaunch, type ChildKind } from './process-tally';

/** How long a process group gets between SIGTERM and SIGKILL. */
const KILL_GRACE_MS = 1_000;
/**
 * How long after SIGKILL we still wait for the pipes to close. Only a process that left the
 * group (e.g. via setsid) can hold them open that long; we then stop reading rather than hang.
 */
const PIPE_GRACE_MS = 1_000;
/** After the pipes close, how long we wait for the rest of the group to die (SIGKILL included). */
const GROUP_GONE_WAIT_MS = 2_000;
/** Node's timers overflow above this and would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export interface RunProcessOptions {
  /** Run with `/bin/sh -c` (unless `exec` says otherwise). */
  readonly command: string;
  /**
   * The program that actually runs, when it is not `/bin/sh -c command`: e.g. a sandbox that
   * runs the command inside (see sandbox.ts). It still gets its own process group.
   */
  readonly exec?: { readonly file: string; readonly args: readonly string[] };
  readonly cwd: string;
  /** The complete environment of the child (nothing is inherited). */
  readonly env: NodeJS.ProcessEnv;
  /** Written to the child's stdin, which is then closed. Without it stdin is /dev/null. */
  readonly stdin?: string;
  /** The process group is killed after this long. */
  readonly timeoutMs: number;
  /** stdout + stderr combined; output past it is dropped and the process group killed. */
  readonly maxOutputBytes: number;
  /** Aborting kills the process group; an already aborted signal means nothing is spawned. */
  readonly signal?: AbortSignal;
  /** Called every `heartbeatEveryMs` while the process runs. */
  readonly heartbeat?: () => void;
  /** Default 1000. */
  readonly heartbeatEveryMs?: number;
  /**
   * Give the child a fourth pipe (file descriptor 3) and return what it wrote there as `report`:
   * the sandbox watcher's channel (see sandbox-watch.ts), apart from the command's own output.
   */
  readonly report?: boolean;
  /** Whose work this is, for the process tally (see process-tally.ts); default 'other'. */
  readonly kind?: ChildKind;
}

/** Why the process ended: on its own, or killed by us for the given reason. */
export type ProcessTermination = 'exited' | 'timed-out' | 'output-cap' | 'aborted';

export interface ProcessOutcome {
  /** Null when the shell was killed by a signal (always the case when we killed it). */
  readonly exitCode: number | null;
  readonly termination: ProcessTermination;
  /** The signal that ended the shell, if any (set by Node; absent if nothing was spawned). */
  readonly signal?: NodeJS.Signals | null;
  /** Output up to `maxOutputBytes` combined, decoded as UTF-8. */
  readonly stdout: string;
  readonly stderr: string;
  readonly durationMs: number;
  /** What was written to file descriptor 3 (with `report`), up to MAX_REPORT_BYTES. */
  readonly report?: string;
}

/** Most of a report kept: the watcher writes a short line per attempt. */
const MAX_REPORT_BYTES = 256 * 1024;

/**
 * Sends `signal` (default SIGTERM) to every process in the group led by `pid`.
 * A group that no longer exists (ESRCH) is not an error; other errors are thrown.
 */
export function killProcessGroup(pid: number, signal: NodeJS.Signals = 'SIGTERM'): void {
  // kill(-0) would signal our own group and kill(-1) every process we are allowed to signal.
  if (!Number.isInteger(pid) || pid <= 1) {
    throw new RangeError(`refusing to signal process group ${pid}`);
  }
  try {
    process.kill(-pid, signal);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

/**
 * Which of these process groups (by leader pid) still hold a live process. `kill(-pgid, 0)`
 * first; a group it still finds is looked up in /proc, because a group whose members are all
 * zombies (orphans waiting for an init that reaps slowly or never, as in some containers) runs
 * nothing. `zombieOnly` lists those. Without /proc, any member counts as live.
 */
export function liveProcessGroups(pgids: readonly number[]): { live: Set<number>; zombieOnly: Set<number> } {
  const exists = pgids.filter((pgid) => {
    try {
      process.kill(-pgid, 0);
      return true;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'EPERM';
    }
  });
  if (exists.length === 0 || process.platform !== 'linux') return { live: new Set(exists), zombieOnly: new Set() };
  const wanted = new Set(exists);
  const live = new Set<number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    const { state, pgrp } = parseProcStat(stat);
    if (wanted.has(pgrp) && state !== 'Z' && state !== 'X') live.add(pgrp);
  }
  return { live, zombieOnly: new Set(exists.filter((pgid) => !live.has(pgid))) };
}

/** Whether the process group led by `pid` still holds a live (non-zombie) process. */
export function groupAlive(pid: number): boolean {
  return liveProcessGroups([pid]).live.size > 0;
}

/**
 * Waits for process groups to hold no live process, each within its own time limit. Waits that
 * overlap share one look per round: finding a group's members means reading every process's
 * /proc entry (about 4 ms with 300 processes, on the worker's main thread), and a stop ends a
 * hundred groups at once; a look per group every round had that thread busy for most of a second.
 */
export class GroupEndWaiter {
  private readonly waiting = new Map<number, Array<{ readonly until: number; readonly done: () => void }>>();
  private scheduled = false;

  constructor(
    private readonly look: (pgids: readonly number[]) => { live: Set<number> } = liveProcessGroups,
    private readonly everyMs = 20,
  ) {}

  /** Resolves once the group led by `pgid` holds no live process, or after `withinMs` regardless. */
  gone(pgid: number, withinMs: number): Promise<void> {
    return new Promise((done) => {
      const waiters = this.waiting.get(pgid) ?? [];
      waiters.push({ until: performance.now() + withinMs, done });
      this.waiting.set(pgid, waiters);
      // The first look comes at once, shared with whatever else asked in the same turn.
      if (this.scheduled) return;
      this.scheduled = true;
      setImmediate(() => this.round());
    });
  }

  private round(): void {
    this.scheduled = false;
    const { live } = this.look([...this.waiting.keys()]);
    const now = performance.now();
    for (const [pgid, waiters] of this.waiting) {
      const staying = waiters.filter((waiter) => live.has(pgid) && now < waiter.until);
      for (const waiter of waiters) if (!staying.includes(waiter)) waiter.done();
      if (staying.length === 0) this.waiting.delete(pgid);
      else this.waiting.set(pgid, staying);
    }
    if (this.waiting.size === 0) return;
    this.scheduled = true;
    setTimeout(() => this.round(), this.everyMs);
  }
}

const groupEnds = new GroupEndWaiter();

const CREDENTIAL_VARIABLES = [/^TEMPORAL_/, /^WARDEN_/, /^PG/, /^DATABASE_URL$/];

/**
 * A copy of `env` without Temporal, Warden and database settings (TEMPORAL_*, WARDEN_*,
 * DATABASE_URL, PG*), so a child process cannot reach the cluster or database that
 * supervises it, e.g. to signal its own workflow or approve its own gate.
 */
export function agentEnvironment(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const copy: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue;
    const upper = name.toUpperCase();
    if (CREDENTIAL_VARIABLES.some((pattern) => pattern.test(upper))) continue;
    copy[name] = value;
  }
  return copy;
}

/**
 * Runs `opts.command` with `/bin/sh -c` (or `opts.exec`) in its own process group and resolves once it has
 * ended and its output pipes have closed. On timeout, output cap or abort the whole group
 * gets SIGTERM, then SIGKILL after about a second. When the shell exits on its own, anything
 * it left running in its group is killed the same way, so nothing outlives the call.
 * Non-zero exits resolve normally; it rejects only for bad options or a failed spawn.
 */
export function runProcess(opts: RunProcessOptions): Promise<ProcessOutcome> {
  if (!(opts.timeoutMs >= 0)) return Promise.reject(new RangeError(`invalid timeoutMs ${opts.timeoutMs}`));
  if (!(opts.maxOutputBytes >= 0)) {
    return Promise.reject(new RangeError(`invalid maxOutputBytes ${opts.maxOutputBytes}`));
  }
  if (opts.signal?.aborted) {
    return Promise.resolve({ exitCode: null, termination: 'aborted', stdout: '', stderr: '', durationMs: 0 });
  }

  return new Promise<ProcessOutcome>((resolve, reject) => {
    const started = performance.now();
    let child: ChildProcess;
    try {
      child = spawn(opts.exec?.file ?? '/bin/sh', opts.exec ? [...opts.exec.args] : ['-c', opts.command], {
        cwd: opts.cwd,
        env: opts.env,
        // Its own process group, so one kill reaches everything it starts.
        detached: true,
        stdio: [opts.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe', ...(opts.report ? (['pipe'] as const) : [])],
      });
    } catch (err) {
      reject(spawnError(opts, err));
      return;
    }
    countLaunch(opts.exec?.file ?? '/bin/sh');
    // Recorded until it ends, so a worker starting after a crash of this one can end it.
    const forget = child.pid === undefined ? () => undefined : recordProcessGroup(child.pid, opts.command);

    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    const reportPipe = opts.report ? (child.stdio[3] as NodeJS.ReadableStream & { destroy(): void } | null) : null;
    const report: Buffer[] = [];
    let reported = 0;
    let captured = 0;
    let termination: ProcessTermination | undefined;
    let settled = false;
    let escalating = false;
    let killTimer: NodeJS.Timeout | undefined;
    let pipeTimer: NodeJS.Timeout | undefined;

    const signalGroup = (signal: NodeJS.Signals): void => {
      const pid = child.pid;
      if (pid === undefined) return;
      try {
        killProcessGroup(pid, signal);
      } catch {
        // EPERM and the like: at least try the shell itself.
        try {
          child.kill(signal);
        } catch {
          // Nothing more we can do; the timers below still bound the wait.
        }
      }
    };

    // SIGTERM now, SIGKILL in a second, and stop waiting for the pipes a second later.
    const escalate = (): void => {
      if (escalating) return;
      escalating = true;
      signalGroup('SIGTERM');
      killTimer = setTimeout(() => {
        signalGroup('SIGKILL');
        pipeTimer = setTimeout(() => {
          child.stdout?.destroy();
          child.stderr?.destroy();
          child.stdin?.destroy();
          reportPipe?.destroy();
        }, PIPE_GRACE_MS);
      }, KILL_GRACE_MS);
    };

    const terminate = (reason: Exclude<ProcessTermination, 'exited'>): void => {
      if (settled || termination !== undefined) return;
      termination = reason;
      escalate();
    };

    const onAbort = (): void => terminate('aborted');

    const timeout = setTimeout(() => terminate('timed-out'), Math.min(opts.timeoutMs, MAX_TIMER_MS));
    const beat =
      opts.heartbeat === undefined
        ? undefined
        : setInterval(
            () => {
              try {
                opts.heartbeat?.();
              } catch {
                // A failing heartbeat must not crash the worker from inside a timer.
              }
            },
            Math.min(Math.max(opts.heartbeatEveryMs ?? 1_000, 1), MAX_TIMER_MS),
          );
    opts.signal?.addEventListener('abort', onAbort, { once: true });

    const finish = (settle: () => void): void => {
      if (settled) return;
      settled = true;
      forget();
      clearTimeout(timeout);
      clearInterval(beat);
      clearTimeout(killTimer);
      clearTimeout(pipeTimer);
      opts.signal?.removeEventListener('abort', onAbort);
      settle();
    };

    const capture =
      (into: Buffer[]) =>
      (chunk: Buffer): void => {
        const room = opts.maxOutputBytes - captured;
        if (chunk.length <= room) {
          into.push(chunk);
          captured += chunk.length;
          return;
        }
        if (room > 0) {
          into.push(chunk.subarray(0, room));
          captured += room;
        }
        terminate('output-cap');
      };
    child.stdout?.on('data', capture(stdout));
    child.stderr?.on('data', capture(stderr));
    // Read errors are rare and leave us nothing to do but wait for close.
    child.stdout?.on('error', () => undefined);
    child.stderr?.on('error', () => undefined);
    // The report is kept apart and bounded on its own: it counts against no output cap.
    reportPipe?.on('data', (chunk: Buffer) => {
      const room = MAX_REPORT_BYTES - reported;
      if (room > 0) report.push(chunk.subarray(0, room));
      reported += chunk.length;
    });
    reportPipe?.on('error', () => undefined);

    if (child.stdin) {
      // EPIPE / ECONNRESET when the child exits without reading its input: its exit tells the story.
      child.stdin.on('error', () => undefined);
      child.stdin.end(opts.stdin);
    }

    child.once('error', (err) => {
      // With a pid the process exists and 'close' will follow; without one, spawning failed.
      if (child.pid !== undefined) return;
      finish(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        child.stdin?.destroy();
        reject(spawnError(opts, err));
      });
    });

    // The shell is gone; reap whatever it left running in its group (background jobs that
    // would otherwise keep our pipes open until the timeout).
    child.once('exit', () => escalate());

    child.once('close', (code, signal) => {
      // The pipes are closed, but members of the group may still be dying from the SIGTERM sent
      // at exit (escalate's SIGKILL follows a second later unless we settle first). Wait for the
      // group to be gone, within a bound, so nothing the command started outlives this call.
      const groupGone = child.pid === undefined ? Promise.resolve() : groupEnds.gone(child.pid, GROUP_GONE_WAIT_MS);
      void groupGone.then(() =>
        finish(() => {
          const durationMs = Math.round(performance.now() - started);
          addChildTime(opts.kind ?? 'other', durationMs);
          resolve({
            exitCode: code,
            termination: termination ?? 'exited',
            signal,
            stdout: Buffer.concat(stdout).toString('utf8'),
            stderr: Buffer.concat(stderr).toString('utf8'),
            durationMs,
            ...(opts.report ? { report: Buffer.concat(report).toString('utf8') } : {}),
          });
        }),
      );
    });
  });
}

function spawnError(opts: RunProcessOptions, err: unknown): Error {
  // Node reports a missing cwd as "spawn /bin/sh ENOENT"; say which directory it was.
  const reason = err instanceof Error ? err.message : String(err);
  return new Error(`could not start ${JSON.stringify(opts.command)} in ${opts.cwd}: ${reason}`, { cause: err });
}
