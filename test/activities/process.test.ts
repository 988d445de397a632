import { execFileSync, spawn } from 'node:child_process';
import { getEventListeners } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GroupEndWaiter, agentEnvironment, groupAlive, killProcessGroup, runProcess, type RunProcessOptions } from '../../src/activities/process';

let cwd: string;
beforeEach(() => {
  cwd = mkdtempSync(path.join(os.tmpdir(), 'warden-process-test-'));
});
afterEach(() => {
  rmSync(cwd, { recursive: true, force: true });
});

function run(command: string, extra: Partial<RunProcessOptions> = {}) {
  return runProcess({ command, cwd, env: process.env, timeoutMs: 30_000, maxOutputBytes: 1_000_000, ...extra });
}

/**
 * Live (non-zombie) members of a process group. PID 1 in a container may not reap orphans,
 * and a zombie still answers kill(pid, 0), so ask ps for the state instead.
 */
function liveMembers(pgid: number): number[] {
  const table = execFileSync('ps', ['-A', '-o', 'pid=,pgid=,stat='], { encoding: 'utf8' });
  return table
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter(([pid, group, stat]) => pid && Number(group) === pgid && !stat?.startsWith('Z'))
    .map(([pid]) => Number(pid));
}

/** The shell prints `$$` (its pid, which is also its process group) on its first line. */
function firstLinePid(stdout: string): number {
  const pid = Number(stdout.split('\n')[0]);
  expect(Number.isInteger(pid) && pid > 1).toBe(true);
  return pid;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('runProcess', () => {
  it('captures stdout, stderr and the exit code without throwing', async () => {
    const outcome = await run('echo out; echo err >&2; exit 7');
    expect(outcome).toMatchObject({ exitCode: 7, termination: 'exited', stdout: 'out\n', stderr: 'err\n' });
    expect(outcome.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('runs in cwd with exactly the given environment', async () => {
    const outcome = await run('pwd; echo "$ONLY_HERE"; echo "${HOME:-unset}"', {
      env: { PATH: process.env.PATH, ONLY_HERE: 'yes' },
    });
    const [dir, only, home] = outcome.stdout.trim().split('\n');
    expect(dir).toBe(path.resolve(cwd));
    expect(only).toBe('yes');
    expect(home).toBe('unset');
  });

  it('delivers stdin, including input larger than a pipe buffer', async () => {
    expect((await run('cat', { stdin: 'hello\nwörld' })).stdout).toBe('hello\nwörld');
    const big = 'x'.repeat(1 << 20);
    expect((await run('wc -c', { stdin: big })).stdout.trim()).toBe(String(1 << 20));
  });

  it('gives the child /dev/null as stdin when there is no input', async () => {
    // Were stdin left open, cat would wait for it until the timeout: then the run ends timed-out.
    const outcome = await run('cat; echo done', { timeoutMs: 60_000 });
    expect(outcome).toMatchObject({ termination: 'exited', exitCode: 0, stdout: 'done\n' });
  });

  it('survives a child that never reads its stdin (EPIPE)', async () => {
    const input = 'y'.repeat(8 << 20);
    expect(await run('exit 3', { stdin: input })).toMatchObject({ exitCode: 3, termination: 'exited' });
    expect(await run('head -c 1', { stdin: input })).toMatchObject({ exitCode: 0, stdout: 'y' });
    expect(await run('sleep 0.2', { stdin: input })).toMatchObject({ exitCode: 0, termination: 'exited' });
  });

  it('kills the whole process group, grandchildren included, on timeout', async () => {
    const started = Date.now();
    // Unkilled, the sleeps would outlast the test's own timeout: only the kill ends the run in time.
    const outcome = await run('echo $$; sleep 300 & echo $!; sleep 300 & echo $!; wait', { timeoutMs: 500 });
    const elapsed = Date.now() - started;

    expect(outcome.termination).toBe('timed-out');
    expect(outcome.exitCode).toBeNull();
    expect(elapsed).toBeGreaterThanOrEqual(500);
    const [group, ...sleepers] = outcome.stdout.trim().split('\n').map(Number);
    expect(sleepers).toHaveLength(2);
    expect(liveMembers(group!)).toEqual([]);
    for (const pid of sleepers) expect(liveMembers(group!)).not.toContain(pid);
  });

  it('escalates to SIGKILL when the group ignores SIGTERM', async () => {
    const started = Date.now();
    // An ignored signal stays ignored in the children too.
    const outcome = await run("trap '' TERM; echo $$; sleep 300 & sleep 300 & wait", { timeoutMs: 300 });
    const elapsed = Date.now() - started;

    expect(outcome.termination).toBe('timed-out');
    expect(outcome.signal).toBe('SIGKILL');
    expect(elapsed).toBeGreaterThanOrEqual(300 + 900);
    expect(liveMembers(firstLinePid(outcome.stdout))).toEqual([]);
  });

  it('kills the group when aborted', async () => {
    const controller = new AbortController();
    const started = path.join(cwd, 'group-started');
    // Unkilled, the sleeps would outlast the test's own timeout. (How fast a kill is: bench/kill-latency.ts.)
    const pending = run(`echo $$; sleep 300 & sleep 300 & touch ${started}; wait`, { signal: controller.signal });
    while (!existsSync(started)) await sleep(20);
    controller.abort();
    const outcome = await pending;

    expect(outcome.termination).toBe('aborted');
    expect(liveMembers(firstLinePid(outcome.stdout))).toEqual([]);
  });

  it('does not spawn when the signal is already aborted', async () => {
    const controller = new AbortController();
    controller.abort();
    const outcome = await run('touch spawned', { signal: controller.signal });
    expect(outcome).toEqual({ exitCode: null, termination: 'aborted', stdout: '', stderr: '', durationMs: 0 });
    expect(existsSync(path.join(cwd, 'spawned'))).toBe(false);
  });

  it('stops a flooding process at the output cap, keeping exactly the cap', async () => {
    const outcome = await run('yes', { maxOutputBytes: 64 * 1024 });
    expect(outcome.termination).toBe('output-cap');
    expect(outcome.stdout.length).toBe(64 * 1024);
    expect(outcome.stdout.startsWith('y\ny\n')).toBe(true);
  });

  it('counts stdout and stderr together against the cap', async () => {
    const outcome = await run('yes out & yes err >&2 & wait', { maxOutputBytes: 10_000 });
    expect(outcome.termination).toBe('output-cap');
    expect(Buffer.byteLength(outcome.stdout) + Buffer.byteLength(outcome.stderr)).toBe(10_000);
  });

  it('does not wait for background jobs the shell left behind; it kills them', async () => {
    // The background sleep holds stdout open; without reaping we would wait for the timeout, past
    // the test's own, and the run would end timed-out rather than exited.
    const outcome = await run('echo $$; sleep 600 & exit 0', { timeoutMs: 600_000 });
    expect(outcome).toMatchObject({ termination: 'exited', exitCode: 0 });
    expect(liveMembers(firstLinePid(outcome.stdout))).toEqual([]);
  });

  it('does not hang on a process that left the group (setsid) but holds the pipes', async () => {
    // Out of reach of a group kill; we stop reading after SIGTERM + 1 s + 1 s instead. Waiting for
    // the pipes instead would wait for the sleep, past the test's own timeout.
    const outcome = await run("setsid sh -c 'echo $$; exec sleep 600' & sleep 0.3", { timeoutMs: 600_000 });
    const escaped = firstLinePid(outcome.stdout);
    try {
      expect(outcome).toMatchObject({ termination: 'exited', exitCode: 0 });
    } finally {
      process.kill(escaped, 'SIGKILL');
    }
  });

  it('heartbeats repeatedly while running and never after', async () => {
    let beats = 0;
    await run('sleep 1', { heartbeat: () => beats++, heartbeatEveryMs: 100 });
    // About ten on an idle machine; a busy one runs the timer late, never not at all.
    expect(beats).toBeGreaterThanOrEqual(2);
    const after = beats;
    await sleep(300);
    expect(beats).toBe(after);
  });

  it('survives a heartbeat that throws', async () => {
    const outcome = await run('sleep 0.3', {
      heartbeat: () => {
        throw new Error('heartbeat failed');
      },
      heartbeatEveryMs: 50,
    });
    expect(outcome).toMatchObject({ exitCode: 0, termination: 'exited' });
  });

  it('leaves no timer or abort listener behind', async () => {
    const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
    const controller = new AbortController();
    const before = timers();
    await run('echo hi', { signal: controller.signal, heartbeat: () => undefined, heartbeatEveryMs: 10 });
    await run('sleep 5', { signal: controller.signal, timeoutMs: 100, heartbeat: () => undefined });
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    // At most as many as before: unrelated timers may finish meanwhile, ours must all be gone.
    expect(timers()).toBeLessThanOrEqual(before);
  });

  it('rejects with the directory when it cannot start', async () => {
    await expect(run('true', { cwd: path.join(cwd, 'missing') })).rejects.toThrow(/missing/);
  });

  it('rejects nonsensical limits', async () => {
    await expect(run('true', { timeoutMs: Number.NaN })).rejects.toThrow(RangeError);
    await expect(run('true', { maxOutputBytes: -1 })).rejects.toThrow(RangeError);
  });

  it('does not fire at once for timeouts beyond the 24.8-day timer limit', async () => {
    const outcome = await run('sleep 0.2; echo ok', { timeoutMs: 30 * 86_400_000 });
    expect(outcome).toMatchObject({ termination: 'exited', stdout: 'ok\n' });
  });
});

describe('killProcessGroup', () => {
  it('refuses pids that would signal our own group or every process', () => {
    for (const pid of [0, 1, -1, -42, 1.5, Number.NaN]) {
      expect(() => killProcessGroup(pid)).toThrow(RangeError);
    }
  });

  it('ignores a group that no longer exists', async () => {
    const outcome = await run('echo $$');
    const pid = firstLinePid(outcome.stdout);
    expect(() => killProcessGroup(pid, 'SIGKILL')).not.toThrow();
  });
});

describe('agentEnvironment', () => {
  it('drops Temporal, Warden and database credentials and keeps the rest', () => {
    const env = {
      PATH: '/usr/bin',
      HOME: '/home/agent',
      TEMPORAL_ADDRESS: 'localhost:7233',
      TEMPORAL_API_KEY: 'secret',
      WARDEN_DB: 'x',
      DATABASE_URL: 'postgres://u:p@h/db',
      PGPASSWORD: 'pw',
      PGHOST: 'db',
      MY_DATABASE_URL_NOTE: 'kept',
      EMPTY: undefined,
    };
    const copy = agentEnvironment(env);
    expect(copy).toEqual({ PATH: '/usr/bin', HOME: '/home/agent', MY_DATABASE_URL_NOTE: 'kept' });
    expect(env.TEMPORAL_ADDRESS).toBe('localhost:7233');
  });
});

describe('GroupEndWaiter', () => {
  it('looks at every waiting group in one look per round, however many wait', async () => {
    const looks: number[][] = [];
    let alive = new Set([11, 12, 13]);
    const waiter = new GroupEndWaiter((pgids) => {
      looks.push([...pgids].sort());
      return { live: new Set(pgids.filter((pgid) => alive.has(pgid))) };
    }, 5);
    const ended: number[] = [];
    const waits = [11, 12, 13, 14].map((pgid) => waiter.gone(pgid, 10_000).then(() => ended.push(pgid)));
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(ended).toEqual([14]); // never alive: done after the first look
    expect(looks[0]).toEqual([11, 12, 13, 14]);
    expect(looks.slice(1).every((look) => look.join() === '11,12,13')).toBe(true);
    alive = new Set();
    await Promise.all(waits);
    expect(ended.sort()).toEqual([11, 12, 13, 14]);
    const rounds = looks.length;
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(looks).toHaveLength(rounds); // nothing waits: no more looks
  });

  it('gives up on a group at its own time limit', async () => {
    const waiter = new GroupEndWaiter((pgids) => ({ live: new Set(pgids) }), 5);
    const started = performance.now();
    const ended: string[] = [];
    // Limits far apart: even a machine that stalls this process for a moment ends them in order.
    const slow = waiter.gone(21, 3_000).then(() => ended.push('slow'));
    const quick = await waiter.gone(22, 50).then(() => (ended.push('quick'), performance.now() - started));
    await slow;
    expect(quick).toBeGreaterThanOrEqual(45);
    expect(ended).toEqual(['quick', 'slow']); // each at its own limit: the quick one does not wait for the slow one
    expect(performance.now() - started).toBeGreaterThanOrEqual(2_995);
  });

  it('sees a real group end', async () => {
    const child = spawn('/bin/sh', ['-c', 'sleep 0.3'], { detached: true, stdio: 'ignore' });
    const started = performance.now();
    await new GroupEndWaiter().gone(child.pid!, 5_000);
    expect(performance.now() - started).toBeGreaterThanOrEqual(250);
    expect(groupAlive(child.pid!)).toBe(false);
  });
});
