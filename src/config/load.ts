import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { UserError } from '../shared/errors';
import { describeIssues } from '../shared/schema-primitives';
import { mergeGateSettings } from '../shared/gate-settings';
import { PROFILE_DEFAULTS } from './profiles';
import { mergeLimits } from '../shared/limit-settings';
import { ConfigFileSchema, WardenConfigSchema, consistencyProblems, type ConfigFile, type WardenConfig } from './schema';

/**
 * Workflow-thread heap one cached intent workflow needs, with room for the collector: each holds
 * its own instance of the workflow code's modules (0.055 MB measured, zod kept out) and its
 * state; 300 cached intents ran in a 64 MB heap (bench:parked --cache 300 --heap 64).
 */
export const HEAP_MB_PER_CACHED_WORKFLOW = 0.5;

/** File names looked for in the working directory when no path is given. */
export const CONFIG_FILE_NAMES = ['warden.config.json', 'warden.config.ts'] as const;

/**
 * Merges a config file's overrides onto its profile's defaults and validates the result.
 * Bad input is a `UserError` naming every bad field; nothing runs with a bad config.
 */
export function resolveConfig(file: unknown, source = 'config'): WardenConfig {
  const parsed = ConfigFileSchema.safeParse(file);
  if (!parsed.success) throw new UserError(`${source} is invalid: ${[describeIssues(parsed.error), ...consistencyProblems(file)].join('; ')}`);
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
    ...(overrides.approvers ?? base.approvers ? { approvers: { ...base.approvers, ...overrides.approvers } } : {}),
    ...(overrides.unsignedDecisions ?? base.unsignedDecisions ? { unsignedDecisions: { ...base.unsignedDecisions, ...overrides.unsignedDecisions } } : {}),
    ...(overrides.customGates ?? base.customGates ? { customGates: overrides.customGates ?? base.customGates } : {}),
    ...(overrides.serve ?? base.serve ? { serve: { ...base.serve, ...overrides.serve } } : {}),
    ...(overrides.notify ?? base.notify ? { notify: overrides.notify ?? base.notify } : {}),
    ...(overrides.operator ?? base.operator ? { operator: overrides.operator ?? base.operator } : {}),
  };
  const result = WardenConfigSchema.safeParse(merged);
  const problems = [...(result.success ? [] : [describeIssues(result.error)]), ...consistencyProblems(merged)];
  if (!result.success || problems.length > 0) throw new UserError(`${source} is invalid: ${problems.join('; ')}`);
  const { maxCachedWorkflows, workflowHeapMb } = result.data.worker;
  if (maxCachedWorkflows !== undefined && workflowHeapMb !== undefined && workflowHeapMb < maxCachedWorkflows * HEAP_MB_PER_CACHED_WORKFLOW) {
    const needed = Math.ceil(maxCachedWorkflows * HEAP_MB_PER_CACHED_WORKFLOW);
    throw new UserError(
      `${source} is invalid: worker.workflowHeapMb (${workflowHeapMb}) is too small for worker.maxCachedWorkflows (${maxCachedWorkflows}): ` +
        `each cached intent needs about ${HEAP_MB_PER_CACHED_WORKFLOW} MB, and a full heap stops the worker. Raise workflowHeapMb to ${needed} or more, or cache fewer.`,
    );
  }
  for (const [stage, name] of Object.entries(result.data.routing)) {
    if (name !== undefined && !result.data.agents[name]) throw new UserError(`${source} is invalid: routing.${stage} names agent "${name}", which is not in agents`);
  }
  return result.data;
}

/**
 * Loads `file` (JSON, or a .ts/.js module whose default export is the object), or the first of
 * CONFIG_FILE_NAMES in `cwd`, or the default profile when there is none.
 */
export function loadConfig(file: string | undefined, cwd: string = process.cwd()): { config: WardenConfig; source?: string } {
  const candidate = file ? path.resolve(cwd, file) : CONFIG_FILE_NAMES.map((n) => path.join(cwd, n)).find((p) => existsSync(p));
  if (!candidate) return { config: resolveConfig({}) };
  if (!existsSync(candidate)) throw new UserError(`config file not found: ${candidate}`);
  let raw: unknown;
  try {
    if (candidate.endsWith('.json')) {
      raw = JSON.parse(readFileSync(candidate, 'utf8'));
    } else {
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- .ts configs load through tsx's require hook
      const loaded = require(candidate) as { default?: unknown };
      raw = loaded.default ?? loaded;
    }
  } catch (error) {
    throw new UserError(`cannot read config file ${candidate}: ${(error as Error).message}`);
  }
  return { config: resolveConfig(raw, candidate), source: candidate };
}
