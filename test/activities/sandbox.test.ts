import { SpendMeter } from '../../src/gateway/spend-meter';
/**
 * Command agents in their sandboxes, with the real bubblewrap (Debian's `bubblewrap`; the test
 * setup installs it where it can). Without a working bwrap the tests that need it are skipped,
 * and the run's summary says so (in CI they fail instead).
 *
 * The repository and its worktree live under .warden/ (not /tmp, which the sandbox replaces
 * with its own), so "read-only" is tested on the real filesystem.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { AgentRequest } from '../../src/activities/agents/agent';
import { createCommandAgent, type CommandAgentDeps } from '../../src/activities/agents/command-agent';
import { networkOf } from '../../src/shared/agent-routing';
import {
  bubblewrapAvailable,
  gitDirsOf,
  probeBubblewrap,
  programMounts,
  sandboxCommand,
  SANDBOX_HOME,
  type BubblewrapProbe,
} from '../../src/activities/sandbox';
import { ensureWorktree } from '../../src/activities/worktree';
import { createSampleRepo } from '../../src/client/sample-repo';
import { FailureType, NON_RETRYABLE_FAILURES } from '../../src/shared/errors';
import { CommandAgentProfileSchema, IntentSchema, type CommandAgentProfile } from '../../src/shared/intent';
import { describeWith, itWith } from '../setup/prerequisites';
import { processesWith } from '../helpers/processes';
import { processLifetime } from '../../src/activities/lifetime';
import { runProcess } from '../../src/activities/process';

const SCRATCH = path.resolve(__dirname, '../../.warden/test-sandbox');

let root: string;
let repo: string;
let worktree: string;

beforeAll(async () => {
  mkdirSync(SCRATCH, { recursive: true });
  root = mkdtempSync(path.join(SCRATCH, 'run-'));
  repo = createSampleRepo(path.join(root, 'repo'));
  worktree = (await ensureWorktree({ repoPath: repo, baseBranch: 'main', intentId: 'sandboxed', worktreeRoot: path.join(root, 'worktrees') }))
    .worktreePath;
});

afterAll(() => {
  if (root) rmSync(root, { recursive: true, force: true });
  try {
    rmdirSync(SCRATCH); // only when no other run is using it
  } catch {
    // not empty, or already gone
  }
});

function profile(fields: Partial<CommandAgentProfile> & { command: string }): CommandAgentProfile {
  // A hang guard, not a figure: each command here is done in a second or so, more on a busy machine.
  return CommandAgentProfileSchema.parse({ kind: 'command', timeout: '5m', ...fields });
}

function request(fields: Partial<AgentRequest> = {}): AgentRequest {
  return {
    intentId: 'sandboxed',
    stage: 'impl',
    attempt: 1,
    prompt: 'do the thing',
    worktreePath: worktree,
    signal: new AbortController().signal,
    heartbeat: () => undefined,
    meter: new SpendMeter({ pricing: {}, declaredCapUsd: '0' }),
    ...fields,
  };
}

async function run(fields: Partial<CommandAgentProfile> & { command: string }, req: Partial<AgentRequest> = {}, deps?: CommandAgentDeps): Promise<string> {
  return (await createCommandAgent(profile(fields), deps).run(request(req))).output;
}

async function failureOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected the agent to fail');
}

/** `'…'` for /bin/sh. */
const q = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

/** Runs `attempt` in the shell and prints `label ok` or `label denied`. */
const tryTo = (label: string, attempt: string) => `if (${attempt}) 2>/dev/null; then echo "${label} ok"; else echo "${label} denied"; fi`;

function lines(output: string): string[] {
  return output.trim().split('\n');
}

/** Every file under `dir` with its content, to show nothing changed. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath ?? (entry as unknown as { path: string }).path, entry.name);
    out[path.relative(dir, file)] = readFileSync(file, 'latin1');
  }
  return out;
}

const unavailable = (): Promise<BubblewrapProbe> => Promise.resolve({ available: false, reason: 'probe says no (test)' });

describeWith('bubblewrap', 'bubblewrap sandbox', () => {
  it('is found and works in this environment', async () => {
    expect(await bubblewrapAvailable()).toBe(true);
    expect(probeBubblewrap()).toBe(probeBubblewrap()); // cached
  });

  it('lets the agent write in its worktree, and only there', async () => {
    const hostTmpFile = path.join(os.tmpdir(), `warden-sandbox-escape-${process.pid}`);
    const output = await run({
      sandbox: 'bubblewrap',
      command: [
        tryTo('worktree', 'printf sandboxed > made-here.txt && mkdir -p lib/new && touch lib/new/x.js'),
        tryTo('repo-file', `echo pwned >> ${q(path.join(repo, 'README.md'))}`),
        tryTo('repo-new-file', `touch ${q(path.join(repo, 'pwned.txt'))}`),
        tryTo('scratch', `touch ${q(path.join(root, 'pwned.txt'))}`),
        tryTo('etc', 'touch /etc/warden-pwned'),
        tryTo('host-tmp', `echo pwned > ${q(hostTmpFile)}`),
        tryTo('remount', 'mount -o remount,bind,rw / /'),
        'pwd',
      ].join('\n'),
    });
    // Inside, /tmp is a fresh tmpfs: a path under the host's /tmp (as in a checkout there) is
    // not read-only but simply not the host's — the write lands in the sandbox and vanishes.
    const underHostTmp = (p: string): string => (path.resolve(p).startsWith(`${os.tmpdir()}/`) ? 'ok' : 'denied');
    expect(lines(output)).toEqual([
      'worktree ok',
      `repo-file ${underHostTmp(repo)}`,
      `repo-new-file ${underHostTmp(repo)}`,
      `scratch ${underHostTmp(root)}`,
      'etc denied',
      // /tmp inside is the sandbox's own tmpfs: the write lands there and vanishes with it.
      'host-tmp ok',
      'remount denied',
      worktree,
    ]);
    expect(readFileSync(path.join(worktree, 'made-here.txt'), 'utf8')).toBe('sandboxed');
    expect(existsSync(path.join(worktree, 'lib/new/x.js'))).toBe(true);
    expect(readFileSync(path.join(repo, 'README.md'), 'utf8')).not.toContain('pwned');
    expect(existsSync(path.join(repo, 'pwned.txt'))).toBe(false);
    expect(existsSync(path.join(root, 'pwned.txt'))).toBe(false);
    expect(existsSync(hostTmpFile)).toBe(false);
    rmSync(path.join(worktree, 'made-here.txt'));
    rmSync(path.join(worktree, 'lib/new'), { recursive: true });
  });

  it('keeps .git read-only: the worktree pointer, its git dir and the common dir', async () => {
    const dirs = gitDirsOf(worktree);
    expect(dirs).toBeDefined();
    const { gitDir, gitCommonDir } = dirs!;
    expect(gitCommonDir).toBe(path.join(repo, '.git'));
    expect(gitDir.startsWith(path.join(gitCommonDir, 'worktrees') + path.sep)).toBe(true);
    const before = { pointer: readFileSync(path.join(worktree, '.git'), 'utf8'), common: snapshot(gitCommonDir) };

    const output = await run({
      sandbox: 'bubblewrap',
      command: [
        tryTo('pointer-write', 'echo "gitdir: /elsewhere" > .git'),
        tryTo('pointer-remove', 'rm -f .git'),
        tryTo('pointer-rename', 'mv .git moved-git'),
        tryTo('common-config', `echo "[core]hooksPath=/tmp" >> ${q(path.join(gitCommonDir, 'config'))}`),
        tryTo('common-hook', `printf '#!/bin/sh\\n' > ${q(path.join(gitCommonDir, 'hooks', 'pre-commit'))}`),
        tryTo('worktree-head', `echo 0000 > ${q(path.join(gitDir, 'HEAD'))}`),
        tryTo('git-commit', 'git -c user.name=a -c user.email=a@b commit -q --allow-empty -m sneaky'),
        tryTo('git-read', 'git log -1 --format=%s >/dev/null'),
      ].join('\n'),
    });
    expect(lines(output)).toEqual([
      'pointer-write denied',
      'pointer-remove denied',
      'pointer-rename denied',
      'common-config denied',
      'common-hook denied',
      'worktree-head denied',
      'git-commit denied',
      // Reading history still works: agents may run git log, diff and status.
      'git-read ok',
    ]);
    expect(readFileSync(path.join(worktree, '.git'), 'utf8')).toBe(before.pointer);
    expect(snapshot(gitCommonDir)).toEqual(before.common);
  });

  describe('network', () => {
    let server: net.Server;
    let port: number;
    beforeAll(async () => {
      server = net.createServer((socket) => socket.end('hello from the host\n'));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      port = (server.address() as net.AddressInfo).port;
    });
    afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

    const connect = () => `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port} && cat <&3'`;

    it('has none unless the profile allows it', async () => {
      expect(lines(await run({ sandbox: 'bubblewrap', command: tryTo('connect', connect()) }))).toEqual(['connect denied']);
    });

    it("reaches the host's network with network: 'host'", async () => {
      expect((await run({ sandbox: 'bubblewrap', network: 'host', command: connect() })).trim()).toBe('hello from the host');
    });

    it('the process level cannot take the network away (documented)', async () => {
      expect((await run({ sandbox: 'process', command: connect() }, { allowUnconfinedCode: true })).trim()).toBe('hello from the host');
    });
  });

  it("hides Warden's credentials and gives the agent its own HOME and TMPDIR", async () => {
    const planted: Record<string, string> = {
      TEMPORAL_ADDRESS: 'localhost:7233',
      TEMPORAL_API_KEY: 'k',
      WARDEN_SECRET: 's',
      DATABASE_URL: 'postgres://warden:pw@db/warden',
      PGPASSWORD: 'pw',
      SSH_AUTH_SOCK: '/run/user/0/ssh.sock',
      AGENT_API_KEY: 'visible-to-the-agent',
    };
    const saved = Object.fromEntries(Object.keys(planted).map((name) => [name, process.env[name]]));
    Object.assign(process.env, planted);
    try {
      const output = await run({ sandbox: 'bubblewrap', command: 'env; touch "$HOME/.config-test" && echo home-writable; ls -A /run | wc -l' });
      const env = Object.fromEntries(
        lines(output)
          .filter((line) => line.includes('='))
          .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
      );
      for (const hidden of ['TEMPORAL_ADDRESS', 'TEMPORAL_API_KEY', 'WARDEN_SECRET', 'DATABASE_URL', 'PGPASSWORD', 'SSH_AUTH_SOCK']) {
        expect(env).not.toHaveProperty(hidden);
      }
      expect(env.AGENT_API_KEY).toBe('visible-to-the-agent');
      expect(env.HOME).toBe(SANDBOX_HOME);
      expect(env.TMPDIR).toBe('/tmp');
      expect(env.PATH).toBe(process.env.PATH);
      expect(output).toContain('home-writable');
      // /run (local services' sockets) is an empty tmpfs.
      expect(lines(output).at(-1)?.trim()).toBe('0');
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  it("cannot read approvers' signing keys or the user's credential folders", async () => {
    const home = mkdtempSync(path.join(root, 'home-'));
    const keys = path.join(root, 'approver-keys');
    mkdirSync(path.join(home, '.ssh'), { recursive: true });
    writeFileSync(path.join(home, '.ssh', 'id_ed25519'), 'PRIVATE SSH KEY');
    mkdirSync(keys, { recursive: true });
    writeFileSync(path.join(keys, 'alice.key'), 'PRIVATE APPROVER KEY');
    const saved = { HOME: process.env.HOME, WARDEN_APPROVER_KEYS: process.env.WARDEN_APPROVER_KEYS };
    Object.assign(process.env, { HOME: home, WARDEN_APPROVER_KEYS: keys });
    try {
      const output = await run({ sandbox: 'bubblewrap', command: `ls -A ${q(keys)} | wc -l; ls -A ${q(path.join(home, '.ssh'))} | wc -l; cat ${q(path.join(keys, 'alice.key'))} ${q(path.join(home, '.ssh', 'id_ed25519'))} 2>&1; echo end` });
      expect(output).not.toContain('PRIVATE');
      expect(lines(output).slice(0, 2).map((l) => l.trim())).toEqual(['0', '0']);
      // Outside the sandbox they are there: the test would see them if the sandbox did not hide them.
      expect(readFileSync(path.join(keys, 'alice.key'), 'utf8')).toBe('PRIVATE APPROVER KEY');
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  it('sees only its own processes and has no capabilities', async () => {
    const output = await run({ sandbox: 'bubblewrap', command: 'ls /proc | grep -c "^[0-9]"; grep CapEff /proc/self/status' });
    const [count, caps] = lines(output);
    expect(Number(count)).toBeLessThan(10);
    expect(caps).toMatch(/^CapEff:\s+0+$/);
  });

  it('kills the whole sandboxed process tree when cancelled', async () => {
    // The sleeps last days (the tag is their length in seconds): only the kill ends them.
    const tag = `${Math.floor(Math.random() * 1e6)}.${process.pid}`;
    const controller = new AbortController();
    const started = path.join(worktree, 'started');
    const pending = createCommandAgent(
      profile({
        sandbox: 'bubblewrap',
        // A plain child, one in its own session and one that ignores SIGTERM.
        command: `sleep ${tag} & setsid sleep ${tag} & (trap '' TERM; sleep ${tag}) & touch started; wait`,
        timeout: '10m', // a hang guard: the cancellation below ends it
      }),
    ).run(request({ signal: controller.signal }));
    // Hang guards, not figures: each condition holds within a second or so, more on a busy
    // machine. (How fast a kill is: bench/kill-latency.ts.)
    const waitFor = async (check: () => boolean, ms = 60_000) => {
      for (const end = Date.now() + ms; Date.now() < end; ) {
        if (check()) return true;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      return check();
    };
    try {
      expect(await waitFor(() => existsSync(started))).toBe(true);
      expect(await waitFor(() => processesWith(tag).filter((p) => p.startsWith('sleep ')).length === 3)).toBe(true);
      controller.abort();
      expect(await failureOf(pending)).toBeInstanceOf(CancelledFailure);
      expect(await waitFor(() => processesWith(tag).length === 0)).toBe(true);
    } finally {
      rmSync(started, { force: true });
    }
  });

  it('applies the process limits inside bubblewrap too', async () => {
    const output = await run({ sandbox: 'bubblewrap', command: 'ulimit -c; ulimit -f; (ulimit -f unlimited) 2>/dev/null && echo raised; echo done' });
    expect(lines(output)).toEqual(['0', '2097152', 'done']);
  });
});

describe('sandbox levels', () => {
  itWith('bubblewrap', 'auto is bubblewrap where it works', async () => {
    expect((await run({ command: 'echo "$HOME"' })).trim()).toBe(SANDBOX_HOME);
  });

  it('auto falls back to process (limits, no isolation) where bubblewrap does not work, only when unconfined code is allowed', async () => {
    const output = await run({ command: 'echo "$HOME"; ulimit -c; ulimit -f' }, { allowUnconfinedCode: true }, { probeBubblewrap: unavailable });
    expect(lines(output)).toEqual([process.env.HOME ?? '', '0', '2097152']);
  });

  it('auto never falls back silently: without the opt-in it stops with SANDBOX_UNAVAILABLE and nothing runs', async () => {
    const err = (await failureOf(run({ command: 'touch ran' }, {}, { probeBubblewrap: unavailable }))) as ApplicationFailure;
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err.type).toBe(FailureType.SandboxUnavailable);
    expect(err.nonRetryable).toBe(true);
    expect(err.message).toContain('probe says no (test)');
    expect(err.message).toContain('--allow-unconfined-code');
    expect(existsSync(path.join(worktree, 'ran'))).toBe(false);
  });

  it('none and process are refused without the opt-in, before anything runs', async () => {
    for (const sandbox of ['none', 'process'] as const) {
      const err = (await failureOf(run({ sandbox, command: 'touch ran' }, { riskHint: 'LOW' }, { probeBubblewrap: unavailable }))) as ApplicationFailure;
      expect(err.type).toBe(FailureType.SandboxUnavailable);
      expect(err.message).toContain(`sandbox '${sandbox}', outside bubblewrap`);
      expect(err.message).toContain('confinement.allowUnconfinedCode');
      expect(existsSync(path.join(worktree, 'ran'))).toBe(false);
    }
  });

  it('none runs the plain command, as before sandboxes, when unconfined code is allowed', async () => {
    let probed = false;
    const probe = () => {
      probed = true;
      return unavailable();
    };
    const output = await run({ sandbox: 'none', command: 'echo "$HOME"' }, { riskHint: 'MEDIUM', allowUnconfinedCode: true }, { probeBubblewrap: probe });
    expect(output.trim()).toBe(process.env.HOME ?? '');
    expect(probed).toBe(false);
  });

  itWith('bubblewrap', 'HIGH risk runs in bubblewrap whatever the profile asks for', async () => {
    for (const sandbox of ['none', 'process', 'auto'] as const) {
      expect((await run({ sandbox, command: 'echo "$HOME"' }, { riskHint: 'HIGH' })).trim()).toBe(SANDBOX_HOME);
    }
  });

  it('HIGH risk without bubblewrap stops with a non-retryable SANDBOX_UNAVAILABLE, and nothing runs', async () => {
    for (const sandbox of ['auto', 'none', 'process', 'bubblewrap'] as const) {
      const err = await failureOf(run({ sandbox, command: 'touch ran' }, { riskHint: 'HIGH', allowUnconfinedCode: true }, { probeBubblewrap: unavailable }));
      expect(err).toBeInstanceOf(ApplicationFailure);
      const failure = err as ApplicationFailure;
      expect(failure.type).toBe(FailureType.SandboxUnavailable);
      expect(failure.nonRetryable).toBe(true);
      expect(failure.message).toContain('HIGH risk intents run only inside bubblewrap');
      expect(failure.message).toContain('probe says no (test)');
      expect(existsSync(path.join(worktree, 'ran'))).toBe(false);
    }
    expect(NON_RETRYABLE_FAILURES).toContain(FailureType.SandboxUnavailable);
  });

  it('a profile that asks for bubblewrap where there is none fails the same way, at any risk', async () => {
    const err = (await failureOf(
      run({ sandbox: 'bubblewrap', command: 'touch ran' }, { riskHint: 'LOW', allowUnconfinedCode: true }, { probeBubblewrap: unavailable }),
    )) as ApplicationFailure;
    expect(err.type).toBe(FailureType.SandboxUnavailable);
    expect(err.message).toContain("the agent profile asks for sandbox 'bubblewrap'");
    expect(existsSync(path.join(worktree, 'ran'))).toBe(false);
  });

  itWith('bubblewrap', 'PROHIBITED never runs, even with bubblewrap', async () => {
    const err = (await failureOf(run({ sandbox: 'bubblewrap', command: 'touch ran' }, { riskHint: 'PROHIBITED' }))) as ApplicationFailure;
    expect(err.type).toBe(FailureType.SandboxUnavailable);
    expect(err.nonRetryable).toBe(true);
    expect(err.message).toContain('PROHIBITED');
    expect(existsSync(path.join(worktree, 'ran'))).toBe(false);
  });

  itWith('bubblewrap', 'reads the prompt file from /tmp inside bubblewrap', async () => {
    const output = await run({ sandbox: 'bubblewrap', promptVia: 'arg', command: 'cat {promptFile}' }, { prompt: 'from a file' });
    expect(output).toBe('from a file');
  });

  it('gives a profile sandbox auto, and no network unless it names an upstream (then only the gateway)', () => {
    const parsed = IntentSchema.parse({ id: 'x', goal: 'g', repoPath: '/r', agent: { kind: 'command', command: 'claude -p' } });
    expect(parsed.agent).toMatchObject({ sandbox: 'auto' });
    expect(networkOf(parsed.agent as CommandAgentProfile)).toBe('none');
    const withUpstream = IntentSchema.parse({ id: 'x', goal: 'g', repoPath: '/r', agent: { kind: 'command', command: 'claude -p', upstream: { kind: 'anthropic', model: 'claude-test' } } });
    expect(networkOf(withUpstream.agent as CommandAgentProfile)).toBe('gateway');
    const old = IntentSchema.safeParse({ id: 'x', goal: 'g', repoPath: '/r', agent: { kind: 'command', command: 'claude -p', network: true } });
    expect(old.success).toBe(false);
    expect(JSON.stringify(old.error?.issues)).toContain("network is 'gateway'");
  });
});

describe('programMounts', () => {
  it('binds the install folder of a program the sandbox would hide: an npm prefix, a virtualenv; nothing for one elsewhere', () => {
    const tools = mkdtempSync(path.join(os.tmpdir(), 'warden-tools-'));
    try {
      // npm: node_modules/.bin/x links to the package's script; its native binary is a sibling package.
      mkdirSync(path.join(tools, 'npm/node_modules/.bin'), { recursive: true });
      mkdirSync(path.join(tools, 'npm/node_modules/pkg/bin'), { recursive: true });
      writeFileSync(path.join(tools, 'npm/node_modules/pkg/bin/x.js'), '#!/usr/bin/env node\n');
      symlinkSync('../pkg/bin/x.js', path.join(tools, 'npm/node_modules/.bin/x'));
      mkdirSync(path.join(tools, 'venv/bin'), { recursive: true });
      writeFileSync(path.join(tools, 'venv/bin/tool'), '#!/bin/sh\n');
      const real = realpathSync(tools);
      expect(programMounts(path.join(tools, 'npm/node_modules/.bin/x'))).toEqual([path.join(real, 'npm')]);
      expect(programMounts(path.join(tools, 'venv/bin/tool'))).toEqual([path.join(real, 'venv')]);
      expect(programMounts('/bin/sh')).toEqual([]);
      expect(programMounts('sh')).toEqual([]);
      expect(programMounts(path.join(tools, 'missing'))).toEqual([]);
    } finally {
      rmSync(tools, { recursive: true, force: true });
    }
  });
});

describe('sandboxCommand', () => {
  it('none and process run /bin/sh as the first process of a pid namespace that dies with the worker; process sets limits first', () => {
    // This machine has user namespaces (bubblewrap needs them too): the wrapper is there.
    expect(processLifetime().unavailable).toBeUndefined();
    const none = sandboxCommand({ level: 'none', worktreePath: worktree, network: false, command: 'echo hi' });
    expect(path.basename(none.file)).toBe('setpriv');
    expect(none.args.join(' ')).toMatch(/^--pdeathsig KILL -- \S*unshare --user --map-current-user --pid --fork --kill-child -- \/bin\/sh -c echo hi$/);
    const limited = sandboxCommand({ level: 'process', worktreePath: worktree, network: false, command: 'echo hi' });
    const shell = limited.args.slice(limited.args.indexOf('/bin/sh'));
    expect(shell.at(-1)).toBe('echo hi');
    expect(shell[2]).toContain('ulimit');
  });

  it('a command at none runs as pid 1 of its namespace, as the same user, and its exit code comes back', async () => {
    const exec = sandboxCommand({ level: 'none', worktreePath: worktree, network: false, command: 'echo "$$ $(id -u)"; exit 7' });
    const outcome = await runProcess({ command: 'x', exec, cwd: worktree, env: { PATH: process.env.PATH }, timeoutMs: 10_000, maxOutputBytes: 10_000 });
    expect(outcome.exitCode).toBe(7);
    expect(outcome.stdout.trim()).toBe(`1 ${process.getuid?.()}`);
  });

  it('mounts deeper paths last, so the worktree is writable inside /tmp and its .git read-only', () => {
    const tmpWorktree = mkdtempSync(path.join(os.tmpdir(), 'warden-sandbox-args-'));
    try {
      execFileSync('git', ['init', '-q'], { cwd: tmpWorktree });
      const { file, args } = sandboxCommand({
        level: 'bubblewrap',
        worktreePath: tmpWorktree,
        ...gitDirsOf(tmpWorktree),
        network: false,
        command: 'echo hi',
      });
      expect(path.basename(file)).toBe('bwrap');
      const at = (...needle: string[]) => args.findIndex((_, i) => needle.every((n, j) => args[i + j] === n));
      expect(at('--ro-bind', '/', '/')).toBeGreaterThanOrEqual(0);
      expect(at('--tmpfs', '/tmp')).toBeLessThan(at('--bind', tmpWorktree, tmpWorktree));
      const dotGit = path.join(tmpWorktree, '.git');
      expect(at('--bind', tmpWorktree, tmpWorktree)).toBeLessThan(at('--ro-bind', dotGit, dotGit));
      expect(args).toContain('--unshare-all');
      expect(args).not.toContain('--share-net');
      expect(args).toEqual(expect.arrayContaining(['--die-with-parent', '--cap-drop', 'ALL', '--chdir', tmpWorktree]));
      expect(args.slice(at('--'), at('--') + 2)).toEqual(['--', '/bin/sh']);
      expect(args.at(-1)).toBe('echo hi');
    } finally {
      rmSync(tmpWorktree, { recursive: true, force: true });
    }
  });
});
