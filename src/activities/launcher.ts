/**
 * Runs short programs (git, mostly) from a small child process instead of from this one.
 *
 * Starting a program forks the process that starts it, and a fork copies the parent's page
 * tables: from a worker holding 700 MB, each `git` took 27 ms (12 ms of it in the kernel), where
 * the same call from a 50 MB process took 2 ms. An intent runs dozens of git commands, and a
 * worker's memory grows with the workflows it caches, so every git call goes through one small
 * launcher process (launcher-main.ts) that the worker starts once and talks to over IPC.
 *
 * If the launcher cannot be started or dies, the call runs here as before: slower, never lost.
 */
import { nodeOptionsFor } from '../shared/node-script';
import { execFile, fork, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { countLaunch } from './process-tally';

const execFileAsync = promisify(execFile);

export interface LaunchRequest {
  readonly id: number;
  readonly file: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: NodeJS.ProcessEnv;
  readonly maxBuffer: number;
  readonly input?: string;
  readonly encoding?: LaunchEncoding;
}

/** How a program's output is decoded: 'latin1' keeps every byte as one character (binary output). */
export type LaunchEncoding = 'utf8' | 'latin1';

export interface LaunchReply {
  readonly id: number;
  readonly stdout: string;
  readonly stderr: string;
  /** The exit code; a string when the program could not run (ENOENT, ERR_CHILD_PROCESS_STDIO_MAXBUFFER); null when a signal ended it. */
  readonly code: number | string | null;
  readonly signal: string | null;
  readonly message?: string;
}

/** What `execFile` resolves with; a non-zero exit rejects with an error carrying code, stdout and stderr. */
export interface Launched {
  readonly stdout: string;
  readonly stderr: string;
}

export interface LaunchOptions {
  readonly cwd: string;
  readonly env: NodeJS.ProcessEnv;
  readonly maxBuffer: number;
  /** Written to the program's standard input, which is then closed. */
  readonly input?: string;
  readonly encoding?: LaunchEncoding;
}

const CHILD = require.resolve('./launcher-main');

/** A running launcher and the calls it has yet to answer. */
interface Launcher {
  readonly child: ChildProcess;
  readonly pending: Map<number, { resolve: (reply: LaunchReply) => void; reject: (error: Error) => void }>;
}

let launcher: Launcher | undefined;
let nextId = 1;

/**
 * `execFile(file, args)` with execFile's contract (resolves with the output on exit 0, rejects
 * with an error carrying `code`, `signal`, `stdout` and `stderr` otherwise), run by the launcher.
 */
export async function launch(file: string, args: readonly string[], options: LaunchOptions): Promise<Launched> {
  countLaunch(file);
  const current = runningLauncher();
  if (!current) return execHere(file, args, options);
  const id = nextId++;
  let reply: LaunchReply;
  try {
    reply = await new Promise<LaunchReply>((resolve, reject) => {
      current.pending.set(id, { resolve, reject });
      // Held while a call is out, so this process does not exit under it; let go when idle.
      current.child.channel?.ref();
      const request: LaunchRequest = {
        id, file, args, cwd: options.cwd, env: options.env, maxBuffer: options.maxBuffer,
        ...(options.input !== undefined ? { input: options.input } : {}),
        ...(options.encoding ? { encoding: options.encoding } : {}),
      };
      current.child.send(request, (error) => {
        if (error) settle(current, id, undefined, error);
      });
    });
  } catch {
    // The launcher went away with this call in flight: run it here instead.
    return execHere(file, args, options);
  }
  if (reply.code === 0) return { stdout: reply.stdout, stderr: reply.stderr };
  throw Object.assign(new Error(reply.message ?? `${file} failed`), { code: reply.code, signal: reply.signal, stdout: reply.stdout, stderr: reply.stderr });
}

function settle(owner: Launcher, id: number, reply: LaunchReply | undefined, error?: Error): void {
  const waiter = owner.pending.get(id);
  if (!waiter) return;
  owner.pending.delete(id);
  if (reply) waiter.resolve(reply);
  else waiter.reject(error ?? new Error('the launcher went away'));
  if (owner.pending.size === 0) owner.child.channel?.unref();
}

/** The running launcher, started on first use; undefined when it cannot be started. */
function runningLauncher(): Launcher | undefined {
  if (launcher?.child.connected) return launcher;
  try {
    const child = fork(CHILD, [], { execArgv: nodeOptionsFor(CHILD), stdio: ['ignore', 'ignore', 'inherit', 'ipc'], serialization: 'json' });
    const started: Launcher = { child, pending: new Map() };
    child.on('message', (reply: LaunchReply) => settle(started, reply.id, reply));
    const gone = (): void => {
      if (launcher === started) launcher = undefined;
      for (const id of [...started.pending.keys()]) settle(started, id, undefined, new Error('the launcher exited'));
    };
    child.on('exit', gone);
    child.on('disconnect', gone);
    child.on('error', gone);
    child.unref();
    child.channel?.unref();
    launcher = started;
    return started;
  } catch {
    return undefined;
  }
}

/** The same call from this process: promisified execFile already keeps the contract above. */
function execHere(file: string, args: readonly string[], options: LaunchOptions): Promise<Launched> {
  const running = execFileAsync(file, [...args], { cwd: options.cwd, env: options.env, maxBuffer: options.maxBuffer, encoding: options.encoding ?? 'utf8' });
  running.child.stdin?.on('error', () => undefined); // a program that exits before reading it all
  if (options.input !== undefined) running.child.stdin?.end(options.input);
  return running;
}

/** Stops the launcher (tests; a worker's launcher ends with the worker). */
export function stopLauncher(): void {
  if (launcher?.child.connected) launcher.child.disconnect();
  launcher = undefined;
}
