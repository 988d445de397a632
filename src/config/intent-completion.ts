import { GatesConfigSchema, mergeGateSettings, type GateSettings } from '../shared/gate-settings';
import type { GateKind } from '../shared/gates';
import { ApprovalsSchema, DEFAULT_UNSIGNED_GATES, type IntentInput } from '../shared/intent';
import { LimitsOverridesSchema, mergeLimits, type IntentLimitsConfig } from '../shared/limit-settings';
import { RISK_CLASSES } from '../shared/risk';
import { DEFAULT_JUDGED_STAGES, type IntentJudge } from '../shared/scope-judge';
import { LOCAL_MERGE } from '../shared/merge-settings';
import { REPLAY_ID_PREFIX } from '../shared/ids';
import type { WardenConfig } from './schema';

/*
 * Every start obeys the worker's config: whoever starts an intent (`warden run`, a Temporal
 * client, the Web UI's Start Workflow), the worker completes it from its own config before
 * anything runs. The rule, field by field:
 *
 * - left out: filled from the config (limits, gates, approvals, review policy, secrets.allow,
 *   custom gates, notify channels, confinement, lineage, the agents by routing, run defaults);
 * - set, but looser than the config: refused, never clamped (a start that silently got less than
 *   it asked for would surprise whoever reads it; a refusal names the field). Looser means: a
 *   gate's approvers or escalation other than the config's, a gate the config asks switched off
 *   or asked at a higher risk only, approver keys other than the config's, unsigned decisions at
 *   a gate where the config takes none, a weaker review policy, a secrets allowance or a custom
 *   gate or a notify channel of the config left out, a secrets allowance the config does not
 *   hold, a budget, attempt count or blast radius above the config's;
 * - set, and as strict or stricter: kept (a lower budget, fewer attempts, more gates).
 *
 * What stays the start's to choose: the goal, repository, branch, paths, test command, its agents
 * (each still passes the worker's price, mode and sandbox checks at its stage), timeouts, and its
 * confinement opt-in, which is the operator's as `--allow-unconfined-code` is: recorded
 * (UNCONFINED_CODE_ALLOWED, high) and it makes every decision a signed person's.
 */

/** What the worker completes intents from: its config, and whether its Temporal server is Warden's embedded one. */
export interface IntentRules {
  readonly config: Pick<WardenConfig, 'limits' | 'gates' | 'agents' | 'routing' | 'review' | 'confinement' | 'lineage' | 'secrets' | 'approvers' | 'unsignedDecisions' | 'notify' | 'customGates' | 'run' | 'merge' | 'judge'>;
  /** The unsigned decisions the config accepts on the embedded server only are taken only there. */
  readonly embeddedServer: boolean;
}

/** The intent with what it left out taken from the config, and each way it is looser than the config. */
export interface Completion {
  readonly input: unknown;
  readonly problems: readonly string[];
}

/** The approvers' keys, and the gates where an unsigned decision counts (see UnsignedDecisionsSchema). */
export function approvalsFrom(config: Pick<WardenConfig, 'approvers' | 'unsignedDecisions'> & { readonly embeddedServer?: boolean }): NonNullable<IntentInput['approvals']> {
  const keys = Object.fromEntries(Object.entries(config.approvers ?? {}).map(([name, { publicKey }]) => [name, publicKey]));
  const accept = config.unsignedDecisions?.accept ?? 'embedded-server';
  const trusted = accept === 'always' || (accept === 'embedded-server' && config.embeddedServer === true);
  const gates = (config.unsignedDecisions?.gates ?? DEFAULT_UNSIGNED_GATES).filter((gate) => gate !== 'production');
  return { keys, unsignedGates: trusted ? gates : [] };
}

/**
 * Completes a workflow's raw input from the config (see the rule above). Input that is not an
 * intent's shape is passed on untouched for the intent schema to refuse.
 */
export function completeIntent(input: unknown, rules: IntentRules): Completion {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return { input, problems: [] };
  const given = input as Record<string, unknown>;
  const { config } = rules;
  const problems: string[] = [];
  const out: Record<string, unknown> = { ...given };
  const absent = (key: string): boolean => given[key] === undefined;

  if (absent('agent')) Object.assign(out, routedAgents(config, given));
  if (absent('baseBranch') && config.run?.baseBranch) out.baseBranch = config.run.baseBranch;
  if (absent('testCommand') && config.run?.testCommand) out.testCommand = config.run.testCommand;
  if (absent('paths') && config.run?.paths) out.paths = [...config.run.paths];
  if (absent('lineage') && config.lineage) out.lineage = config.lineage;
  if (absent('confinement')) out.confinement = { ...config.confinement };

  out.limits = completedLimits(given.limits, config.limits, problems);
  out.gates = completedGates(given.gates, config.gates, problems);
  out.approvals = completedApprovals(given.approvals, approvalsFrom({ ...config, embeddedServer: rules.embeddedServer }), problems);
  out.reviewPolicy = completedReviewPolicy(given.reviewPolicy, config.review, problems);
  const merge = completedMerge(given.merge, config.merge, problems);
  if (merge !== undefined) out.merge = merge;
  const secrets = typeof given.secrets === 'object' && given.secrets !== null ? (given.secrets as { allow?: unknown }) : undefined;
  out.secrets = { ...secrets, allow: completedList(secrets?.allow, config.secrets?.allow ?? [], 'secrets.allow', problems, 'within') };
  out.customGates = completedList(given.customGates, config.customGates ?? [], 'customGates', problems, 'includes');
  const judge = completedJudge(given.judge, config, problems);
  if (judge !== undefined) out.judge = judge;
  out.notify = completedList(given.notify, config.notify ?? [], 'notify', problems, 'includes');
  return { input: given.replayOf === undefined ? refuseReplayIds(out, problems) : asReplay(out, problems), problems };
}

/** A real intent may not take a replay's id: a replay's ledger rows are told apart by it. */
function refuseReplayIds(out: Record<string, unknown>, problems: string[]): Record<string, unknown> {
  if (typeof out.id === 'string' && out.id.startsWith(REPLAY_ID_PREFIX)) problems.push(`an id starting with "${REPLAY_ID_PREFIX}" (kept for \`warden replay\`)`);
  return out;
}

/**
 * A replay (`replayOf`) is the config's in everything but what would reach outside Warden: it
 * notifies no one and merges only locally, into the scratch clone it runs on, whatever the config
 * says; its id starts with "replay-".
 */
function asReplay(out: Record<string, unknown>, problems: string[]): Record<string, unknown> {
  if (typeof out.id !== 'string' || !out.id.startsWith(REPLAY_ID_PREFIX)) problems.push(`replayOf on an intent whose id does not start with "${REPLAY_ID_PREFIX}"`);
  const replay: Record<string, unknown> = { ...out, notify: [], merge: LOCAL_MERGE };
  delete replay.placement;
  return replay;
}

/** The routing's agents, for a start that named none (one that named its agent keeps its own stages). */
function routedAgents(config: IntentRules['config'], given: Record<string, unknown>): Record<string, unknown> {
  const name = config.routing.default;
  const agent = name === undefined ? undefined : config.agents[name];
  if (!agent) return {};
  if (given.stageAgents !== undefined) return { agent };
  const stageAgents: Record<string, unknown> = {};
  for (const stage of ['triage', 'lld', 'spec', 'impl', 'review'] as const) {
    const staged = config.routing[stage];
    if (staged && config.agents[staged]) stageAgents[stage] = config.agents[staged];
  }
  return { agent, stageAgents };
}

/** The config's scope judge as an intent carries it: its agent's profile and the stages it reads. */
export function judgeFrom(config: Partial<Pick<WardenConfig, 'judge' | 'agents'>>): IntentJudge | undefined {
  const settings = config.judge;
  const agent = settings ? config.agents?.[settings.agent] : undefined;
  // Load refuses a judge of another kind (see judgeProblems in load.ts).
  if (!settings || (agent?.kind !== 'anthropic' && agent?.kind !== 'openai')) return undefined;
  return { agent, stages: [...(settings.stages ?? DEFAULT_JUDGED_STAGES)] };
}

/**
 * The scope judge: the config's when left out. A start may not drop the config's judge, nor
 * judge fewer stages; it may name one where the config has none.
 */
function completedJudge(given: unknown, config: IntentRules['config'], problems: string[]): unknown {
  const fromConfig = judgeFrom(config);
  if (given === undefined) return fromConfig;
  if (!fromConfig || typeof given !== 'object' || given === null) return given;
  const asked = given as { agent?: { model?: unknown }; stages?: unknown };
  const stages = Array.isArray(asked.stages) ? asked.stages : [...DEFAULT_JUDGED_STAGES];
  const dropped = fromConfig.stages.filter((stage) => !stages.includes(stage));
  if (dropped.length > 0) problems.push(`judge.stages leaves out the config's ${dropped.join(', ')}`);
  if (asked.agent?.model !== (fromConfig.agent as { model?: string }).model) problems.push("judge.agent other than the config's");
  return given;
}

/** USD amounts where "0" is no limit: whether `asked` is more than `cap` allows. */
export function aboveUsd(asked: string | undefined, cap: string | undefined): boolean {
  if (cap === undefined || Number(cap) === 0) return false;
  return asked === undefined || Number(asked) === 0 || Number(asked) > Number(cap);
}

/** The config's limits with the start's on top; a budget, attempt count or blast radius above the config's is a problem. */
/**
 * How the change reaches the base: the config's when left out. Where the config merges through
 * pull requests, a start may not merge locally (around the forge's reviews and checks), nor name
 * another forge, remote, token or reviewers than the config's; it may choose the merge method.
 * Where the config merges locally, a start may ask for a pull request (its own forge settings).
 */
function completedMerge(given: unknown, config: WardenConfig['merge'], problems: string[]): unknown {
  if (given === undefined) return config;
  if (config?.via !== 'pull-request' || typeof given !== 'object' || given === null) return given;
  const asked = given as { via?: unknown; forge?: unknown };
  if (asked.via !== 'pull-request') problems.push(`merge.via ${String(asked.via ?? 'local')}, where the config merges through pull requests on ${config.forge?.kind ?? 'its forge'}`);
  else if (asked.forge !== undefined && JSON.stringify(sameForge(asked.forge)) !== JSON.stringify(sameForge(config.forge))) problems.push("merge.forge other than the config's (its forge, remote, token and reviewers are the config's)");
  return { ...config, ...(given as object), forge: config.forge };
}

/** What of a forge's settings a start may not change. */
function sameForge(forge: unknown): unknown {
  if (typeof forge !== 'object' || forge === null) return forge;
  const f = forge as Record<string, unknown>;
  const reviewers = typeof f.reviewers === 'object' && f.reviewers !== null ? Object.entries(f.reviewers).sort(([a], [b]) => a.localeCompare(b)) : [];
  return { kind: f.kind, url: f.url, remote: f.remote ?? 'origin', tokenEnv: f.tokenEnv ?? 'WARDEN_FORGE_TOKEN', reviewers };
}

function completedLimits(given: unknown, cap: IntentLimitsConfig, problems: string[]): unknown {
  if (given === undefined) return cap;
  const parsed = LimitsOverridesSchema.safeParse(given);
  if (!parsed.success) return given; // the intent schema names what is wrong
  const limits = mergeLimits(cap, parsed.data);
  const above = (field: string, asked: unknown, allowed: unknown): void => {
    problems.push(`limits.${field} ${JSON.stringify(asked)} is above the config's ${JSON.stringify(allowed)}`);
  };
  if (aboveUsd(limits.budgetUsd, cap.budgetUsd)) above('budgetUsd', limits.budgetUsd, cap.budgetUsd);
  if (aboveUsd(limits.maxCallUsd, cap.maxCallUsd)) above('maxCallUsd', limits.maxCallUsd, cap.maxCallUsd);
  for (const [stage, usd] of Object.entries(cap.stageBudgetUsd) as Array<[keyof IntentLimitsConfig['stageBudgetUsd'], string]>) {
    if (aboveUsd(limits.stageBudgetUsd[stage], usd)) above(`stageBudgetUsd.${stage}`, limits.stageBudgetUsd[stage] ?? '0', usd);
  }
  for (const [stage, attempts] of Object.entries(cap.attempts) as Array<[keyof IntentLimitsConfig['attempts'], number]>) {
    if (limits.attempts[stage] > attempts) above(`attempts.${stage}`, limits.attempts[stage], attempts);
  }
  if (limits.totalAttempts > cap.totalAttempts) above('totalAttempts', limits.totalAttempts, cap.totalAttempts);
  for (const [field, allowed] of Object.entries(cap.blastRadius) as Array<[keyof IntentLimitsConfig['blastRadius'], number]>) {
    if (limits.blastRadius[field] > allowed) above(`blastRadius.${field}`, limits.blastRadius[field], allowed);
  }
  return limits;
}

/** The config's gates with the start's on top; who decides, whether a gate asks, and whom it escalates to stay the config's. */
function completedGates(given: unknown, config: WardenConfig['gates'], problems: string[]): unknown {
  if (given === undefined) return config;
  const parsed = GatesConfigSchema.safeParse(given);
  if (!parsed.success) return given;
  const merged = mergeGateSettings(config, parsed.data);
  const rank = (risk: GateSettings['minRisk']): number => RISK_CLASSES.indexOf(risk ?? 'HIGH');
  for (const [gate, settings] of Object.entries(merged) as Array<[GateKind, GateSettings]>) {
    const own: GateSettings = config[gate] ?? {};
    if (!sameSet(settings.approvers, own.approvers)) {
      problems.push(`gates.${gate}.approvers ${describeApprovers(settings.approvers)} are not the config's ${describeApprovers(own.approvers)}`);
    }
    if (settings.enabled === false && own.enabled !== false) problems.push(`gates.${gate}.enabled false switches off a gate the config asks`);
    if (rank(settings.minRisk) > rank(own.minRisk)) problems.push(`gates.${gate}.minRisk ${settings.minRisk} asks less often than the config's ${own.minRisk ?? 'HIGH'}`);
    if (own.escalateTo !== undefined && settings.escalateTo !== own.escalateTo) problems.push(`gates.${gate}.escalateTo ${settings.escalateTo} is not the config's ${own.escalateTo}`);
  }
  return merged;
}

function describeApprovers(approvers: readonly string[] | undefined): string {
  return approvers ? `[${approvers.join(', ')}]` : '(anyone but the agent)';
}

function sameSet(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  const left = new Set(a);
  const right = new Set(b);
  return left.size === right.size && [...left].every((x) => right.has(x));
}

/** The config's approver keys, exactly; unsigned decisions at no gate the config does not take them at. */
function completedApprovals(given: unknown, config: NonNullable<IntentInput['approvals']>, problems: string[]): unknown {
  if (given === undefined) return config;
  if (typeof given !== 'object' || given === null) return given;
  const parsed = ApprovalsSchema.safeParse({ ...config, ...given });
  if (!parsed.success) return given;
  const keys = config.keys ?? {};
  const names = new Set([...Object.keys(keys), ...Object.keys(parsed.data.keys)]);
  for (const name of names) {
    if (parsed.data.keys[name] !== keys[name]) problems.push(`approvals.keys.${name} is not the config's key for ${name}${keys[name] === undefined ? ' (the config names no such approver)' : ''}`);
  }
  const allowed = new Set(config.unsignedGates ?? []);
  const extra = parsed.data.unsignedGates.filter((gate) => !allowed.has(gate));
  if (extra.length > 0) problems.push(`approvals.unsignedGates takes unsigned decisions at ${extra.join(', ')}, where the config takes none`);
  return parsed.data;
}

/** The config's review rules with the start's on top: it may only ask for more. */
function completedReviewPolicy(given: unknown, config: WardenConfig['review'], problems: string[]): unknown {
  if (given === undefined) return config;
  if (typeof given !== 'object' || given === null) return given;
  const policy = { ...config, ...(given as Partial<WardenConfig['review']>) };
  if (config.requireDifferentFamily && policy.requireDifferentFamily !== true) problems.push('reviewPolicy.requireDifferentFamily false drops the config\'s cross-model review');
  if (config.design === true && policy.design !== true) problems.push('reviewPolicy.design false drops the config\'s review of the lld and spec');
  const forbidden = Array.isArray(policy.forbiddenReviewers) ? policy.forbiddenReviewers : [];
  const dropped = config.forbiddenReviewers.filter((model) => !forbidden.includes(model));
  if (dropped.length > 0) problems.push(`reviewPolicy.forbiddenReviewers leaves out the config's ${dropped.join(', ')}`);
  return policy;
}

/**
 * A list the config owns: left out, the config's. `includes`: the start's must hold every entry
 * of the config's, and may add its own (more gates, more channels); `within`: it may hold only
 * entries of the config's (an allowance is the config's to give), and may leave some out.
 */
function completedList(given: unknown, config: readonly unknown[], field: string, problems: string[], rule: 'includes' | 'within'): unknown {
  if (given === undefined) return [...config];
  if (!Array.isArray(given)) return given;
  const [from, against] = rule === 'includes' ? [config, given] : [given, config];
  const held = new Set(against.map(canonical));
  const unmatched = from.filter((entry) => !held.has(canonical(entry)));
  if (unmatched.length > 0) {
    const listed = unmatched.map(canonical).join(', ');
    problems.push(rule === 'includes' ? `${field} leaves out the config's ${listed}` : `${field} holds what the config does not: ${listed}`);
  }
  return given;
}

/** JSON with object keys sorted: the same entry written in another order is the same entry. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    typeof v === 'object' && v !== null && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b))) : v,
  );
}
