/**
 * What agent-written code tried inside its bubblewrap sandbox, kept as evidence. The sandbox's
 * network is its own, so nothing on the host can be reached; but a refusal the agent never
 * reports leaves no trace. A small Node watcher, started first inside the sandbox (before the
 * gateway's forwarder and the command), therefore:
 *
 * - listens on the ports an agent would reach for (Temporal, its Web UI, PostgreSQL, the web
 *   app, common databases, the cloud metadata address) and reports every connection, then
 *   resets it: the port and what it stands for, never a byte of what was sent;
 * - looks at the sandbox's private /tmp (its scratch HOME included) before and after the
 *   command, and reports shell rc files, credential paths and git config written there.
 *
 * Reports go, one JSON line each, to file descriptor 3: a pipe to the worker that the command
 * cannot take back (see runProcess's `report`). Adding the metadata address to the sandbox's
 * loopback takes CAP_NET_ADMIN inside its network namespace: bubblewrap grants it (with
 * CAP_SETPCAP to give everything up again) to a short setup shell that adds the address, lets
 * unprivileged code listen on port 80 in that namespace, and then drops every capability with
 * `setpriv` before the watcher starts. Where that does not work here, the rest still runs.
 */
import { spawnSync } from 'node:child_process';
import { SANDBOX_GATEWAY_PORT } from '../gateway/sandbox-route';
import { findExecutable } from '../shared/executables';
import type { AttemptReport, SandboxAttempt } from '../shared/sandbox-attempts';

/** A port watched inside the sandbox, and what an agent connecting to it was after. */
export interface Tripwire {
  readonly port: number;
  readonly target: string;
}

/** The cloud metadata address (AWS, GCP, Azure and others serve instance credentials there). */
export const METADATA_ADDRESS = '169.254.169.254';

/** The ports every sandbox watches, whatever this worker's own addresses are. */
const KNOWN_TRIPWIRES: readonly Tripwire[] = [
  // The embedded Temporal server's ports (src/runtime/temporal.ts).
  { port: 7233, target: 'Temporal frontend' },
  { port: 8233, target: 'Temporal Web UI' },
  { port: 5432, target: 'PostgreSQL' },
  // The embedded PostgreSQL's default port (src/ledger/embedded-server.ts).
  { port: 5433, target: 'embedded PostgreSQL' },
  // The web app's default port (config serve.port).
  { port: 7431, target: 'Warden web app' },
  { port: 3306, target: 'MySQL' },
  { port: 6379, target: 'Redis' },
  { port: 27017, target: 'MongoDB' },
  { port: 80, target: `cloud metadata (${METADATA_ADDRESS})` },
];

/** The port of `host:port` or of a URL, when it has one. */
function portOf(address: string | undefined): number | undefined {
  if (!address) return undefined;
  const m = /:(\d{1,5})(?:[/?#]|$)/.exec(address.replace(/^[a-z]+:\/\/[^@/]*@/i, '//'));
  const port = m ? Number(m[1]) : NaN;
  return port > 0 && port < 65536 ? port : undefined;
}

/**
 * The ports watched for this worker: the known ones, plus the ports its own Temporal server and
 * database really use (TEMPORAL_ADDRESS, DATABASE_URL), one tripwire a port.
 */
export function tripwires(env: NodeJS.ProcessEnv = process.env): Tripwire[] {
  const own: Tripwire[] = [];
  const temporal = portOf(env.TEMPORAL_ADDRESS);
  if (temporal !== undefined) own.push({ port: temporal, target: "this worker's Temporal server" });
  const database = portOf(env.DATABASE_URL);
  if (database !== undefined) own.push({ port: database, target: "this worker's database" });
  const byPort = new Map<number, Tripwire>();
  for (const wire of [...KNOWN_TRIPWIRES, ...own]) {
    if (wire.port !== SANDBOX_GATEWAY_PORT && !byPort.has(wire.port)) byPort.set(wire.port, wire);
  }
  return [...byPort.values()];
}

/** What the watcher is told: its tripwires, and the folders under /tmp that are not scratch (the worktree). */
export interface WatchConfig {
  readonly tripwires: readonly Tripwire[];
  readonly skip: readonly string[];
  readonly home: string;
}

/** The watcher, run with `node -e`: argv is its config (JSON), then the command it runs and watches. */
export const WATCHER_SOURCE = `
const net = require('node:net');
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const [configText, ...command] = process.argv.slice(1);
const config = JSON.parse(configText);
let reportable = false;
try { const s = fs.fstatSync(3); reportable = s.isFIFO() || s.isSocket(); } catch {}
const report = (entry) => { if (reportable) try { fs.writeSync(3, JSON.stringify(entry) + '\\n'); } catch {} };
const RC = new Set(['.bashrc', '.bash_profile', '.bash_login', '.bash_logout', '.profile', '.zshrc', '.zshenv', '.zprofile', '.zlogin', '.kshrc', '.cshrc', '.tcshrc', '.inputrc', '.gitconfig', '.git-credentials', '.netrc', '.npmrc', '.pypirc', '.pgpass', '.my.cnf']);
const SECRET_DIRS = new Set(['.aws', '.ssh', '.gnupg', '.kube', '.docker', '.azure']);
const matters = (file) => {
  const parts = file.split('/');
  if (RC.has(parts[parts.length - 1])) return true;
  if (parts.some((p) => SECRET_DIRS.has(p))) return true;
  return /\\/\\.config\\/(?:git|gcloud|gh)\\//.test(file);
};
const skip = new Set(config.skip);
const scan = () => {
  const found = new Map();
  let budget = 20000;
  const walk = (dir, depth) => {
    if (depth > 8) return;
    let entries;
    try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch { return; }
    for (const entry of entries) {
      if (--budget < 0) return;
      const full = path.join(dir, entry.name);
      if (skip.has(full) || entry.name === 'node_modules') continue;
      if (entry.isDirectory()) walk(full, depth + 1);
      else if (matters(full)) {
        try { const s = fs.lstatSync(full); found.set(full, s.size + ':' + s.mtimeMs + ':' + s.ino); } catch {}
      }
    }
  };
  walk('/tmp', 0);
  return found;
};
const listen = (wire) => new Promise((resolve) => {
  const server = net.createServer((socket) => {
    report({ kind: 'connect', port: wire.port, target: wire.target, address: socket.localAddress });
    socket.on('error', () => {});
    socket.resetAndDestroy();
  });
  server.once('error', () => {
    const v4 = net.createServer(server.listeners('connection')[0]);
    v4.once('error', () => resolve(undefined));
    v4.listen(wire.port, '0.0.0.0', () => resolve(v4));
  });
  server.listen({ port: wire.port, host: '::', ipv6Only: false }, () => resolve(server));
});
Promise.all(config.tripwires.map(listen)).then((servers) => {
  const before = scan();
  const child = spawn(command[0], command.slice(1), { stdio: 'inherit' });
  const forward = (signal) => child.kill(signal);
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, forward);
  child.on('error', (error) => { process.stderr.write('warden: ' + error.message + '\\n'); process.exit(127); });
  child.on('exit', (code, signal) => {
    for (const server of servers) if (server) server.close();
    for (const [file, stamp] of scan()) {
      if (before.get(file) === stamp) continue;
      const shown = file === config.home || file.startsWith(config.home + '/') ? '~' + file.slice(config.home.length) : file;
      report({ kind: 'scratch-write', path: shown });
    }
    if (signal) { process.removeAllListeners(signal); process.kill(process.pid, signal); }
    else process.exit(code === null ? 1 : code);
  });
});
`;

/** The command that runs `inner` (program and arguments) under the watcher. */
export function watched(nodePath: string, config: WatchConfig, inner: readonly string[]): string[] {
  return [nodePath, '-e', WATCHER_SOURCE, '--', JSON.stringify(config), ...inner];
}

/** The capabilities bubblewrap gives the setup shell (and nothing after it: see `withNetworkSetup`). */
export const SETUP_CAPABILITIES = ['--cap-add', 'CAP_NET_ADMIN', '--cap-add', 'CAP_SETPCAP'];

/** Adds the metadata address and opens low ports in the sandbox's namespace, then gives up every capability. */
const SETUP_SHELL = [
  'ip="$1"; setpriv="$2"; shift 2',
  `"$ip" addr add ${METADATA_ADDRESS}/32 dev lo 2>/dev/null`,
  'echo 0 > /proc/sys/net/ipv4/ip_unprivileged_port_start 2>/dev/null',
  'exec "$setpriv" --bounding-set=-all --inh-caps=-all --ambient-caps=-all -- "$@"',
].join('\n');

/** The programs the setup needs, on this worker. */
function setupPrograms(): { ip: string; setpriv: string } | undefined {
  const searchPath = `${process.env.PATH ?? '/usr/bin:/bin'}:/usr/sbin:/sbin`;
  const ip = findExecutable('ip', searchPath);
  const setpriv = findExecutable('setpriv', searchPath);
  return ip && setpriv ? { ip, setpriv } : undefined;
}

let setupWorks: boolean | undefined;

/**
 * Whether this worker's bubblewrap can give the setup shell its capabilities and `setpriv` can
 * take them all away again (tried once: `bwrap … --cap-add … setpriv … true`). Without it the
 * metadata address goes unwatched; the other tripwires need no capability.
 */
export function networkSetupWorks(bwrap: string, baseArgs: readonly string[]): boolean {
  if (setupWorks !== undefined) return setupWorks;
  const programs = setupPrograms();
  if (!programs) return (setupWorks = false);
  const probe = spawnSync(bwrap, [...baseArgs, ...SETUP_CAPABILITIES, '--', programs.setpriv, '--bounding-set=-all', '--inh-caps=-all', '--ambient-caps=-all', '--', '/bin/true'], {
    stdio: 'ignore',
    timeout: 5_000,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
  });
  return (setupWorks = probe.status === 0);
}

/** `inner` behind the setup shell (bubblewrap must add SETUP_CAPABILITIES for it to do anything). */
export function withNetworkSetup(inner: readonly string[]): string[] {
  const programs = setupPrograms();
  if (!programs) return [...inner];
  return ['/bin/sh', '-c', SETUP_SHELL, 'warden-net-setup', programs.ip, programs.setpriv, ...inner];
}

/** Most attempts kept of one run (the rest are counted): a connection loop must not flood the ledger. */
export const MAX_ATTEMPTS_KEPT = 50;

/** The watcher's report (fd 3) as attempts; lines that are not its JSON are ignored. */
export function parseWatchReport(text: string): AttemptReport {
  const attempts: SandboxAttempt[] = [];
  let more = 0;
  for (const line of text.split('\n')) {
    let entry: unknown;
    try {
      entry = JSON.parse(line);
    } catch {
      continue;
    }
    const attempt = attemptOf(entry);
    if (!attempt) continue;
    if (attempts.length < MAX_ATTEMPTS_KEPT) attempts.push(attempt);
    else more += 1;
  }
  return { attempts, more };
}

function attemptOf(entry: unknown): SandboxAttempt | undefined {
  if (typeof entry !== 'object' || entry === null) return undefined;
  const e = entry as Record<string, unknown>;
  if (e.kind === 'connect' && typeof e.port === 'number' && typeof e.target === 'string') {
    return { kind: 'connect', port: e.port, target: e.target.slice(0, 80), ...(typeof e.address === 'string' ? { address: e.address.slice(0, 64) } : {}) };
  }
  if (e.kind === 'scratch-write' && typeof e.path === 'string') return { kind: 'scratch-write', path: e.path.slice(0, 300) };
  return undefined;
}
