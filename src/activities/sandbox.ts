/**
 * Sandboxes for command agents. Three levels:
 *
 * - `none`: `/bin/sh -c command` as a plain child in its own process group, with Warden's
 *   credentials removed from its environment (see `agentEnvironment`). This is how command
 *   agents ran before sandboxes existed.
 * - `process`: the same, plus resource limits set by the shell before the command starts
 *   (`PROCESS_LIMITS`: no core dumps, files of at most 1 GiB, at most 4096 processes of the
 *   user). The limits are lowered, never raised, and the agent cannot raise them again.
 *   No filesystem or network isolation: that needs `bubblewrap`.
 * - `bubblewrap`: the `process` limits, run inside bubblewrap (`bwrap`, Debian's `bubblewrap`
 *   package): the whole filesystem read-only, the worktree writable, the worktree's `.git`
 *   and the repository's git dirs read-only again, a private `/tmp` (with an empty HOME in it),
 *   `/run` hidden (the sockets of PostgreSQL, Docker, D-Bus, ssh-agent live there), new
 *   user, pid, ipc, uts, cgroup and network namespaces (the network is shared only when the
 *   profile allows it), no capabilities, and death with its parent. On the sandbox's own network
 *   a run may be watched (`watch`, sandbox-watch.ts): tripwires on the ports an agent would reach
 *   for and a look at its scratch space; a setup shell then holds CAP_NET_ADMIN and CAP_SETPCAP
 *   in the sandbox's namespaces until it drops every capability, before anything else starts.
 *
 * Which level a run gets is `resolveSandboxLevel`'s decision: the profile's setting, raised to
 * `bubblewrap` for HIGH risk, and refused for PROHIBITED.
 */
import { existsSync, readFileSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../shared/errors';
import type { CommandAgentProfile, RiskClass } from '../shared/intent';
import { behindForwarder } from '../gateway/sandbox-route';
import { runProcess } from './process';
import { findExecutable } from '../shared/executables';
import { processLifetime } from './lifetime';
import { approverKeysDir } from '../shared/approver-keys-dir';
import { networkSetupWorks, SETUP_CAPABILITIES, tripwires, watched, withNetworkSetup } from './sandbox-watch';

/** How a command actually runs. */
export type SandboxLevel = 'none' | 'process' | 'bubblewrap';
/** What a profile may ask for: a level, or `auto` (bubblewrap when it works here, else process). */
export type SandboxSetting = CommandAgentProfile['sandbox'];

/** Largest file the agent may write, in the 512-byte blocks of `ulimit -f`: 1 GiB. */
export const MAX_FILE_BLOCKS = 2 * 1024 * 1024;
/** Most processes (threads, in fact) the agent's user may have; root is exempt by the kernel. */
export const MAX_PROCESSES = 4096;

/**
 * Shell code run before the command at the `process` and `bubblewrap` levels. `lower` sets a
 * limit (soft and hard, so the agent cannot raise it) only when the current hard limit is
 * higher, because only root may raise a hard limit. A limit that cannot be set is skipped: they
 * are a backstop against runaway commands, not the isolation (that is bubblewrap). RLIMIT_AS is
 * left alone: V8 and Go reserve far more address space than they use.
 */
const PROCESS_LIMITS = [
  // A failing ulimit ends a non-interactive dash, so each is tried in a subshell first.
  'lower() { cur=$(ulimit -H "$1" 2>/dev/null) || return 0; if [ "$cur" = unlimited ] || [ "$cur" -gt "$2" ]; then (ulimit "$1" "$2") 2>/dev/null && ulimit "$1" "$2"; fi; }',
  'lower -c 0',
  `lower -f ${MAX_FILE_BLOCKS}`,
  // bash and most shells call the process limit -u; dash calls it -p (bash's -p is the pipe size).
  `if (ulimit -H -u) >/dev/null 2>&1; then lower -u ${MAX_PROCESSES}; else lower -p ${MAX_PROCESSES}; fi`,
  'exec /bin/sh -c "$1"',
].join('\n');

/** Inside the sandbox: a private, empty home, so no CLI writes into (or reads logins from) the real one. */
export const SANDBOX_HOME = '/tmp/home';
/** Hidden behind an empty tmpfs: the sockets of local services (PostgreSQL, Docker, D-Bus, ssh-agent). */
const HIDDEN_DIRS = ['/run', '/var/run'];
/**
 * Folders of the worker's user that hold credentials, relative to its HOME: hidden behind an
 * empty tmpfs too, with approvers' signing keys (see approverKeysDir), whatever the network.
 */
const CREDENTIAL_DIRS = ['.ssh', '.gnupg', '.aws', '.azure', '.config/gcloud', '.kube', '.docker', '.config/gh'];

/** What bubblewrap covers with an empty folder besides /run: credentials and approvers' keys that exist here. */
export function credentialDirs(env: NodeJS.ProcessEnv = process.env): string[] {
  const home = env.HOME;
  const candidates = [approverKeysDir(env), ...(home ? CREDENTIAL_DIRS.map((dir) => path.join(home, dir)) : [])];
  return candidates.filter((dir) => {
    try {
      return statSync(dir).isDirectory() && realpathSync(dir) === path.resolve(dir);
    } catch {
      return false;
    }
  });
}

/** Variables that point at what the sandbox hides. */
const HIDDEN_VARIABLES = ['SSH_AUTH_SOCK', 'XDG_RUNTIME_DIR', 'DBUS_SESSION_BUS_ADDRESS'];

export interface SandboxSpec {
  readonly level: SandboxLevel;
  /** The only folder the command may change (bubblewrap); also its working directory. */
  readonly worktreePath: string;
  /** The repository's common git dir (`repo/.git`): read-only inside bubblewrap. */
  readonly gitCommonDir?: string;
  /** The worktree's own git dir (`repo/.git/worktrees/<name>`): read-only inside bubblewrap. */
  readonly gitDir?: string;
  /** Share the host's network (bubblewrap only; the other levels cannot take it away). */
  readonly network: boolean;
  /**
   * The model gateway's Unix socket (bubblewrap without the host's network): bound into the
   * sandbox, with a forwarder on the sandbox's loopback in front of the command.
   */
  readonly gatewaySocket?: string;
  /** Run with `/bin/sh -c`. */
  readonly command: string;
  /** A scratch folder made for this run, bound writable as the sandbox's HOME (else HOME is empty). */
  readonly homeDir?: string;
  /** More paths the command must see even where the sandbox hides them (e.g. a prompt file in /tmp). */
  readonly readOnlyPaths?: readonly string[];
  /** The bwrap executable; default: `bwrap` on PATH. */
  readonly bwrapPath?: string;
  /**
   * Watch what the command tries (bubblewrap without the host's network; see sandbox-watch.ts):
   * the run must then be given runProcess's `report` pipe, where the watcher writes.
   */
  readonly watch?: boolean;
  /**
   * Run as a user other than root inside the sandbox's user namespace (bubblewrap only), for a
   * CLI that refuses its widest mode as root. Outside the namespace it is still the worker's user.
   */
  readonly nonRoot?: boolean;
}

export interface SandboxedCommand {
  readonly file: string;
  readonly args: string[];
}

/** What a run needs to know to choose its level. */
export interface SandboxDecisionInput {
  readonly setting: SandboxSetting;
  readonly risk?: RiskClass;
  /**
   * The operator let agent-written code run outside bubblewrap (`confinement.allowUnconfinedCode`).
   * Without it a level below bubblewrap is refused, whether the profile asked for it or `auto`
   * found no working bubblewrap.
   */
  readonly allowUnconfined: boolean;
  /** What runs, for the messages: e.g. "the impl agent", "the repo's tests". */
  readonly what: string;
  /** Asked only when bubblewrap matters. */
  readonly probe: () => Promise<BubblewrapProbe>;
}

export interface BubblewrapProbe {
  readonly available: boolean;
  /** Why not, when it is not (bwrap missing, or its error: e.g. no user namespaces here). */
  readonly reason?: string;
  /** The bwrap that worked. */
  readonly bwrapPath?: string;
}

/** The flag and the config field that let agent-written code run unconfined, as the messages name them. */
export const UNCONFINED_OPT_IN = '--allow-unconfined-code (config: confinement.allowUnconfinedCode)';

/**
 * The level a run gets: risk sets a floor and the profile can only raise it. PROHIBITED never
 * runs; HIGH runs in bubblewrap or not at all; otherwise the profile decides, `auto` meaning
 * bubblewrap when it works here. Anything below bubblewrap runs only when the operator allowed
 * unconfined code. A level that cannot be had is a non-retryable SANDBOX_UNAVAILABLE failure:
 * never a silent fallback to something weaker.
 */
export async function resolveSandboxLevel(input: SandboxDecisionInput): Promise<{ level: SandboxLevel; bwrapPath?: string }> {
  const { setting, risk, what } = input;
  if (risk === 'PROHIBITED') {
    throw sandboxUnavailable(`the intent is PROHIBITED risk: no sandbox is strong enough, so ${what} never runs`);
  }
  const needsBubblewrap = risk === 'HIGH' || setting === 'bubblewrap';
  if (!needsBubblewrap && setting !== 'auto') {
    if (!input.allowUnconfined) {
      throw sandboxUnavailable(
        `${what} would run at sandbox '${setting}', outside bubblewrap, where it can reach everything the worker's user can (the Temporal server included). It was not started: use sandbox 'auto' or 'bubblewrap', or accept that with ${UNCONFINED_OPT_IN}`,
      );
    }
    return { level: setting };
  }

  const probe = await input.probe();
  if (probe.available) return { level: 'bubblewrap', bwrapPath: probe.bwrapPath };
  const why = (probe.reason ?? 'unknown reason');
  if (!needsBubblewrap) {
    if (input.allowUnconfined) return { level: 'process' };
    throw sandboxUnavailable(
      `bubblewrap is not usable on this worker (${why}), so ${what} cannot run confined and was not started. Install bubblewrap (apt-get install bubblewrap) where user namespaces are allowed, or accept running agent-written code with only process limits with ${UNCONFINED_OPT_IN}`,
    );
  }
  const reason = risk === 'HIGH' ? 'HIGH risk intents run only inside bubblewrap' : "the agent profile asks for sandbox 'bubblewrap'";
  const fix =
    risk === 'HIGH'
      ? 'run it on a worker with bubblewrap (apt-get install bubblewrap) and user namespaces allowed'
      : "install bubblewrap (apt-get install bubblewrap) where user namespaces are allowed";
  throw sandboxUnavailable(`${reason}, but bubblewrap is not usable on this worker (${why}): ${fix}. ${what} was not started.`);
}

/** The program and arguments that run `spec.command` at `spec.level`. */
export function sandboxCommand(spec: SandboxSpec): SandboxedCommand {
  switch (spec.level) {
    // Bubblewrap dies with the worker by itself; below it, the command gets a pid namespace that does.
    case 'none':
      return processLifetime().wrap('/bin/sh', ['-c', spec.command]);
    case 'process':
      return processLifetime().wrap('/bin/sh', limitedShell(spec.command));
    case 'bubblewrap': {
      const shell = ['/bin/sh', ...limitedShell(spec.command)];
      const inner = spec.gatewaySocket && !spec.network ? behindForwarder(process.execPath, spec.gatewaySocket, shell) : shell;
      const file = spec.bwrapPath ?? findExecutable('bwrap') ?? 'bwrap';
      if (!isWatched(spec)) return { file, args: [...bubblewrapArgs(spec), '--', ...inner] };
      // Not scratch: the worktree (its diff is judged), and what is bound read-only (a scratch HOME seen there again, say).
      const skip = [spec.worktreePath, ...(spec.readOnlyPaths ?? [])].filter((p) => existsSync(p)).map((p) => realpathSync(p));
      const watcher = watched(process.execPath, { tripwires: tripwires(), skip, home: SANDBOX_HOME }, inner);
      // The capabilities go to the setup shell only, which drops them all before the watcher starts.
      const setup = networkSetupWorks(file, baseArgs(false));
      return { file, args: [...bubblewrapArgs(spec), ...(setup ? SETUP_CAPABILITIES : []), '--', ...(setup ? withNetworkSetup(watcher) : watcher)] };
    }
  }
}

/**
 * The environment for a command at `level`, from one already cleaned by `agentEnvironment`.
 * Inside bubblewrap HOME and TMPDIR point into the sandbox's private /tmp, and variables that
 * name hidden sockets are dropped.
 */
export function sandboxEnvironment(level: SandboxLevel, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  if (level !== 'bubblewrap') return env;
  const copy: NodeJS.ProcessEnv = { ...env, HOME: SANDBOX_HOME, TMPDIR: '/tmp' };
  for (const name of HIDDEN_VARIABLES) delete copy[name];
  copy.PATH ??= '/usr/local/bin:/usr/bin:/bin';
  copy.LANG ??= 'C.UTF-8';
  return copy;
}

/**
 * Where git keeps a worktree's state, read from its `.git` (a `gitdir:` file for a linked
 * worktree, a folder for a main one). Undefined when the folder is not a git worktree.
 */
export function gitDirsOf(worktreePath: string): { gitDir: string; gitCommonDir: string } | undefined {
  const dotGit = path.join(worktreePath, '.git');
  try {
    const stat = statSync(dotGit);
    if (stat.isDirectory()) {
      const dir = realpathSync(dotGit);
      return { gitDir: dir, gitCommonDir: dir };
    }
    const pointer = /^gitdir:\s*(.+?)\s*$/m.exec(readFileSync(dotGit, 'utf8'))?.[1];
    if (pointer === undefined) return undefined;
    const gitDir = realpathSync(path.resolve(worktreePath, pointer));
    const commonFile = path.join(gitDir, 'commondir');
    const gitCommonDir = existsSync(commonFile)
      ? realpathSync(path.resolve(gitDir, readFileSync(commonFile, 'utf8').trim()))
      : gitDir;
    return { gitDir, gitCommonDir };
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// bubblewrap

/**
 * The namespaces and mounts every bubblewrap run uses (the probe too, so a working probe means
 * a working sandbox).
 *
 * - `--unshare-all`: user (where possible), pid, ipc, uts, cgroup and network namespaces.
 *   The pid namespace is what makes cancellation reliable: when the outer bwrap dies (our
 *   process-group kill), its init inside gets SIGKILL (`--die-with-parent`) and the kernel kills
 *   every process in the namespace, including any that called setsid().
 * - `--cap-drop ALL`: bwrap keeps all capabilities when started by root, and with them the
 *   command could remount the read-only binds writable.
 * - No `--new-session`: the command stays in our process group, so cancellation reaches it with
 *   SIGTERM first (a chance to clean up) rather than only the namespace's SIGKILL. It has no
 *   controlling terminal to abuse (runProcess starts it detached, i.e. setsid), and TIOCSTI on
 *   a pipe does nothing.
 * - `--clearenv` is not used: bwrap hands its own environment (set by the spawn, already
 *   cleaned) to the command, and `--setenv` would show secrets such as API keys in `ps`.
 */
function baseArgs(network: boolean): string[] {
  return [
    '--unshare-all',
    ...(network ? ['--share-net'] : []),
    '--die-with-parent',
    '--cap-drop',
    'ALL',
    '--ro-bind',
    '/',
    '/',
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    '--tmpfs',
    '/tmp',
  ];
}

type Mount = { readonly kind: '--bind' | '--ro-bind' | '--tmpfs'; readonly path: string };

function bubblewrapArgs(spec: SandboxSpec): string[] {
  const worktree = realpathSync(spec.worktreePath);
  const mounts: Mount[] = [];
  for (const dir of HIDDEN_DIRS) {
    // /var/run is usually a symlink to /run; bwrap cannot mount over a symlink.
    if (existsSync(dir) && realpathSync(dir) === dir) mounts.push({ kind: '--tmpfs', path: dir });
  }
  for (const dir of credentialDirs()) mounts.push({ kind: '--tmpfs', path: dir });
  mounts.push({ kind: '--bind', path: worktree });
  const readOnly = [spec.gitCommonDir, spec.gitDir, path.join(worktree, '.git'), ...(spec.readOnlyPaths ?? [])];
  // The gateway's socket (its folder: a socket is connected to by path) and the forwarder's node.
  if (spec.gatewaySocket && !spec.network) readOnly.push(path.dirname(spec.gatewaySocket), process.execPath);
  // The watcher's node.
  if (isWatched(spec)) readOnly.push(process.execPath);
  // With the network shared, DNS must keep working where resolv.conf lives under /run.
  if (spec.network) readOnly.push('/etc/resolv.conf');
  for (const entry of readOnly) {
    if (entry === undefined || !existsSync(entry)) continue;
    mounts.push({ kind: '--ro-bind', path: realpathSync(entry) });
  }

  // A mount hides what an earlier one put below it, so the deeper path goes last: the worktree
  // inside /tmp stays visible, its .git inside the worktree stays read-only, and so on.
  const depth = (p: string) => p.split('/').filter(Boolean).length;
  const ordered = mounts
    .map((mount, index) => ({ mount, index }))
    .sort((a, b) => depth(a.mount.path) - depth(b.mount.path) || a.index - b.index)
    .map(({ mount }) => mount);
  const seen = new Set<string>();
  const args = baseArgs(spec.network);
  for (const mount of ordered) {
    const key = `${mount.kind} ${mount.path}`;
    if (seen.has(key)) continue;
    seen.add(key);
    args.push(...(mount.kind === '--tmpfs' ? [mount.kind, mount.path] : [mount.kind, mount.path, mount.path]));
  }
  if (spec.homeDir) args.push('--bind', realpathSync(spec.homeDir), SANDBOX_HOME);
  else args.push('--dir', SANDBOX_HOME);
  args.push('--chdir', worktree);
  if (spec.nonRoot) args.push(...nonRootArgs());
  return args;
}

/** Whether the run is watched: asked for, in bubblewrap, on the sandbox's own network. */
function isWatched(spec: SandboxSpec): boolean {
  return spec.watch === true && spec.level === 'bubblewrap' && !spec.network;
}

/** The uid and gid a `nonRoot` run has inside the namespace when the worker is root. */
export const SANDBOX_USER_ID = 1000;

/**
 * `--uid`/`--gid` that map the worker's user to SANDBOX_USER_ID inside the user namespace; what
 * the worker owns (the worktree, the scratch home) is then the command's own there, so it stays
 * writable. A worker that is not root keeps its own uid, which is not root already.
 */
function nonRootArgs(): string[] {
  if (process.getuid?.() !== 0) return [];
  const id = String(SANDBOX_USER_ID);
  return ['--uid', id, '--gid', id];
}

/** `/bin/sh` arguments that set the `process` limits, then exec `/bin/sh -c command`. */
function limitedShell(command: string): string[] {
  return ['-c', PROCESS_LIMITS, 'warden-sandbox', command];
}

/** Re-probe a failed probe after this long: a worker should not stay unsandboxed for a hiccup. */
const FAILED_PROBE_TTL_MS = 60_000;
const PROBE_TIMEOUT_MS = 5_000;
let cached: { readonly result: Promise<BubblewrapProbe>; failedAt?: number } | undefined;

/**
 * Whether bubblewrap works here: `bwrap` on PATH and able to create the namespaces and mounts a
 * real run uses (`bwrap --unshare-all … --ro-bind / / … true`). Some containers forbid user
 * namespaces; then bwrap exists but fails. A success is cached for the process's life, a
 * failure for a minute.
 */
export function probeBubblewrap(): Promise<BubblewrapProbe> {
  if (cached === undefined || (cached.failedAt !== undefined && Date.now() - cached.failedAt > FAILED_PROBE_TTL_MS)) {
    const entry: { result: Promise<BubblewrapProbe>; failedAt?: number } = { result: runProbe() };
    void entry.result.then((probe) => {
      if (!probe.available) entry.failedAt = Date.now();
    });
    cached = entry;
  }
  return cached.result;
}

/** Probes again now, dropping what was cached (after bubblewrap was installed, say). */
export function probeBubblewrapAfresh(): Promise<BubblewrapProbe> {
  cached = undefined;
  return probeBubblewrap();
}

/** Whether bubblewrap works here (see `probeBubblewrap`). */
export async function bubblewrapAvailable(): Promise<boolean> {
  return (await probeBubblewrap()).available;
}

async function runProbe(): Promise<BubblewrapProbe> {
  const bwrapPath = findExecutable('bwrap');
  if (bwrapPath === undefined) return { available: false, reason: 'bwrap is not installed (no bwrap on PATH)' };
  try {
    const outcome = await runProcess({
      command: `${bwrapPath} (probe)`,
      exec: { file: bwrapPath, args: [...baseArgs(false), '--', '/bin/true'] },
      cwd: '/',
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      timeoutMs: PROBE_TIMEOUT_MS,
      maxOutputBytes: 64 * 1024,
    });
    if (outcome.termination === 'exited' && outcome.exitCode === 0) return { available: true, bwrapPath };
    const detail = outcome.stderr.trim().split('\n').slice(-1)[0] ?? '';
    const how = outcome.termination === 'timed-out' ? 'timed out' : `exited with ${outcome.exitCode ?? outcome.signal}`;
    return { available: false, reason: `${bwrapPath} ${how}${detail ? `: ${detail}` : ''}` };
  } catch (err) {
    return { available: false, reason: `${bwrapPath} could not start: ${(err as Error).message}` };
  }
}

/**
 * What a program needs to be seen inside bubblewrap when it lives where the sandbox hides
 * things (a tools folder under /tmp): the folder it was installed into — an npm prefix (the
 * folder holding its node_modules: a CLI's native binary is often a sibling package) or a
 * virtualenv (the folder above its bin/) — read-only. Nothing for a program elsewhere.
 */
export function programMounts(program: string): string[] {
  const found = program.includes('/') ? program : findExecutable(program);
  if (found === undefined || !existsSync(found)) return [];
  const real = realpathSync(found);
  const hidden = (p: string) => ['/tmp', ...HIDDEN_DIRS].some((dir) => p === dir || p.startsWith(`${dir}/`));
  if (!hidden(found) && !hidden(real)) return [];
  const rootOf = (p: string): string => {
    const modules = p.indexOf('/node_modules/');
    return modules > 0 ? p.slice(0, modules) : path.dirname(path.dirname(p));
  };
  return [...new Set([rootOf(path.resolve(found)), rootOf(real)])];
}

function sandboxUnavailable(message: string): ApplicationFailure {
  return ApplicationFailure.create({ type: FailureType.SandboxUnavailable, message, nonRetryable: true });
}
