import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { UserError } from '../shared/errors';
import type { z } from 'zod';
import { mergeGateSettings } from '../shared/gate-settings';
import { designReviewViolation, modelOf } from '../shared/agent-routing';
import { DEFAULT_JUDGED_STAGES } from '../shared/scope-judge';
import { PROFILE_DEFAULTS } from './profiles';
import { mergeLimits } from '../shared/limit-settings';
import { ConfigFileSchema, WardenConfigSchema, consistencyProblems, type ConfigFile, type ConfigProblem, type WardenConfig } from './schema';
import { parseJsonc, type TextPosition } from './config-text';
import { CONFIG_FILE_NAMES } from './names';

/**
 * Workflow-thread heap one cached intent workflow needs, with room for the collector: each holds
 * its own instance of the workflow code's modules (0.055 MB measured, zod kept out) and its
 * state; 300 cached intents ran in a 64 MB heap (bench:parked --cache 300 --heap 64).
 */
export const HEAP_MB_PER_CACHED_WORKFLOW = 0.5;

/** A problem as one line of a refusal: `field.path: what is wrong`. */
export function describeProblem(problem: ConfigProblem): string {
  return problem.path.length > 0 ? `${problem.path.join('.')}: ${problem.message}` : problem.message;
}

/** Zod's issues as config problems, each unknown key pointed at on its own. */
function issueProblems(error: z.ZodError): ConfigProblem[] {
  return error.issues.map((issue) => ({
    path: issue.path,
    message: issue.message,
    ...(issue.code === 'unrecognized_keys' && issue.keys.length > 0 ? { unknownKey: issue.keys[0] } : {}),
  }));
}

/**
 * Merges a config file's overrides onto its profile's defaults and validates the result. Bad
 * input is a `UserError` naming every bad field; nothing runs with a bad config.
 */
export function resolveConfig(file: unknown, source = 'config'): WardenConfig {
  const checked = checkConfig(file);
  if (!checked.ok) throw new UserError(`${source} is invalid: ${checked.problems.map(describeProblem).join('; ')}`);
  return checked.config;
}

/** As `resolveConfig`, with the problems as fields and messages rather than one line. */
export function checkConfig(file: unknown): { readonly ok: true; readonly config: WardenConfig } | { readonly ok: false; readonly problems: readonly ConfigProblem[] } {
  const parsed = ConfigFileSchema.safeParse(file);
  if (!parsed.success) return { ok: false, problems: [...issueProblems(parsed.error), ...consistencyProblems(file)] };
  const overrides: ConfigFile = parsed.data;
  const base = PROFILE_DEFAULTS[overrides.profile ?? 'default'];
  const merged = {
    profile: base.profile,
    mode: overrides.mode ?? base.mode,
    limits: mergeLimits(base.limits, overrides.limits),
    worker: {
      ...base.worker,
      ...overrides.worker,
      circuitBreaker: { ...base.worker.circuitBreaker, ...overrides.worker?.circuitBreaker },
      errorRate: { ...base.worker.errorRate, ...overrides.worker?.errorRate },
      rateLimits: {
        ...base.worker.rateLimits,
        ...overrides.worker?.rateLimits,
        perAgent: { ...base.worker.rateLimits.perAgent, ...overrides.worker?.rateLimits?.perAgent },
        perModel: { ...base.worker.rateLimits.perModel, ...overrides.worker?.rateLimits?.perModel },
      },
      pricing: { ...base.worker.pricing, ...overrides.worker?.pricing },
    },
    automation: { ...base.automation, ...overrides.automation },
    gates: mergeGateSettings(base.gates, overrides.gates),
    // Each profile takes its name from its key: that is its ladder scope and ledger identity.
    agents: Object.fromEntries(Object.entries({ ...base.agents, ...overrides.agents }).map(([name, p]) => [name, { ...(p as object), name }])),
    routing: { ...base.routing, ...overrides.routing },
    review: { ...base.review, ...overrides.review },
    telemetry: { ...base.telemetry, ...overrides.telemetry },
    ...(overrides.confinement ?? base.confinement ? { confinement: { ...base.confinement, ...overrides.confinement } } : {}),
    ...(overrides.lineage ?? base.lineage ? { lineage: { ...base.lineage, ...overrides.lineage } } : {}),
    ...(overrides.secrets ?? base.secrets ? { secrets: { allow: overrides.secrets?.allow ?? base.secrets?.allow ?? [] } } : {}),
    ...(overrides.approvers ?? base.approvers ? { approvers: { ...base.approvers, ...overrides.approvers } } : {}),
    ...(overrides.unsignedDecisions ?? base.unsignedDecisions ? { unsignedDecisions: { ...base.unsignedDecisions, ...overrides.unsignedDecisions } } : {}),
    ...(overrides.customGates ?? base.customGates ? { customGates: overrides.customGates ?? base.customGates } : {}),
    ...(overrides.serve ?? base.serve ? { serve: { ...base.serve, ...overrides.serve } } : {}),
    ...(overrides.notify ?? base.notify ? { notify: overrides.notify ?? base.notify } : {}),
    ...(overrides.operator ?? base.operator ? { operator: overrides.operator ?? base.operator } : {}),
    ...(overrides.run ?? base.run ? { run: { ...base.run, ...overrides.run } } : {}),
    ...(overrides.merge ?? base.merge ? { merge: overrides.merge ?? base.merge } : {}),
    ...(overrides.placement ?? base.placement ? { placement: { ...base.placement, ...overrides.placement } } : {}),
    ...(overrides.judge ?? base.judge ? { judge: overrides.judge ?? base.judge } : {}),
  };
  const result = WardenConfigSchema.safeParse(merged);
  const problems = [...(result.success ? [] : issueProblems(result.error)), ...consistencyProblems(merged)];
  if (!result.success || problems.length > 0) return { ok: false, problems };
  const { maxCachedWorkflows, workflowHeapMb } = result.data.worker;
  if (maxCachedWorkflows !== undefined && workflowHeapMb !== undefined && workflowHeapMb < maxCachedWorkflows * HEAP_MB_PER_CACHED_WORKFLOW) {
    const needed = Math.ceil(maxCachedWorkflows * HEAP_MB_PER_CACHED_WORKFLOW);
    problems.push({
      path: ['worker', 'workflowHeapMb'],
      message:
        `${workflowHeapMb} MB is too small for worker.maxCachedWorkflows (${maxCachedWorkflows}): ` +
        `each cached intent needs about ${HEAP_MB_PER_CACHED_WORKFLOW} MB, and a full heap stops the worker. Raise workflowHeapMb to ${needed} or more, or cache fewer.`,
    });
  }
  for (const [stage, name] of Object.entries(result.data.routing)) {
    if (name !== undefined && !result.data.agents[name]) problems.push({ path: ['routing', stage], message: `names agent "${name}", which is not in agents` });
  }
  problems.push(...judgeProblems(result.data));
  const designReview = problems.length === 0 ? routedDesignReviewViolation(result.data) : undefined;
  if (designReview) problems.push({ path: ['review', 'design'], message: designReview });
  return problems.length > 0 ? { ok: false, problems } : { ok: true, config: result.data };
}

/**
 * The judge must name a model over HTTP among the agents (it is asked like one, through the
 * gateway), and may not be the model routed to a stage it judges: a model never judges its own answer.
 */
function judgeProblems(config: WardenConfig): ConfigProblem[] {
  if (!config.judge) return [];
  const judge = config.agents[config.judge.agent];
  if (!judge) return [{ path: ['judge', 'agent'], message: `names agent "${config.judge.agent}", which is not in agents` }];
  if (judge.kind !== 'anthropic' && judge.kind !== 'openai') return [{ path: ['judge', 'agent'], message: `names agent "${config.judge.agent}" of kind ${judge.kind}: the judge is a model over HTTP (kind anthropic or openai)` }];
  const problems: ConfigProblem[] = [];
  for (const stage of config.judge.stages ?? DEFAULT_JUDGED_STAGES) {
    const routed = config.routing[stage] ?? config.routing.default;
    const profile = routed === undefined ? undefined : config.agents[routed];
    if (profile && modelOf(profile) === judge.model) problems.push({ path: ['judge', 'agent'], message: `${judge.model} is also the model routed to ${stage}, whose answers it would judge: a model never judges its own answer` });
  }
  return problems;
}

/** A config file that does not hold a valid config: each problem with its place in the file. */
export class ConfigFileError extends UserError {
  constructor(
    readonly file: string,
    readonly problems: readonly PlacedProblem[],
  ) {
    // A heading, then a line per problem: each stays a place a terminal or editor can open.
    super([`${file} is invalid:`, ...problems.map(formatPlacedProblem)].join('\n'));
    this.name = 'ConfigFileError';
  }
}

/** A problem at its place in a file (lines and columns from 1; none for a module, which has no text to point into). */
export interface PlacedProblem extends Partial<TextPosition> {
  readonly file: string;
  /** `field.path: what is wrong`, or only what is wrong for a syntax error. */
  readonly text: string;
}

/** `file:line:column: field.path: message`, the form editors and terminals link to the place. */
export function formatPlacedProblem(problem: PlacedProblem): string {
  return problem.line === undefined ? `${problem.file}: ${problem.text}` : `${problem.file}:${problem.line}:${problem.column ?? 1}: ${problem.text}`;
}

/**
 * Loads `file` (JSON with comments, or a .ts/.js module whose default export is the object), or
 * the first of CONFIG_FILE_NAMES in `cwd`, or the default profile when there is none. A bad file
 * is a `ConfigFileError`, each problem at its line and column in a JSON file.
 */
export function loadConfig(file: string | undefined, cwd: string = process.cwd()): { config: WardenConfig; source?: string } {
  const candidate = file ? path.resolve(cwd, file) : CONFIG_FILE_NAMES.map((n) => path.join(cwd, n)).find((p) => existsSync(p));
  if (!candidate) return { config: resolveConfig({}) };
  if (!existsSync(candidate)) throw new UserError(`config file not found: ${candidate}`);
  const shownAs = displayPath(candidate, cwd);
  const place = (problems: ReadonlyArray<Partial<TextPosition> & { text: string }>): never => {
    // In the order of the file, as a reader goes through it.
    const inOrder = [...problems].sort((a, b) => (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0));
    throw new ConfigFileError(shownAs, inOrder.map((p) => ({ ...p, file: shownAs })));
  };
  if (candidate.endsWith('.json')) {
    let text: string;
    try {
      text = readFileSync(candidate, 'utf8');
    } catch (error) {
      throw new UserError(`cannot read config file ${candidate}: ${(error as Error).message}`);
    }
    const read = parseJsonc(text);
    if (!read.ok) return place(read.problems.map((p) => ({ line: p.line, column: p.column, text: p.message })));
    const checked = checkConfig(read.parsed.value);
    if (!checked.ok) {
      return place(checked.problems.map((p) => ({ ...(p.unknownKey === undefined ? read.parsed.positionOf(p.path) : read.parsed.keyPositionOf([...p.path, p.unknownKey])), text: describeProblem(p) })));
    }
    return { config: checked.config, source: candidate };
  }
  let raw: unknown;
  try {
    loadTypeScriptHook(candidate);
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- .ts configs load through tsx's require hook
    const loaded = require(candidate) as { default?: unknown };
    raw = loaded.default ?? loaded;
  } catch (error) {
    throw new UserError(`cannot read config file ${candidate}: ${(error as Error).message}`);
  }
  const checked = checkConfig(raw);
  if (!checked.ok) return place(checked.problems.map((p) => ({ text: describeProblem(p) })));
  return { config: checked.config, source: candidate };
}

/** `file` as problems name it: relative to `cwd` when it is below it, else absolute. */
function displayPath(file: string, cwd: string): string {
  const relative = path.relative(cwd, file);
  return relative && !relative.startsWith('..') && !path.isAbsolute(relative) ? relative : file;
}

/**
 * A TypeScript config needs tsx's require hook: there already in a checkout (Warden runs through
 * it), loaded here from the user's project for the installed package, which runs compiled code.
 */
function loadTypeScriptHook(file: string): void {
  if (require.extensions['.ts']) return;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- registers the hook as a side effect
    require(require.resolve('tsx/cjs', { paths: [path.dirname(file), __dirname] }));
  } catch {
    throw new UserError(`${file} is TypeScript, which needs tsx beside it (npm install --save-dev tsx); or write the config as warden.config.json`);
  }
}

/**
 * With `review.design` on and routing naming the agents: why the `review` route may not review
 * the lld or spec (its model writes them, or the policy forbids it), else undefined. The same
 * rule is checked again by every intent as it starts.
 */
function routedDesignReviewViolation(config: WardenConfig): string | undefined {
  const { routing, agents, review } = config;
  if (!review.design || !routing.default) return undefined;
  const profile = (stage: 'lld' | 'spec' | 'review') => agents[routing[stage] ?? routing.default!]!;
  const intent = {
    agent: agents[routing.default]!,
    stageAgents: { lld: profile('lld'), spec: profile('spec'), review: profile('review') },
    reviewPolicy: { requireDifferentFamily: review.requireDifferentFamily, forbiddenReviewers: review.forbiddenReviewers, design: true },
  };
  const violation = designReviewViolation(intent);
  return violation ? `${violation}, or turn review.design off` : undefined;
}
