import { z } from 'zod';
import { PROFILES } from './names';
import { MergeSettingsSchema } from '../shared/merge-settings';
import { PlacementSettingsSchema } from '../shared/placement';
import { parseDuration } from '../shared/duration';
import { DurationSchema, PathGlobSchema, PositiveDurationSchema, UsdSchema } from '../shared/schema-primitives';
import { AgentProfileSchema } from '../shared/agent-profiles';
import { JudgeSettingsSchema } from '../shared/scope-judge';
import { ApproverNameSchema, ConfinementSchema, LineageSettingsSchema, SecretSettingsSchema } from '../shared/intent';
import { isPublicKey } from '../shared/decision-proof';
import { GateKindSchema } from '../shared/schema-primitives';
import { NotifyChannelsSchema } from '../shared/notify-settings';
import { CustomGatesSchema } from '../shared/custom-gate-settings';

/** Approvers and their public keys (`warden approver init NAME` prints the line). */
export const ApproversSchema = z.record(
  ApproverNameSchema,
  z.object({ publicKey: z.string().refine(isPublicKey, 'a public key is ed25519: and 64 hex digits (warden approver init prints it)') }).strict(),
);

/**
 * Where a decision without a signature (the Web UI's `decide` signal, a `temporal workflow
 * signal`) counts: `embedded-server` (default) only when the Temporal server is Warden's own,
 * which only the local user reaches; `always`; or `never`. `gates` narrows it to some gates.
 * The production gate never takes one.
 */
export const UnsignedDecisionsSchema = z
  .object({ accept: z.enum(['embedded-server', 'always', 'never']).default('embedded-server'), gates: z.array(GateKindSchema).optional() })
  .strict();
import { GatesConfigSchema } from '../shared/gate-settings';
import { IntentLimitsConfigSchema, LimitsOverridesSchema } from '../shared/limit-settings';

// Kept for the workflow's stage guard and the agent-safety interceptor until they import it from src/shared.

const Rate = z.object({
  requestsPerMinute: z.number().int().positive(),
  tokensPerMinute: z.number().int().positive(),
});

/**
 * Metrics and traces of the worker (both off unless set; WARDEN_TELEMETRY=0 turns both off):
 * `prometheus` is the address the SDK runtime serves `/metrics` on (the SDK's metrics and
 * Warden's own); `otlpEndpoint` receives OpenTelemetry traces over OTLP/HTTP.
 */
export const TelemetrySchema = z
  .object({
    prometheus: z.string().regex(/^[\w.:[\]-]+:\d{1,5}$/, 'host:port, e.g. 127.0.0.1:9464').optional(),
    otlpEndpoint: z.string().url().optional(),
  })
  .strict();
export type TelemetryConfig = z.infer<typeof TelemetrySchema>;

/**
 * The web app of `warden serve` (and of `warden run` / `warden dev` while they follow an intent):
 * where it listens, and the address notifications link to when that is not where it listens
 * (behind a proxy, or reached by another name).
 */
export const ServeSchema = z
  .object({
    host: z.string().min(1).default('127.0.0.1'),
    /** 0 takes a free port (then links need `url` to find it). */
    port: z.number().int().min(0).max(65535).default(7431),
    url: z
      .string()
      .url()
      .refine((url) => /^https?:$/.test(new URL(url).protocol), 'an http:// or https:// URL')
      .optional(),
  })
  .strict();
export type ServeConfig = z.infer<typeof ServeSchema>;

/** Where links to the web app point. */
export function serveUrl(serve: ServeConfig | undefined): string {
  const s = ServeSchema.parse(serve ?? {});
  return s.url ?? `http://${s.host.includes(':') ? `[${s.host}]` : s.host}:${s.port}`;
}

/** Which named agent profile runs which stage; `default` runs every stage not named. */
export const RoutingSchema = z
  .object({ default: z.string().optional(), triage: z.string().optional(), lld: z.string().optional(), spec: z.string().optional(), impl: z.string().optional(), review: z.string().optional() })
  .strict();

/**
 * A worker's deployment version. Temporal names a version `<name>.<buildId>`, so the name holds no
 * dot; neither holds white space (they are typed on command lines).
 */
export const DeploymentSettingsSchema = z
  .object({
    name: z.string().regex(/^[^.\s]+$/, 'a deployment name has no dots or white space').max(200),
    buildId: z.string().regex(/^\S+$/, 'a build id has no white space').max(200).optional(),
  })
  .strict();
export type DeploymentSettings = z.infer<typeof DeploymentSettingsSchema>;

/** Settings of the worker process: breakers, rate limits, prices, per-day and per-agent budgets. */
export const WorkerSafetyConfigSchema = z.object({
  circuitBreaker: z.object({
    failureRate: z.number().gt(0).max(1),
    minimumCalls: z.number().int().min(1),
    consecutiveFailures: z.number().int().min(1),
    window: PositiveDurationSchema,
    halfOpenAfter: PositiveDurationSchema,
    probes: z.number().int().min(1),
    probeInterval: DurationSchema,
  }),
  errorRate: z.object({ window: PositiveDurationSchema, warning: z.number().gt(0).lt(1), critical: z.number().gt(0).lt(1), minimumCalls: z.number().int().min(1) }),
  rateLimits: z.object({
    /** Activities per second across the task queue (the worker's own limit). */
    globalActivitiesPerSecond: z.number().positive(),
    perAgent: Rate,
    perModel: Rate,
  }),
  /**
   * The model gateway's rules over each attempt's model calls (loops, error loops, self-talk,
   * alternation, context churn, rising input, rapid calls); every field defaults to
   * DEFAULT_CALL_PATTERN_CONFIG in src/gateway/call-patterns.ts, which says why.
   */
  callPatterns: z
    .object({
      identicalCalls: z.number().int().min(2),
      identicalErrors: z.number().int().min(2),
      silentCalls: z.number().int().min(2),
      alternationCycles: z.number().int().min(2),
      contextDrops: z.number().int().min(1),
      contextDropRatio: z.number().gt(0).lt(1),
      escalationCalls: z.number().int().min(2),
      escalationFactor: z.number().gt(1),
      rapidCalls: z.number().int().min(1),
      rapidWindow: PositiveDurationSchema,
    })
    .partial()
    .strict()
    .optional(),
  /** Per day across all intents; `"0"` = unlimited (only when set explicitly). */
  dayBudgetUsd: UsdSchema,
  /** Per agent profile per day across intents; `"0"` = unlimited. */
  agentDayBudgetUsd: UsdSchema,
  /**
   * USD per million input and output tokens, per model id as the provider names it. A config's
   * rows are added to the profile's table, a row of the same model replacing its. A model missing
   * here is an error (`warden run` refuses it before starting), never $0.
   */
  pricing: z.record(z.string().min(1), z.object({ inputUsdPerMillion: UsdSchema, outputUsdPerMillion: UsdSchema }).strict()),
  /**
   * Workflows the worker keeps in memory between tasks (the SDK's sticky cache; default: the
   * SDK's, sized from the heap). Intents parked at gates for hours need not stay cached: a lower
   * number bounds the worker's memory, at the price of a replay when one of them wakes.
   */
  maxCachedWorkflows: z.number().int().min(0).optional(),
  /**
   * V8 heap limit (MB) of the worker's workflow thread. Without one, V8 sizes it from the
   * machine's memory and collects lazily: the RSS of a worker with many parked intents kept
   * growing long after its cache was full. Keep it above what `maxCachedWorkflows` needs.
   */
  workflowHeapMb: z.number().int().min(64).optional(),
  /**
   * Keep a stack trace of every promise in workflow code, so that the Web UI's Call Stack tab and
   * `temporal workflow stack` can show where a running intent waits. Off by default: it about
   * doubles the CPU of every workflow task (src/workers/workflow-stack-traces.ts).
   */
  workflowStackTraces: z.boolean().optional(),
  /**
   * Hands out the worker's task slots by the machine's load instead of fixed counts (the SDK's
   * resource-based tuner): no new task starts while CPU or memory is above its target, as shares
   * of the machine (0.8 = 80 %). For a worker whose agent CLIs each take a core and gigabytes;
   * without it the SDK's fixed slots (100 activities, 40 workflow tasks) apply.
   */
  slots: z.object({ targetCpu: z.number().gt(0).max(1), targetMemory: z.number().gt(0).max(1) }).strict().optional(),
  /**
   * Worker deployment versioning, off unless set: the worker serves its deployment's current
   * version only, so workers of two versions can run side by side during an upgrade
   * (src/workers/worker-deployment.ts). `buildId` defaults to the package version and a hash of
   * the workflow code.
   */
  deployment: DeploymentSettingsSchema.optional(),
  /**
   * The gateway's recording of every model exchange (request and answer, redacted) for replay:
   * on unless `enabled: false`; kept `keep` (default 30d); at most `maxPerIntentMb` per intent
   * (default 20), past which calls go on and the recording is marked capped. Each field left out
   * is RECORDING_DEFAULTS' in src/ledger/exchange-store.ts.
   */
  recording: z
    .object({ enabled: z.boolean(), keep: PositiveDurationSchema, maxPerIntentMb: z.number().positive().finite() })
    .partial()
    .strict()
    .optional(),
});
export type WorkerSafetyConfig = z.infer<typeof WorkerSafetyConfigSchema>;

export const AutomationConfigSchema = z.object({
  level: z.number().int().min(0).max(4),
  allowLevelUp: z.boolean(),
});


/** One thing wrong with a config: the field, as a path from the top, and what is wrong with it. */
export interface ConfigProblem {
  readonly path: readonly PropertyKey[];
  readonly message: string;
  /** A key under `path` that has no business there (a typo, an unknown setting): where to point. */
  readonly unknownKey?: string;
}

/**
 * What no single field can say: values that are each valid but make no sense together. Reads
 * `config` defensively (it may be a merged object that also has type errors), so every problem
 * is reported in one go.
 */
export function consistencyProblems(config: unknown): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const worker = (config as { worker?: { errorRate?: { warning?: unknown; critical?: unknown } } } | undefined)?.worker;
  const { warning, critical } = worker?.errorRate ?? {};
  if (typeof warning === 'number' && typeof critical === 'number' && warning >= critical) {
    problems.push({ path: ['worker', 'errorRate', 'warning'], message: `the warning rate (${warning}) must be below the critical rate (${critical})` });
  }
  const window = (worker as { circuitBreaker?: { window?: unknown } } | undefined)?.circuitBreaker?.window;
  if (typeof window === 'string' && DurationSchema.safeParse(window).success && parseDuration(window) > 0 && parseDuration(window) < 1000) {
    problems.push({ path: ['worker', 'circuitBreaker', 'window'], message: 'the error-rate window must be at least 1s' });
  }
  return problems;
}

/** An agent profile's name, as a key of `agents`: it becomes the profile's ladder scope and ledger identity. */
const AgentKeySchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'an agent name is letters, digits, dots, dashes or underscores');

/**
 * What `warden run` (and `warden revert`) take when their flags do not say: the repository's
 * own settings, which `warden init` finds and writes.
 */
export const RunDefaultsSchema = z
  .object({
    /** The command that runs the repository's tests (`--test-cmd`); `true` runs none. */
    testCommand: z.string().trim().min(1).optional(),
    /** The branch intents start from and merge into (`--base`). */
    baseBranch: z.string().trim().min(1).optional(),
    /** Globs of the paths agents may change (`--paths`); absent means everything. */
    paths: z.array(z.string().trim().pipe(PathGlobSchema)).min(1).optional(),
  })
  .strict();

/** The effective configuration: a profile's defaults with the file's overrides on top. */
export const WardenConfigSchema = z.object({
  profile: z.enum(PROFILES),
  /** development refuses paid cloud models; production allows them. */
  mode: z.enum(['development', 'production']),
  limits: IntentLimitsConfigSchema,
  worker: WorkerSafetyConfigSchema,
  automation: AutomationConfigSchema,
  /** Per-gate approvers, timeouts, escalation and switches (see src/shared/gates.ts); intents carry them. */
  gates: GatesConfigSchema,
  /** Who `warden approve` & co. decide as when `--by` is not given (else $WARDEN_USER or $USER). */
  operator: z.string().trim().min(1).optional(),
  /** Named agent profiles (the name becomes the profile's ladder scope). Keys are never here. */
  agents: z.record(AgentKeySchema, AgentProfileSchema),
  /** Which named profile runs which stage; `default` runs the rest. */
  routing: RoutingSchema,
  /** Cross-model review rules, carried by every intent. */
  review: z.object({
    requireDifferentFamily: z.boolean(),
    forbiddenReviewers: z.array(z.string().trim().min(1)),
    /** The lld and spec are reviewed by the `review` route's model before their gates (never the author's model). */
    design: z.boolean().optional(),
  }),
  telemetry: TelemetrySchema,
  /** What agent-written code may do beyond bubblewrap (see ConfinementSchema); intents carry it. */
  confinement: ConfinementSchema.partial().optional(),
  /** Where a merged intent's lineage is kept: `ref` (default) or `tree` (see LineageSettingsSchema); intents carry it. */
  lineage: LineageSettingsSchema.optional(),
  /** Paths where a person lets secrets into a change, each with a reason (see SecretSettingsSchema); intents carry it. */
  secrets: SecretSettingsSchema.optional(),
  approvers: ApproversSchema.optional(),
  unsignedDecisions: UnsignedDecisionsSchema.optional(),
  /** Channels every intent notifies (intents carry them); the worker uses them for events of no intent. */
  notify: NotifyChannelsSchema.optional(),
  serve: ServeSchema.optional(),
  /** Gates of your own, carried by every intent (see src/shared/custom-gates.ts). */
  customGates: CustomGatesSchema.optional(),
  run: RunDefaultsSchema.optional(),
  /** How approved changes reach the base branch: merged locally, or as a pull request on the team's forge (see MergeSettingsSchema); intents carry it. */
  merge: MergeSettingsSchema.optional(),
  /** Several worker hosts with no shared disk: the remote every host works from, and when an intent leaves a host that is gone (see PlacementSettingsSchema); intents carry it. */
  placement: PlacementSettingsSchema.optional(),
  /** The scope judge: an agent (a model over HTTP) that reads stage answers for work beyond the goal (see JudgeSettingsSchema); intents carry it. Off when absent. */
  judge: JudgeSettingsSchema.optional(),
});
export type WardenConfig = z.infer<typeof WardenConfigSchema>;

/**
 * Deep-partial overrides as a config file may give them. Unknown keys are errors (typos), but
 * `$schema`, which points editors at the JSON Schema (`warden config schema`), is taken and ignored.
 */
export const ConfigFileSchema = z
  .object({
    $schema: z.string().optional(),
    profile: z.enum(PROFILES).optional(),
    mode: z.enum(['development', 'production']).optional(),
    limits: LimitsOverridesSchema.optional(),
    worker: WorkerSafetyConfigSchema.extend({
      circuitBreaker: WorkerSafetyConfigSchema.shape.circuitBreaker.partial().strict(),
      errorRate: WorkerSafetyConfigSchema.shape.errorRate.partial().strict(),
      rateLimits: WorkerSafetyConfigSchema.shape.rateLimits
        .extend({ perAgent: Rate.partial().strict(), perModel: Rate.partial().strict() })
        .partial()
        .strict(),
    })
      .partial()
      .strict()
      .optional(),
    automation: AutomationConfigSchema.partial().strict().optional(),
    gates: GatesConfigSchema.optional(),
    operator: z.string().trim().min(1).optional(),
    // Checked here, not only once merged, so that editors complete profiles from the JSON Schema.
    agents: z.record(AgentKeySchema, AgentProfileSchema).optional(),
    routing: RoutingSchema.optional(),
    review: z.object({ requireDifferentFamily: z.boolean().optional(), forbiddenReviewers: z.array(z.string().trim().min(1)).optional(), design: z.boolean().optional() }).strict().optional(),
    telemetry: TelemetrySchema.optional(),
    confinement: ConfinementSchema.partial().optional(),
    lineage: LineageSettingsSchema.partial().optional(),
    secrets: SecretSettingsSchema.partial().strict().optional(),
    approvers: ApproversSchema.optional(),
    unsignedDecisions: UnsignedDecisionsSchema.optional(),
    notify: NotifyChannelsSchema.optional(),
    serve: ServeSchema.partial().strict().optional(),
    customGates: CustomGatesSchema.optional(),
    run: RunDefaultsSchema.optional(),
    merge: MergeSettingsSchema.optional(),
    placement: PlacementSettingsSchema.partial().strict().optional(),
    judge: JudgeSettingsSchema.optional(),
  })
  .strict();
export type ConfigFile = z.infer<typeof ConfigFileSchema>;
