import type { MergeSettings } from '../shared/merge-settings';
import type { IntentPlacement } from '../shared/placement';
import type { IntentJudge } from '../shared/scope-judge';
import { randomBytes } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { loadAgentScript } from '../activities/agents/scripted-agent';
import type { GatesConfig } from '../shared/gate-settings';
import { channelFromFlag, type NotifyChannel } from '../shared/notify-settings';
import { UsdSchema } from '../shared/schema-primitives';
import { UserError } from '../shared/errors';
import { secretShapesIn } from '../shared/redact';
import { textProblem } from '../shared/control-characters';
import { globProblem } from '../shared/glob';
import { isLocalEndpoint } from '../activities/agents/model-http';
import { testCommandOfPackageJson } from '../activities/test-command';
import type { WardenConfig, WorkerSafetyConfig } from '../config/schema';
import { assertPriced, type PricingTable } from '../safety/pricing';
import { designReviewViolation, modelOf } from '../shared/agent-routing';
import { mergeLimits, type IntentLimitsConfig } from '../shared/limit-settings';
import { aboveUsd, approvalsFrom, judgeFrom } from '../config/intent-completion';
import { CommandAgentProfileSchema, type AgentProfile, type Intent, type IntentInput } from '../shared/intent';
import type { AgentCli } from '../activities/agents/cli-invocations';
import { findProgram, programOf } from './command-program';
import { gitOut } from './git-output';

/** What `warden run` accepts, before any check. */
export interface RunFlags {
  readonly repo?: string;
  readonly goal?: string;
  readonly id?: string;
  readonly agent?: string;
  readonly script?: string;
  readonly cmd?: string;
  readonly promptVia?: string;
  readonly sandbox?: string;
  readonly network?: 'none' | 'host' | 'gateway';
  readonly paths?: readonly string[];
  readonly base?: string;
  readonly testCmd?: string;
  readonly implAttempts?: string;
  readonly gateTimeout?: string;
  readonly env?: string;
  readonly agentName?: string;
  readonly agentProfile?: string;
  readonly model?: string;
  readonly provider?: string;
  readonly modelUrl?: string;
  readonly allowUnconfinedCode?: boolean;
  readonly testNetwork?: string;
  /** `--notify`, repeatable: channels for this intent besides the config's. */
  readonly notify?: readonly string[];
  /** `--budget USD`: this intent's budget (the config's `limits.budgetUsd` otherwise). */
  readonly budget?: string;
  /** `--merge-via local|pull-request`: how this intent's change reaches the base (the config's `merge.via` otherwise). */
  readonly mergeVia?: string;
}

/**
 * Turns `warden run` flags into an intent, checking everything that can be checked before a
 * workflow starts: the repo exists and is a git repo, the base branch exists and is clean, the
 * agent is known and its script parses. Each problem is one `UserError` line; nothing is started.
 */
/** What `warden run` takes from the config file. */
export type RunConfig = {
  readonly limits: IntentLimitsConfig;
  readonly gates?: GatesConfig;
  readonly toolsDir?: string;
  /** The prices every model the intent names must have (the worker in `warden run` meters by them). */
  readonly worker: Pick<WorkerSafetyConfig, 'pricing'>;
} & Partial<Pick<WardenConfig, 'agents' | 'routing' | 'review' | 'mode' | 'confinement' | 'lineage' | 'secrets' | 'approvers' | 'unsignedDecisions' | 'notify' | 'customGates' | 'run' | 'merge' | 'placement' | 'judge'>> & {
  /** The Temporal server is Warden's embedded one (only the local user reaches it). */
  readonly embeddedServer?: boolean;
};

export function intentFromFlags(flags: RunFlags, cwd: string, config: RunConfig): IntentInput {
  const { limits } = config;
  refuseUnusableText(flags);
  if (!flags.repo) throw new UserError('--repo is required');
  const repoPath = path.resolve(cwd, flags.repo);
  if (!existsSync(repoPath) || !statSync(repoPath).isDirectory()) throw new UserError(`repository not found: ${repoPath}`);
  const topLevel = gitOut(repoPath, ['rev-parse', '--show-toplevel']);
  if (topLevel === undefined) throw new UserError(`not a git repository: ${repoPath}`);
  const baseBranch = flags.base ?? config.run?.baseBranch ?? gitOut(topLevel, ['symbolic-ref', '--short', 'HEAD']) ?? 'main';
  if (gitOut(topLevel, ['rev-parse', '--verify', '--quiet', `refs/heads/${baseBranch}`]) === undefined) {
    throw new UserError(`base branch ${baseBranch} does not exist in ${topLevel}`);
  }
  if (gitOut(topLevel, ['symbolic-ref', '--short', 'HEAD']) === baseBranch) {
    const dirty = gitOut(topLevel, ['status', '--porcelain', '--untracked-files=no']);
    if (dirty) throw new UserError(`base branch ${baseBranch} has uncommitted changes in ${topLevel}; commit or stash them first`);
  }
  const testCommand = flags.testCmd ?? config.run?.testCommand;
  if (testCommand === undefined) {
    // impl loops until the repo's tests pass: with no tests to run, that check would pass unseen.
    const packageJson = gitOut(topLevel, ['show', `${baseBranch}:package.json`]);
    if (packageJson === undefined || testCommandOfPackageJson(packageJson) === undefined) {
      throw new UserError(
        `no test command for ${topLevel}: its ${baseBranch} branch has no package.json test script; give one with --test-cmd 'COMMAND' (e.g. 'make test', 'pytest -q'), or --test-cmd true to accept changes no test has checked, or set run.testCommand in the config (warden init writes one)`,
      );
    }
  }
  refuseSecrets({ '--goal': flags.goal, '--cmd': flags.cmd, [flags.testCmd !== undefined ? '--test-cmd' : 'the config\'s run.testCommand']: testCommand });
  if (flags.testNetwork !== undefined && flags.testNetwork !== 'none' && flags.testNetwork !== 'host') {
    throw new UserError(`--test-network must be none or host, not ${flags.testNetwork}`);
  }
  const confinement = {
    ...config.confinement,
    ...(flags.allowUnconfinedCode ? { allowUnconfinedCode: true } : {}),
    ...(flags.testNetwork ? { testNetwork: flags.testNetwork as 'none' | 'host' } : {}),
  };
  if (flags.budget !== undefined && !UsdSchema.safeParse(flags.budget).success) {
    throw new UserError(`--budget must be a USD amount such as 5 or 12.50 (0 = no limit), not ${flags.budget}`);
  }
  const implAttempts = flags.implAttempts === undefined ? undefined : Number(flags.implAttempts);
  if (implAttempts !== undefined && (!Number.isInteger(implAttempts) || implAttempts < 1)) {
    throw new UserError(`--impl-attempts must be a positive whole number, not ${flags.implAttempts}`);
  }
  // The worker refuses a start above its config's limits (intent-completion.ts): say so before anything starts.
  if (flags.budget !== undefined && aboveUsd(flags.budget, limits.budgetUsd)) {
    throw new UserError(`--budget ${flags.budget} is above the config's limits.budgetUsd ${limits.budgetUsd}: a start may lower the budget, never raise it (raise limits.budgetUsd in the config)`);
  }
  if (implAttempts !== undefined && implAttempts > limits.attempts.impl) {
    throw new UserError(`--impl-attempts ${implAttempts} is above the config's limits.attempts.impl ${limits.attempts.impl}: a start may lower it, never raise it`);
  }
  const agents = agentsFor(flags, cwd, topLevel, config);
  return {
    id: flags.id ?? generateIntentId(flags.goal),
    goal: flags.goal,
    repoPath: topLevel,
    baseBranch,
    paths: flags.paths && flags.paths.length > 0 ? [...flags.paths] : config.run?.paths ? [...config.run.paths] : undefined,
    ...agents,
    ...reviewPolicyFor(config.review, agents),
    testCommand,
    ...(flags.env ? { environment: flags.env } : {}),
    gates: config.gates ?? {},
    confinement,
    ...(config.lineage ? { lineage: config.lineage } : {}),
    ...(config.secrets ? { secrets: config.secrets } : {}),
    ...mergeSettingsFor(flags, config),
    ...placementFor(topLevel, config.placement),
    approvals: approvalsFrom(config),
    notify: [...(config.notify ?? []), ...notifyFlags(flags.notify)],
    customGates: config.customGates ?? [],
    ...judgeOf(config),
    // The config's limits travel with the intent; flags override them for this one.
    limits: mergeLimits(limits, {
      ...(implAttempts !== undefined ? { attempts: { impl: implAttempts } } : {}),
      ...(flags.gateTimeout !== undefined ? { gateTimeout: flags.gateTimeout } : {}),
      ...(flags.budget !== undefined ? { budgetUsd: flags.budget } : {}),
    }),
  };
}

/**
 * The goal and the path globs as given, checked before anything else (before an agent CLI is
 * installed, a sandbox probed or a server started): the goal is plain text (valid UTF-8, no
 * control characters but newline and tab, which would reach terminals and prompts as they are),
 * and each `--paths` glob is valid and stays inside the repository. The intent's schema checks
 * the same again, in the client and in the worker.
 */
export function refuseUnusableText<F extends Pick<RunFlags, 'goal' | 'paths'>>(flags: F): asserts flags is F & { readonly goal: string } {
  if (!flags.goal || !flags.goal.trim()) throw new UserError('--goal is required and must not be empty');
  const goalProblem = textProblem(flags.goal);
  if (goalProblem) throw new UserError(`--goal ${goalProblem}`);
  for (const glob of flags.paths ?? []) {
    const problem = textProblem(glob) ?? globProblem(glob);
    if (problem) throw new UserError(`--paths ${JSON.stringify(glob)} ${problem}`);
  }
}

/** The config's scope judge, which every intent carries. */
function judgeOf(config: RunConfig): { judge?: IntentJudge } {
  const judge = judgeFrom(config);
  return judge ? { judge } : {};
}

/** The channels `--notify` names, each checked (see channelFromFlag). */
function notifyFlags(flags: readonly string[] | undefined): NotifyChannel[] {
  return (flags ?? []).map((flag) => {
    try {
      return channelFromFlag(flag);
    } catch (error) {
      throw new UserError((error as Error).message);
    }
  });
}

/**
 * What an intent says is kept in the workflow's history, readable by anyone with access to the
 * namespace (and the Web UI): a credential there is a leak. Refused with how to pass it instead.
 */
function refuseSecrets(fields: Readonly<Record<string, string | undefined>>): void {
  for (const [flag, text] of Object.entries(fields)) {
    const kinds = text === undefined ? [] : secretShapesIn(text);
    if (kinds.length === 0) continue;
    throw new UserError(
      `${flag} holds what looks like a secret (${kinds.join(', ')}): it would be stored in the intent's workflow history, which everyone with access to the Temporal namespace can read. Set it as an environment variable of the worker and refer to it by name (e.g. $API_TOKEN) instead`,
    );
  }
}

// The approvers' keys and the gates where an unsigned decision counts, as the worker completes an intent.
export { approvalsFrom } from '../config/intent-completion';

/**
 * The intent's agents: `--agent`/`--cmd`/`--script` for every stage; else `--agent-profile NAME`
 * from the config's agents; else the config's routing (default + per-stage). A model without a
 * price, and in development mode a profile calling a paid cloud endpoint, are refused here,
 * before anything starts.
 */
function agentsFor(flags: RunFlags, cwd: string, repoPath: string, config: RunConfig): Pick<IntentInput, 'agent' | 'stageAgents'> {
  const agents = config.agents ?? {};
  const named = (name: string, where: string): AgentProfile => {
    const profile = agents[name];
    if (!profile) {
      const known = Object.keys(agents);
      throw new UserError(`${where} names agent "${name}", which the config does not define${known.length ? ` (it has: ${known.join(', ')})` : ''}`);
    }
    return profile;
  };
  let chosen: Pick<IntentInput, 'agent' | 'stageAgents'>;
  if (flags.agent || flags.cmd || flags.script) {
    chosen = { agent: agentFromFlags(flags, cwd, config) };
  } else if (flags.agentProfile) {
    chosen = { agent: named(flags.agentProfile, '--agent-profile') };
  } else if (config.routing?.default) {
    const stageAgents: NonNullable<IntentInput['stageAgents']> = {};
    for (const stage of ['triage', 'lld', 'spec', 'impl', 'review'] as const) {
      const name = config.routing[stage];
      if (name) stageAgents[stage] = named(name, `routing.${stage}`);
    }
    chosen = { agent: named(config.routing.default, 'routing.default'), stageAgents };
  } else {
    chosen = { agent: agentFromFlags(flags, cwd, config) };
  }
  if (flags.agentName) chosen = { ...chosen, agent: { ...chosen.agent, name: flags.agentName } };
  const profiles = [chosen.agent, ...Object.values(chosen.stageAgents ?? {})];
  // A flag's model was checked as --model already; a config profile carries its name.
  for (const profile of profiles) refuseUnpriced(modelOf(profile), config.worker.pricing, `agent "${profile.name ?? profile.kind}"`);
  for (const profile of profiles) {
    if (profile.kind === 'command' && !profile.cli) refuseMissingProgram(profile.command, repoPath, flags.cmd !== undefined ? '--cmd' : 'the command agent');
  }
  if (config.mode !== 'production') {
    for (const profile of profiles) {
      const endpoint = profile.kind === 'anthropic' || profile.kind === 'openai' ? profile : profile.kind === 'command' ? profile.upstream : undefined;
      if (endpoint && !isLocalEndpoint(endpoint)) {
        throw new UserError(
          `development mode refuses paid cloud endpoints: ${endpoint.kind} model ${endpoint.model} (set "mode": "production" in the config, or use a local endpoint)`,
        );
      }
    }
  }
  return chosen;
}

function agentFromFlags(flags: RunFlags, cwd: string, config: Pick<RunConfig, 'toolsDir' | 'worker'>): AgentProfile {
  const kind = flags.agent ?? (flags.cmd ? 'command' : 'scripted');
  if (kind === 'aider' || kind === 'codex' || kind === 'claude') return cliAgentFromFlags(kind, flags, cwd, config);
  if (kind === 'scripted') {
    if (!flags.script) throw new UserError('--agent scripted needs --script FILE');
    const scriptPath = path.resolve(cwd, flags.script);
    try {
      loadAgentScript(scriptPath);
    } catch (error) {
      throw new UserError(error instanceof ApplicationFailure ? error.message : String(error));
    }
    return { kind: 'scripted', scriptPath };
  }
  if (kind === 'command') {
    if (!flags.cmd || !flags.cmd.trim()) throw new UserError("--agent command needs --cmd 'COMMAND'");
    if (flags.network === 'gateway') {
      throw new UserError('--network gateway needs an upstream model: use an agent profile from the config that names one (--agent-profile NAME)');
    }
    if (flags.promptVia !== undefined && flags.promptVia !== 'stdin' && flags.promptVia !== 'arg') {
      throw new UserError(`--prompt-via must be stdin or arg, not ${flags.promptVia}`);
    }
    return {
      kind: 'command',
      command: flags.cmd,
      promptVia: (flags.promptVia as 'stdin' | 'arg' | undefined) ?? 'stdin',
      timeout: '30m',
      maxOutputBytes: 1_000_000,
      sandbox: (flags.sandbox as 'auto' | 'none' | 'process' | 'bubblewrap' | undefined) ?? 'auto',
      ...(flags.network ? { network: flags.network } : {}),
    };
  }
  throw new UserError(`unknown agent "${kind}": use scripted or command`);
}

/** A CLI Warden drives itself, calling `--model` through the gateway. */
function cliAgentFromFlags(cli: AgentCli, flags: RunFlags, cwd: string, { toolsDir, worker }: Pick<RunConfig, 'toolsDir' | 'worker'>): AgentProfile {
  if (!flags.model || !flags.model.trim()) throw new UserError(`--agent ${cli} needs --model NAME: the model it calls through Warden's model gateway`);
  const fixed = CLI_PROVIDERS[cli];
  const provider = flags.provider ?? fixed ?? 'openai';
  if (fixed && provider !== fixed) throw new UserError(`--agent ${cli} speaks only the ${fixed} API: leave out --provider ${provider}`);
  refuseUnpriced(flags.model.trim(), worker.pricing, '--model');
  let program: string;
  if (flags.cmd) {
    program = flags.cmd.trim();
    refuseMissingProgram(program, cwd, '--cmd');
  } else {
    const found = findCliProgram(cli, toolsDir);
    if (!found) {
      throw new UserError(`${cli} is not installed: not on PATH${toolsDir ? ` nor under ${toolsDir}` : ''}. Install it (npm run tools:install puts all three under ${toolsDir ?? "the Warden home's tools folder"}), or give its path with --cmd`);
    }
    program = found;
  }
  const parsed = CommandAgentProfileSchema.safeParse({
    kind: 'command',
    cli,
    command: program,
    sandbox: flags.sandbox ?? 'auto',
    ...(flags.network ? { network: flags.network } : {}),
    upstream: { kind: provider, model: flags.model.trim(), ...(flags.modelUrl ? { baseUrl: flags.modelUrl } : {}) },
  });
  if (!parsed.success) throw new UserError(`--agent ${cli}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

/**
 * A model with no price would pass every other check, start the intent and fail at its first
 * call (spend is never counted as $0): refused now, saying how to price it.
 */
function refuseUnpriced(model: string | undefined, pricing: PricingTable, where: string): void {
  if (model === undefined) return;
  try {
    assertPriced(model, pricing);
  } catch (error) {
    throw new UserError(`${where}: ${(error as Error).message}`);
  }
}

/** The API each CLI speaks (aider speaks both). */
const CLI_PROVIDERS: Record<AgentCli, 'openai' | 'anthropic' | undefined> = { aider: undefined, codex: 'openai', claude: 'anthropic' };

/** Where Warden's tools install puts each CLI, below the tools folder. */
const CLI_INSTALLED: Record<AgentCli, string> = {
  aider: 'aider-venv/bin/aider',
  codex: 'npm/node_modules/.bin/codex',
  claude: 'npm/node_modules/.bin/claude',
};

/** The CLI on PATH, else where the tools install put it. */
export function findCliProgram(cli: AgentCli, toolsDir: string | undefined): string | undefined {
  const onPath = findProgram(cli, process.cwd());
  if (onPath) return onPath;
  if (!toolsDir) return undefined;
  const installed = path.join(toolsDir, CLI_INSTALLED[cli]);
  return existsSync(installed) ? installed : undefined;
}

/**
 * A command agent whose program is not there would fail each stage attempt with exit 127 until
 * the retries run out: refuse it now. The command runs in the intent's worktree, a checkout of
 * the repo, so a relative path is looked up in the repo. Checked on this machine's PATH.
 */
function refuseMissingProgram(command: string, repoPath: string, where: string): void {
  const program = programOf(command);
  if (program === undefined || findProgram(program, repoPath) !== undefined) return;
  throw new UserError(
    program.includes('/')
      ? `${where} runs ${program}, which is not an executable file (a relative path is taken from ${repoPath})`
      : `${where} runs ${program}, which is not on PATH; install it or give its full path`,
  );
}

/** `add-retries-to-the-3f9a`: readable, and unique enough to start many intents a second. */
export function generateIntentId(goal: string): string {
  const slug = goal
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 32)
    .replace(/-+$/, '');
  return `${slug || 'intent'}-${randomBytes(3).toString('hex')}`;
}

/**
 * The config's `merge`, with `--merge-via` over its `via`. A pull request needs the config's
 * `merge.forge` (which forge, which token variable, who reviews) and a remote to push to.
 */
function mergeSettingsFor(flags: RunFlags, config: RunConfig): { merge?: MergeSettings } {
  if (flags.mergeVia !== undefined && flags.mergeVia !== 'local' && flags.mergeVia !== 'pull-request') {
    throw new UserError(`--merge-via must be local or pull-request, not ${flags.mergeVia}`);
  }
  const via = (flags.mergeVia as MergeSettings['via'] | undefined) ?? config.merge?.via;
  if (via === undefined) return {};
  if (via === 'pull-request' && !config.merge?.forge) {
    throw new UserError('--merge-via pull-request needs the forge in the config: merge.forge with its kind (gitea, github or gitlab), tokenEnv and reviewers (docs/forge.md)');
  }
  return { merge: { ...(config.merge ?? { method: 'merge' }), via } };
}

/**
 * The config's `placement` (several worker hosts, no shared disk): the remote's URL as this
 * repository has it, made absolute where it is a path, since no host has this checkout.
 */
function placementFor(repoPath: string, placement: RunConfig['placement']): { placement?: IntentPlacement } {
  if (!placement) return {};
  const url = gitOut(repoPath, ['remote', 'get-url', placement.remote]);
  if (url === undefined) {
    throw new UserError(`the config's placement works from the remote ${placement.remote}, which ${repoPath} does not have: every worker host clones it (git remote add ${placement.remote} URL)`);
  }
  const isPath = !/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(url) && !/^[^/]+@[^/]+:/.test(url);
  return { placement: { remote: placement.remote, remoteUrl: isPath ? path.resolve(repoPath, url) : url, moveAfter: placement.moveAfter } };
}

/**
 * The config's review policy. Where it does not say whether the design is reviewed, it is, when
 * the intent's routing can: the `review` route runs on a model that writes neither the lld nor the
 * spec, and may review. Otherwise (one model everywhere, scripted agents) it is not, rather than
 * failing the intent.
 */
function reviewPolicyFor(review: RunConfig['review'], agents: Pick<IntentInput, 'agent' | 'stageAgents'>): Pick<IntentInput, 'reviewPolicy'> {
  if (review?.design !== undefined) return { reviewPolicy: review };
  const policy = { requireDifferentFamily: review?.requireDifferentFamily ?? false, forbiddenReviewers: review?.forbiddenReviewers ?? [], design: true };
  const reviewer = agents.stageAgents?.review ?? agents.agent;
  // The profiles here come from the parsed config or flags: the intent's parsed shape, as the check takes it.
  const routed = { agent: agents.agent, stageAgents: agents.stageAgents ?? {}, reviewPolicy: policy } as Pick<Intent, 'agent' | 'stageAgents' | 'reviewPolicy'>;
  const canReview = modelOf(reviewer) !== undefined && designReviewViolation(routed) === undefined;
  return canReview ? { reviewPolicy: policy } : review ? { reviewPolicy: review } : {};
}
