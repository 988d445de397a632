/**
 * The system programs some tests need beyond `npm install`: bubblewrap (the integration tier),
 * Chromium (the Web UI end-to-end test), Debian's PostgreSQL server (the ledger tests' second
 * backend) and Prometheus with its promtool (the alerting-rules tests). test/global-setup.ts and .ci/run both use this module, so a developer's `npm test`
 * and CI get them the same way:
 *
 *   - present: used;
 *   - missing, and we are root on a machine with apt-get: installed from Debian's packages;
 *   - missing otherwise: the tests that need it are skipped, with one line naming what is
 *     missing and the command that installs it (see test/setup/prerequisites.ts).
 *
 * In CI (CI=true) nothing may be skipped: a missing program fails the run instead.
 *
 * Run on its own (`npx tsx test/setup/system-packages.ts [--require]`) it installs what it can,
 * prints one line per program, and with --require exits 1 when any is still missing.
 */
import { execFile } from 'node:child_process';
import { accessSync, constants, readdirSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import type { AgentCli } from '../../src/activities/agents/cli-invocations';
import { findExecutable } from '../../src/shared/executables';
import { loadRuntimeConfig } from '../../src/runtime/config';
import { aptInstall, runInstaller, whyNotInstall } from '../../src/runtime/debian-packages';

const execFileAsync = promisify(execFile);

export type SystemProgram = 'bubblewrap' | 'chromium' | 'postgresql' | 'prometheus' | AgentCliProgram;
/** The agent CLIs the real-CLI tests drive (installed by scripts/install-agent-clis.sh, not apt). */
export type AgentCliProgram = AgentCli;

export const SYSTEM_PROGRAMS: readonly SystemProgram[] = ['bubblewrap', 'chromium', 'postgresql', 'prometheus', 'aider', 'codex', 'claude'];
const AGENT_CLIS: readonly AgentCliProgram[] = ['aider', 'codex', 'claude'];
const isAgentCli = (program: SystemProgram): program is AgentCliProgram => (AGENT_CLIS as readonly string[]).includes(program);

/** The Warden home's tools folder, where `npm run tools:install` puts the agent CLIs and `warden run --agent` finds them. */
export const TOOLS_DIR = path.join(loadRuntimeConfig(process.env).wardenHome, 'tools');
const CLI_BINARY: Record<AgentCliProgram, string> = {
  aider: 'aider-venv/bin/aider',
  codex: 'npm/node_modules/.bin/codex',
  claude: 'npm/node_modules/.bin/claude',
};

/** What each program is for, and the Debian package it comes in. */
const DEBIAN_PACKAGE: Record<Exclude<SystemProgram, AgentCliProgram>, string> = { bubblewrap: 'bubblewrap', chromium: 'chromium', postgresql: 'postgresql', prometheus: 'prometheus' };
const NEEDED_BY: Record<SystemProgram, string> = {
  bubblewrap: 'every intent that runs its tests (they run in bubblewrap) and the sandbox tests: the integration tier stops without it',
  chromium: 'the Web UI end-to-end test',
  postgresql: "the ledger tests' second backend",
  prometheus: 'the alerting-rules tests (promtool checks the rules, Prometheus scrapes a worker and fires them)',
  aider: 'the real-CLI tests',
  codex: 'the real-CLI tests',
  claude: 'the real-CLI tests',
};

export type ProgramStatus =
  | { readonly program: SystemProgram; readonly available: true; readonly detail: string; readonly path: string }
  | { readonly program: SystemProgram; readonly available: false; readonly reason: string; readonly install: string };

/** The command that installs `program` on Debian. */
export function installCommand(program: SystemProgram): string {
  if (isAgentCli(program)) return 'npm run tools:install';
  return `sudo apt-get install -y ${DEBIAN_PACKAGE[program]}`;
}

/** Whether this run is CI (CI set to anything but empty, false or 0). */
export function isCi(env: NodeJS.ProcessEnv = process.env): boolean {
  const ci = (env.CI ?? '').trim().toLowerCase();
  return ci !== '' && ci !== 'false' && ci !== '0';
}

/**
 * Finds each program, installs the missing ones from Debian's packages when we are root and
 * apt-get is here (unless WARDEN_TEST_INSTALL=0), and finds them again.
 */
export async function ensureSystemPrograms(options: { log: (message: string) => void; env?: NodeJS.ProcessEnv }): Promise<ProgramStatus[]> {
  const env = options.env ?? process.env;
  let statuses = await Promise.all(SYSTEM_PROGRAMS.map((program) => findProgram(program, env)));
  // The agent CLIs come from npm and PyPI, into the project's tools folder: no root needed.
  if (statuses.some((s) => !s.available && isAgentCli(s.program))) {
    if (env.WARDEN_TEST_INSTALL === '0') options.log('not installing the agent CLIs: WARDEN_TEST_INSTALL=0');
    else {
      options.log(`installing the agent CLIs under ${TOOLS_DIR} (npm run tools:install; about a minute the first time)`);
      try {
        await runInstaller('bash', [path.resolve(__dirname, '../../scripts/install-agent-clis.sh')]);
      } catch (error) {
        options.log(`installing the agent CLIs failed: ${error instanceof Error ? error.message : String(error)}`);
      }
      statuses = await Promise.all(SYSTEM_PROGRAMS.map((program) => findProgram(program, env)));
    }
  }
  const missing = statuses.filter((s): s is Extract<ProgramStatus, { available: false }> & { program: Exclude<SystemProgram, AgentCliProgram> } => !s.available && !isAgentCli(s.program));
  if (missing.length === 0) return statuses;

  const packages = missing.map((s) => DEBIAN_PACKAGE[s.program]);
  const why = whyNotInstall(env);
  if (why !== undefined) {
    options.log(`not installing ${packages.join(', ')}: ${why}`);
    return statuses;
  }
  options.log(`installing ${packages.join(' ')} from Debian's packages (apt-get; this takes a minute or two the first time)`);
  try {
    await aptInstall(packages);
  } catch (error) {
    options.log(`apt-get failed: ${error instanceof Error ? error.message : String(error)}`);
  }
  statuses = await Promise.all(SYSTEM_PROGRAMS.map((program) => findProgram(program, env)));
  return statuses;
}

async function findProgram(program: SystemProgram, env: NodeJS.ProcessEnv): Promise<ProgramStatus> {
  const missing = (reason: string): ProgramStatus => ({ program, available: false, reason, install: installCommand(program) });
  switch (program) {
    case 'bubblewrap': {
      const bwrap = onPath('bwrap', env);
      if (!bwrap) return missing('bwrap is not installed');
      // The same confinement the sandbox asks for: a bwrap that cannot make namespaces here is no use.
      const probe = await run(bwrap, ['--unshare-all', '--die-with-parent', '--cap-drop', 'ALL', '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp', '--', '/bin/true']);
      if (!probe.ok) return missing(`${bwrap} cannot create its namespaces here (${probe.output || 'no message'})`);
      const version = await run(bwrap, ['--version']);
      return { program, available: true, path: bwrap, detail: version.output || bwrap };
    }
    case 'chromium': {
      const fromEnv = env.WARDEN_TEST_CHROMIUM;
      const chromium = fromEnv ?? onPath('chromium', env) ?? onPath('chromium-browser', env);
      if (!chromium) return missing('no chromium on PATH and WARDEN_TEST_CHROMIUM is not set');
      const version = await run(chromium, ['--version']);
      if (!version.ok) return missing(`${chromium} --version failed (${version.output || 'no message'})`);
      return { program, available: true, path: chromium, detail: version.output };
    }
    case 'aider':
    case 'codex':
    case 'claude': {
      const installed = path.join(TOOLS_DIR, CLI_BINARY[program]);
      const cli = isExecutable(installed) ? installed : onPath(program, env);
      if (!cli) return missing(`not under ${TOOLS_DIR} nor on PATH`);
      const version = await run(cli, ['--version']);
      if (!version.ok) return missing(`${cli} --version failed (${version.output || 'no message'})`);
      return { program, available: true, path: cli, detail: version.output };
    }
    case 'prometheus': {
      // The package ships both: the server the alert test runs and the tool that checks the rules.
      const prometheus = onPath('prometheus', env);
      if (!prometheus) return missing('prometheus is not installed');
      if (!isExecutable(path.join(path.dirname(prometheus), 'promtool'))) return missing(`no promtool beside ${prometheus}`);
      const version = await run(prometheus, ['--version']);
      if (!version.ok) return missing(`${prometheus} --version failed (${version.output || 'no message'})`);
      return { program, available: true, path: prometheus, detail: version.output };
    }
    case 'postgresql': {
      const bin = debianPostgresBin();
      if (!bin) return missing('no initdb under /usr/lib/postgresql/*/bin');
      const version = await run(path.join(bin, 'postgres'), ['--version']);
      if (!version.ok) return missing(`${bin}/postgres --version failed (${version.output || 'no message'})`);
      return { program, available: true, path: bin, detail: version.output };
    }
  }
}

/** The newest Debian PostgreSQL's bin folder (holding initdb and postgres), if any. */
export function debianPostgresBin(root = '/usr/lib/postgresql'): string | undefined {
  let versions: string[];
  try {
    versions = readdirSync(root);
  } catch {
    return undefined;
  }
  const bins = versions
    .filter((v) => /^\d+(\.\d+)?$/.test(v))
    .sort((a, b) => Number(b) - Number(a))
    .map((v) => path.join(root, v, 'bin'))
    .filter((bin) => isExecutable(path.join(bin, 'initdb')) && isExecutable(path.join(bin, 'postgres')));
  return bins[0];
}

function onPath(name: string, env: NodeJS.ProcessEnv): string | undefined {
  return findExecutable(name, env.PATH ?? '');
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

async function run(file: string, args: string[]): Promise<{ ok: boolean; output: string }> {
  try {
    // A hang guard: a Python CLI's --version can take many seconds on a busy machine.
    const { stdout, stderr } = await execFileAsync(file, args, { timeout: 120_000 });
    return { ok: true, output: `${stdout}${stderr}`.trim().split('\n')[0] ?? '' };
  } catch (error) {
    const e = error as { stderr?: string; message?: string };
    return { ok: false, output: (e.stderr || e.message || '').trim().split('\n')[0] ?? '' };
  }
}

/** One line per program: what was found, or what is missing and how to install it. */
export function describeStatus(status: ProgramStatus): string {
  return status.available
    ? `${status.program}: ${status.detail} (${status.path})`
    : `${status.program}: missing (${status.reason}), needed by ${NEEDED_BY[status.program]}; install it with: ${status.install}`;
}

if (require.main === module) {
  const require_ = process.argv.includes('--require');
  ensureSystemPrograms({ log: (m) => process.stderr.write(`[system-packages] ${m}\n`) }).then(
    (statuses) => {
      for (const status of statuses) process.stdout.write(`${describeStatus(status)}\n`);
      process.exitCode = require_ && statuses.some((s) => !s.available) ? 1 : 0;
    },
    (error: unknown) => {
      process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
