import { readFileSync } from 'node:fs';
import { probeBubblewrap, probeBubblewrapAfresh, resolveSandboxLevel, UNCONFINED_OPT_IN, type BubblewrapProbe } from '../activities/sandbox';
import { agentForStage, agentIdOf } from '../shared/agent-routing';
import { findExecutable } from '../shared/executables';
import { UserError } from '../shared/errors';
import type { Intent } from '../shared/intent';
import { AGENT_STAGES } from '../shared/stages';
import { aptInstall, whyNotInstall } from './debian-packages';

/**
 * Whether this machine can run what an intent runs (the agent's commands and the repository's
 * tests) inside bubblewrap, checked before anything starts: `npm start`, `warden run`,
 * `warden worker`, `warden dev` and `warden doctor` all ask here, so a missing sandbox is one
 * paragraph naming the fix, never an intent that fails at impl.
 */

/** The kernel settings that can forbid the unprivileged user namespaces bubblewrap makes. */
const USERNS_SETTINGS: readonly { readonly file: string; readonly sysctl: string; readonly blocks: (value: string) => boolean; readonly fix: string }[] = [
  { file: '/proc/sys/kernel/unprivileged_userns_clone', sysctl: 'kernel.unprivileged_userns_clone', blocks: (v) => v === '0', fix: 'sudo sysctl -w kernel.unprivileged_userns_clone=1' },
  { file: '/proc/sys/user/max_user_namespaces', sysctl: 'user.max_user_namespaces', blocks: (v) => v === '0', fix: 'sudo sysctl -w user.max_user_namespaces=15000' },
  // Ubuntu 23.10 and later: AppArmor refuses user namespaces to programs without a profile.
  { file: '/proc/sys/kernel/apparmor_restrict_unprivileged_userns', sysctl: 'kernel.apparmor_restrict_unprivileged_userns', blocks: (v) => v === '1', fix: 'sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0' },
];

export interface SandboxReadiness {
  readonly ready: boolean;
  /** The bwrap that works, when ready. */
  readonly bwrapPath?: string;
  /** What is wrong, in a few words (when not ready). */
  readonly problem?: string;
  /** One paragraph: the package to install or the kernel setting to change. */
  readonly fix?: string;
  /** This check installed bubblewrap. */
  readonly installed?: boolean;
}

/** The kernel settings here that forbid user namespaces, each with its fix. */
export function blockingUsernsSettings(read: (file: string) => string | undefined = readSetting): { sysctl: string; value: string; fix: string }[] {
  return USERNS_SETTINGS.flatMap((s) => {
    const value = read(s.file);
    return value !== undefined && s.blocks(value) ? [{ sysctl: s.sysctl, value, fix: s.fix }] : [];
  });
}

function readSetting(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** What a failed probe means, and the paragraph that says how to fix it. */
export function describeUnready(probe: BubblewrapProbe, settings = blockingUsernsSettings(), canInstall = whyNotInstall() === undefined): SandboxReadiness {
  if (!probe.bwrapPath && /not installed/.test(probe.reason ?? '')) {
    const install = canInstall
      ? 'Install it with `apt-get install bubblewrap`, or let `warden doctor --fix` do it'
      : 'Install it with `sudo apt-get install bubblewrap` (Debian, Ubuntu), `sudo dnf install bubblewrap` (Fedora) or `sudo pacman -S bubblewrap` (Arch)';
    return {
      ready: false,
      problem: 'bubblewrap is not installed',
      fix: `Warden runs every agent and your repository's tests inside bubblewrap (the bwrap program), and it is not installed here. ${install}.`,
    };
  }
  const cause =
    settings.length > 0
      ? `the kernel forbids the user namespaces it needs (${settings.map((s) => `${s.sysctl} = ${s.value}`).join(', ')}): ${settings.map((s) => `\`${s.fix}\``).join(' and ')} allows them (add the setting to /etc/sysctl.d/ to keep it after a reboot)`
      : 'it cannot create the namespaces it needs here; in a container, start the container with user namespaces allowed (for Docker: `--security-opt seccomp=unconfined --security-opt apparmor=unconfined`), or run Warden on the host';
  return {
    ready: false,
    problem: `bubblewrap cannot run here (${probe.reason ?? 'no reason given'})`,
    fix: `Warden runs every agent and your repository's tests inside bubblewrap, and ${probe.bwrapPath ?? 'bwrap'} is installed but ${cause}.`,
  };
}

/** Checks bubblewrap as a run would use it. */
export async function checkSandbox(): Promise<SandboxReadiness> {
  const probe = await probeBubblewrap();
  return probe.available ? { ready: true, bwrapPath: probe.bwrapPath } : describeUnready(probe);
}

/**
 * Checks bubblewrap and, where it is simply missing and this process may install system
 * packages (root, apt-get), installs it, saying so in one line.
 */
export async function ensureSandbox(log: (line: string) => void): Promise<SandboxReadiness> {
  const first = await checkSandbox();
  if (first.ready || findExecutable('bwrap') !== undefined || whyNotInstall() !== undefined) return first;
  log("bubblewrap (Warden's sandbox) is missing: installing it from the system's packages (apt-get install bubblewrap)");
  try {
    await aptInstall(['bubblewrap']);
  } catch (error) {
    const detail = (error instanceof Error ? error.message : String(error)).split('\n').slice(-1)[0];
    return { ...first, problem: `${first.problem}; installing it failed (${detail})` };
  }
  const probe = await probeBubblewrapAfresh();
  return probe.available ? { ready: true, bwrapPath: probe.bwrapPath, installed: true } : describeUnready(probe);
}

/**
 * Stops a command before it starts anything when agent-written code could not run confined
 * here and the operator has not accepted running it unconfined; with that opt-in, one warning.
 */
export async function requireSandbox(options: {
  readonly allowUnconfined: boolean;
  readonly install: boolean;
  /** Say how to go without the sandbox (the commands that take --allow-unconfined-code). */
  readonly offerUnconfined: boolean;
  readonly log: (line: string) => void;
  readonly warn: (line: string) => void;
}): Promise<SandboxReadiness> {
  const readiness = options.install ? await ensureSandbox(options.log) : await checkSandbox();
  if (readiness.ready) return readiness;
  if (options.allowUnconfined) {
    options.warn(`warning: ${readiness.problem}; agent-written code runs with process limits only, as allowed (confinement.allowUnconfinedCode)`);
    return readiness;
  }
  const without = options.offerUnconfined
    ? ` Or, to run agent-written code with process limits only (it can then reach everything your user can), pass ${UNCONFINED_OPT_IN}.`
    : '';
  throw new UserError(`${readiness.problem}, so nothing was started.\n\n${readiness.fix}${without}`, 1);
}

/**
 * Refuses, before the intent starts, what a worker's sandbox rules would refuse once it runs:
 * each stage's command agent at its profile's sandbox level, and the repo's tests at impl's,
 * asked of the same resolveSandboxLevel the worker asks (a level below bubblewrap without the
 * opt-in; bubblewrap required but not usable). `probe` is bubblewrap where the worker runs: this
 * machine's when the worker is here; for a worker elsewhere, its own check answers for it.
 */
export async function refuseUnconfinableIntent(intent: Pick<Intent, 'agent' | 'stageAgents' | 'riskHint' | 'confinement'>, probe: () => Promise<BubblewrapProbe>): Promise<void> {
  const allowUnconfined = intent.confinement.allowUnconfinedCode;
  const impl = agentForStage(intent, 'impl');
  const runs = [
    ...AGENT_STAGES.map((stage) => ({ profile: agentForStage(intent, stage), what: (name: string) => `the ${stage} agent (${name})` })).flatMap(({ profile, what }) =>
      profile.kind === 'command' ? [{ setting: profile.sandbox, what: what(agentIdOf(profile)) }] : [],
    ),
    { setting: impl.kind === 'command' ? impl.sandbox : ('auto' as const), what: "the repo's tests" },
  ];
  for (const run of runs) {
    try {
      await resolveSandboxLevel({ setting: run.setting, risk: intent.riskHint, allowUnconfined, what: run.what, probe });
    } catch (error) {
      throw new UserError((error as Error).message);
    }
  }
}
