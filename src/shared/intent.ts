import { z } from 'zod';
import { AgentProfileSchema } from './agent-profiles';
import { GatesConfigSchema } from './gate-settings';
import { DEFAULT_INTENT_LIMITS, IntentLimitsConfigSchema, LimitsOverridesSchema, mergeLimits } from './limit-settings';
import type { RiskClass } from './risk';
import { describeIssues, DurationSchema, GateKindSchema, PathGlobSchema, PlainTextSchema, RiskClassSchema } from './schema-primitives';
import { GATE_KINDS } from './gates';
import { isPublicKey } from './decision-proof';
import { NotifyChannelsSchema } from './notify-settings';
import { CustomGatesSchema } from './custom-gate-settings';
import { LOCAL_MERGE, MergeSettingsSchema } from './merge-settings';
import { IntentPlacementSchema } from './placement';
import { IntentJudgeSchema } from './scope-judge';

/*
 * The intent's schema, for the client and the activity that re-checks a workflow's input. Workflow
 * code imports from here types only: see schema-primitives.ts for why zod stays out of it.
 */

export { DurationSchema, describeIssues };

export {
  AgentProfileSchema,
  AnthropicAgentProfileSchema,
  CommandAgentProfileSchema,
  OpenAiAgentProfileSchema,
  ScriptedAgentProfileSchema,
  type AgentProfile,
  type AnthropicAgentProfile,
  type CommandAgentProfile,
  type HttpAgentProfile,
  type OpenAiAgentProfile,
} from './agent-profiles';

export { RiskClassSchema, type RiskClass };

/**
 * The limits an intent runs under: the default profile's, with what the intent (or the config
 * file the client read) overrides. They travel in the workflow input, so every check on them is
 * deterministic.
 */
export const LimitsSchema = LimitsOverridesSchema.default({}).transform((overrides) =>
  IntentLimitsConfigSchema.parse(mergeLimits(DEFAULT_INTENT_LIMITS, overrides)),
);
export type Limits = z.infer<typeof LimitsSchema>;

/**
 * What agent-written code may do beyond its sandbox. Agent-written code is the agent's own
 * commands and everything it wrote that Warden then runs: the repo's test and build commands.
 */
export const ConfinementSchema = z
  .object({
    /**
     * Let agent-written code run outside bubblewrap: at a profile's `none` or `process` level, or
     * with `auto` where bubblewrap does not work. Off by default: then such a run is refused. On,
     * it is recorded (UNCONFINED_CODE_ALLOWED), the merge gate is always a person's, and only
     * signed decisions count, since the code can reach whatever the worker's user can.
     */
    allowUnconfinedCode: z.boolean().default(false),
    /** What the repo's tests may reach: nothing (default), or the worker's whole network (recorded; the merge gate is a person's). */
    testNetwork: z.enum(['none', 'host']).default('none'),
  })
  .strict();
export type Confinement = z.infer<typeof ConfinementSchema>;

/** How long an ended intent's commits are kept for `warden resume` unless `lineage.keepForResume` says. */
export const DEFAULT_KEEP_FOR_RESUME = '30d';

/**
 * Where the lineage of a merged intent (prompts, logs, documents) is kept. `ref` (default): in
 * the repository under `refs/warden/lineage/<id>`, outside every branch, and in the worker's
 * lineage folder; the base branch gets only the change. `tree`: in the base branch as well, under
 * `docs/lineage/done/<id>/`, merged with the intent branch's whole history.
 */
export const LineageSettingsSchema = z
  .object({
    location: z.enum(['ref', 'tree']).default('ref'),
    /** How long an ended intent's commits stay under refs/warden/resume/<id> for `warden resume`. */
    keepForResume: DurationSchema.default(DEFAULT_KEEP_FOR_RESUME),
  })
  .strict();
export type LineageSettings = z.infer<typeof LineageSettingsSchema>;

/**
 * Paths where a person lets the secret scan's findings through (test fixtures of a scanner, say),
 * with the reason they give. It lives in the person's config, never in the worktree (which the
 * agent can write); each finding it lets through is a SECRET_ALLOWED row.
 */
export const SecretAllowanceSchema = z
  .object({
    /** Globs, relative to the repository's root, as in `paths`. */
    paths: z.array(z.string().trim().min(1).max(500)).min(1).max(50),
    reason: z.string().trim().min(1, 'say why secrets may be written there').max(500),
  })
  .strict();
export type SecretAllowance = z.infer<typeof SecretAllowanceSchema>;

/** The secret scan's settings (the config's `secrets`); intents carry them. */
export const SecretSettingsSchema = z.object({ allow: z.array(SecretAllowanceSchema).max(50).default([]) }).strict();
export type SecretSettings = z.infer<typeof SecretSettingsSchema>;

/** An approver's name: what `by` says and the config's `approvers` key. */
export const ApproverNameSchema = z.string().trim().min(1).max(100);

/** Gates where a decision without a signature is taken, unless the intent says otherwise: every one but production. */
export const DEFAULT_UNSIGNED_GATES = GATE_KINDS.filter((gate) => gate !== 'production');

/**
 * Who can prove a decision, and where a decision without proof still counts. The client fills it
 * from the config: the approvers' public keys, and the gates at which the Web UI's unsigned
 * signal is trusted (by default every gate but production on the embedded server, none on a
 * remote one). Production never takes an unsigned decision.
 */
export const ApprovalsSchema = z
  .object({
    keys: z.record(ApproverNameSchema, z.string().refine(isPublicKey, 'a public key is ed25519: and 64 hex digits (warden approver init prints it)')).default({}),
    unsignedGates: z
      .array(GateKindSchema)
      .refine((gates) => !gates.includes('production'), 'the production gate never takes an unsigned decision')
      .default([...DEFAULT_UNSIGNED_GATES]),
  })
  .strict();
export type Approvals = z.infer<typeof ApprovalsSchema>;

/** The stages a replay can start from (`warden replay --from`): from triage it is the whole replay. */
export const REPLAY_FROM_STAGES = ['lld', 'spec', 'impl', 'review'] as const;

/** Triage's assessment as the original intent made it (shared/assessments.ts TriageAssessment). */
const ReplayedTriageSchema = z
  .object({
    risk: RiskClassSchema,
    confidence: z.number().min(0).max(1),
    affectedPaths: z.array(z.string()).readonly(),
    rationale: z.string(),
    predicted: z.object({ files: z.number().int().min(0), lines: z.number().int().min(0) }).strict().optional(),
    structured: z.boolean(),
    problems: z.string().optional(),
  })
  .strict();

export const IntentSchema = z.object({
  id: z
    .string()
    .regex(
      /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/,
      'an intent id is 1-64 letters, digits, dots, dashes or underscores, starting with a letter or digit',
    )
    .refine((id) => !id.includes('..') && !id.endsWith('.lock'), 'an intent id must be a valid git branch name'),
  goal: PlainTextSchema.pipe(z.string().trim().min(1, 'the goal must not be empty').max(4000)),
  /** Absolute path of the target git repository. */
  repoPath: z.string().startsWith('/', 'the repository path must be absolute'),
  baseBranch: z.string().min(1).max(250).default('main'),
  /** Globs (relative to the repo root) the agent may change. */
  paths: z.array(PathGlobSchema).min(1).max(200).default(['**']),
  riskHint: RiskClassSchema.optional(),
  /** The agent of every stage that `stageAgents` does not name. */
  agent: AgentProfileSchema,
  /** Per-stage routing, e.g. triage/lld/spec/review on a model and impl on a CLI agent. */
  stageAgents: z.partialRecord(z.enum(['triage', 'lld', 'spec', 'impl', 'review']), AgentProfileSchema).default({}),
  /**
   * Cross-model review: review on a different model family than impl, and never on the listed
   * models. A violation stops the intent before review.
   */
  reviewPolicy: z
    .object({
      requireDifferentFamily: z.boolean().default(false),
      forbiddenReviewers: z.array(z.string().trim().min(1)).default([]),
      /** The lld and spec go to the `review` stage's agent before their gates; its model may not be the author's. */
      design: z.boolean().default(false),
    })
    .default({ requireDifferentFamily: false, forbiddenReviewers: [], design: false }),
  /** Shell command that runs the repo's tests; exit code 0 means they pass. */
  testCommand: z.string().trim().min(1).max(4000).optional(),
  limits: LimitsSchema,
  /** Per-gate approvers, timeouts, escalation targets (see gates.ts); the client merges the config file's in. */
  gates: GatesConfigSchema.default({}),
  /** The environment the change is for; `production` always adds a human-only gate before merge. */
  environment: z.string().trim().min(1).max(60).optional(),
  confinement: ConfinementSchema.default({ allowUnconfinedCode: false, testNetwork: 'none' }),
  /** Where its lineage is kept once it merges (the config's `lineage`). */
  lineage: LineageSettingsSchema.default({ location: 'ref', keepForResume: DEFAULT_KEEP_FOR_RESUME }),
  /** How the approved change reaches the base branch (the config's `merge`): locally, or as a pull request on the forge. */
  merge: MergeSettingsSchema.default(LOCAL_MERGE),
  /** Several worker hosts with no shared disk (the config's `placement`): the remote every host works from. */
  placement: IntentPlacementSchema.optional(),
  /** Paths where a person allowed secrets in the change (the config's `secrets.allow`). */
  secrets: SecretSettingsSchema.default({ allow: [] }),
  approvals: ApprovalsSchema.default({ keys: {}, unsignedGates: [...DEFAULT_UNSIGNED_GATES] }),
  /** Where this intent's gates, escalations, budget warnings and ending are told (the config's channels and `--notify`). */
  notify: NotifyChannelsSchema.default([]),
  /** The scope judge (the config's `judge`): a model that reads the named stages' answers for work beyond the goal. */
  judge: IntentJudgeSchema.optional(),
  /** Gates of the operator's own (the config's `customGates`), asked after their stage when their conditions hold. */
  customGates: CustomGatesSchema.default([]),
  /**
   * Set by `warden revert`: this intent undoes a merged one. No agent runs: the merge commit is
   * reverted on a branch of its own, the tests run, and the merge gate (a person's) decides.
   */
  revertOf: z
    .object({ intentId: z.string().min(1).max(64), mergedCommit: z.string().regex(/^[0-9a-f]{40}$/, 'a full commit id') })
    .strict()
    .optional(),
  /**
   * Set by `warden replay`: this intent runs another one again, on a scratch clone at its base
   * commit, every model call answered from that intent's recording (docs/replay.md).
   */
  replayOf: z
    .object({
      intentId: z.string().min(1).max(64),
      repoPath: z.string().startsWith('/', 'the repository path must be absolute'),
      /**
       * `warden replay --from STAGE`: the stages before STAGE are the original's and do not run
       * again. The replay's branch starts at the commit STAGE started from then (its lineage
       * folder named for the replay), and triage's assessment is the one the original made.
       */
      from: z.object({ stage: z.enum(REPLAY_FROM_STAGES), triage: ReplayedTriageSchema }).strict().optional(),
    })
    .strict()
    .optional(),
});
/** A validated intent, with defaults applied. */
export type Intent = z.infer<typeof IntentSchema>;
/** What callers pass in: defaults may be left out. */
export type IntentInput = z.input<typeof IntentSchema>;
