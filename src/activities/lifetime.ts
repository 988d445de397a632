import { spawnSync } from 'node:child_process';
import { findExecutable } from '../shared/executables';

/**
 * Ties a command's processes to the worker's life where bubblewrap does not (the `none` and
 * `process` levels). The command runs as the first process of a pid namespace of its own
 * (`unshare --pid --fork --kill-child`, in a user namespace so no privilege is needed), and
 * `unshare` itself gets SIGKILL when the worker dies (`setpriv --pdeathsig`). When the worker
 * dies, `unshare` dies, the namespace's first process gets SIGKILL, and the kernel kills every
 * process in the namespace, including any that left the process group with setsid. Nothing
 * else changes: same files, same network, same user. Setuid programs (sudo) do not work inside.
 */

export interface Lifetime {
  /** Wraps a program and its arguments; unchanged when the namespace is not available here. */
  readonly wrap: (file: string, args: readonly string[]) => { file: string; args: string[] };
  /** Why commands are not bound here (undefined when they are). */
  readonly unavailable?: string;
}

let probed: Lifetime | undefined;

/** Whether this machine can bind commands to the worker's life, probed once per process. */
export function processLifetime(): Lifetime {
  probed ??= probe();
  return probed;
}

function namespaceArgs(unshare: string): string[] {
  return [unshare, '--user', '--map-current-user', '--pid', '--fork', '--kill-child'];
}

function probe(): Lifetime {
  const setpriv = findExecutable('setpriv');
  const unshare = findExecutable('unshare');
  const unchanged = (why: string): Lifetime => ({ wrap: (file, args) => ({ file, args: [...args] }), unavailable: why });
  if (!setpriv || !unshare) return unchanged(`${!setpriv ? 'setpriv' : 'unshare'} is not installed (util-linux)`);
  const prefix = ['--pdeathsig', 'KILL', '--', ...namespaceArgs(unshare), '--'];
  const result = spawnSync(setpriv, [...prefix, '/bin/sh', '-c', 'test $$ -eq 1'], { timeout: 5_000, encoding: 'utf8' });
  if (result.status !== 0) {
    const detail = (result.stderr ?? '').trim().split('\n').slice(-1)[0] || (result.error?.message ?? `exit ${result.status}`);
    return unchanged(`a pid namespace could not be made (${detail})`);
  }
  return { wrap: (file, args) => ({ file: setpriv, args: [...prefix, file, ...args] }) };
}
