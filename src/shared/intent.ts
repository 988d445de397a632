import { z } from 'zod';
import { PROFILE_DEFAULTS } from '../config/profiles';
import { IntentLimitsConfigSchema, LimitsOverridesSchema, mergeLimits } from '../config/schema';
import { GatesConfigSchema } from './gates';
import { DurationSchema } from './duration';
import { RiskClassSchema, type RiskClass } from './risk';
import type { AgentStage } from './stages';

export { DurationSchema };

/** How a command agent receives its prompt. */
/** A profile's name: its automation-ladder scope and its identity in the ledger (default: its kind). */
const AgentName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'an agent name is 1-64 letters, digits, dots, dashes or underscores').optional();

export const CommandAgentProfileSchema = z.object({
  kind: z.literal('command'),
  name: AgentName,
  /** Shell command run in the worktree, e.g. `claude -p` or `aider --message {prompt}`. */
  command: z.string().trim().min(1, 'the command of a command agent must not be empty'),
  /** `stdin` pipes the prompt in; `arg` replaces `{prompt}` / `{promptFile}` in the command. */
  promptVia: z.enum(['stdin', 'arg']).default('stdin'),
  /** Kill the agent after this long. */
  timeout: DurationSchema.default('30m'),
  /** Kill the agent once it has printed this many bytes. */
  maxOutputBytes: z.number().int().positive().default(1_000_000),
  /**
   * Where the command runs (see src/activities/sandbox.ts): `none` a plain process, `process`
   * the same with resource limits, `bubblewrap` inside bwrap (only the worktree writable),
   * `auto` bubblewrap when it works on the worker, else process. HIGH risk always needs
   * bubblewrap.
   */
  sandbox: z.enum(['auto', 'none', 'process', 'bubblewrap']).default('auto'),
  /** Whether the command may use the network; only bubblewrap can take it away. */
  network: z.boolean().default(false),
});

export const ScriptedAgentProfileSchema = z.object({
  kind: z.literal('scripted'),
  name: AgentName,
  /** Absolute path of the JSON script the agent replays. */
  scriptPath: z.string().min(1),
});

/** Names of environment variables holding API keys, tried in order (the keys never travel). */
const KeyVariables = z
  .array(z.string().regex(/^[A-Z_][A-Z0-9_]*$/, 'an environment variable name such as ANTHROPIC_API_KEY'))
  .min(1)
  .max(10);

/** Fields every HTTP model profile shares. */
const HttpModelFields = {
  name: AgentName,
  /** The model asked for; the answer must name it (or one of `modelAliases`), else the call fails closed. */
  model: z.string().trim().min(1),
  modelAliases: z.array(z.string().trim().min(1)).default([]),
  /** Endpoint root; a local server (llama.cpp, vLLM, Ollama) works the same way. */
  baseUrl: z.string().url().optional(),
  /** Environment variables with the API keys; on an auth or quota error the next one is tried. */
  apiKeyEnv: KeyVariables.optional(),
  maxTokens: z.number().int().positive().max(200_000).default(8192),
  /** One HTTP request; retries (429, 5xx) come on top, within the stage timeout. */
  timeout: DurationSchema.default('5m'),
  /** Answers longer than this (bytes) are refused. */
  maxResponseBytes: z.number().int().positive().default(4_000_000),
};

/** Anthropic's Messages API. */
export const AnthropicAgentProfileSchema = z.object({ kind: z.literal('anthropic'), ...HttpModelFields });

/** OpenAI's Chat Completions API, or any endpoint that speaks it (by `baseUrl`). */
export const OpenAiAgentProfileSchema = z.object({ kind: z.literal('openai'), ...HttpModelFields });

export const AgentProfileSchema = z.discriminatedUnion('kind', [
  ScriptedAgentProfileSchema,
  CommandAgentProfileSchema,
  AnthropicAgentProfileSchema,
  OpenAiAgentProfileSchema,
]);
export type AnthropicAgentProfile = z.infer<typeof AnthropicAgentProfileSchema>;
export type OpenAiAgentProfile = z.infer<typeof OpenAiAgentProfileSchema>;
export type HttpAgentProfile = AnthropicAgentProfile | OpenAiAgentProfile;
export type AgentProfile = z.infer<typeof AgentProfileSchema>;
export type CommandAgentProfile = z.infer<typeof CommandAgentProfileSchema>;

export { RiskClassSchema, type RiskClass };

/**
 * The limits an intent runs under: the default profile's, with what the intent (or the config
 * file the client read) overrides. They travel in the workflow input, so every check on them is
 * deterministic.
 */
export const LimitsSchema = LimitsOverridesSchema.default({}).transform((overrides) =>
  IntentLimitsConfigSchema.parse(mergeLimits(PROFILE_DEFAULTS.default.limits, overrides)),
);
export type Limits = z.infer<typeof LimitsSchema>;

export const IntentSchema = z.object({
  id: z
    .string()
    .regex(
      /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/,
      'an intent id is 1-64 letters, digits, dots, dashes or underscores, starting with a letter or digit',
    )
    .refine((id) => !id.includes('..') && !id.endsWith('.lock'), 'an intent id must be a valid git branch name'),
  goal: z.string().trim().min(1, 'the goal must not be empty').max(4000),
  /** Absolute path of the target git repository. */
  repoPath: z.string().startsWith('/', 'the repository path must be absolute'),
  baseBranch: z.string().min(1).default('main'),
  /** Globs (relative to the repo root) the agent may change. */
  paths: z.array(z.string().min(1)).min(1).default(['**']),
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
    })
    .default({ requireDifferentFamily: false, forbiddenReviewers: [] }),
  /** Shell command that runs the repo's tests; exit code 0 means they pass. */
  testCommand: z.string().trim().min(1).optional(),
  limits: LimitsSchema,
  /** Per-gate approvers, timeouts, escalation targets (see gates.ts); the client merges the config file's in. */
  gates: GatesConfigSchema.default({}),
  /** The environment the change is for; `production` always adds a human-only gate before merge. */
  environment: z.string().trim().min(1).max(60).optional(),
});
/** A validated intent, with defaults applied. */
export type Intent = z.infer<typeof IntentSchema>;
/** What callers pass in: defaults may be left out. */
export type IntentInput = z.input<typeof IntentSchema>;

/** The agent profile that runs `stage` of this intent. */
export function agentForStage(intent: Pick<Intent, 'agent' | 'stageAgents'>, stage: AgentStage): AgentProfile {
  return intent.stageAgents[stage] ?? intent.agent;
}

/**
 * A profile's model family, for the cross-model review rule: the provider and the model's
 * leading name (claude-sonnet-4-5 → anthropic/claude; gpt-4.1 → openai/gpt). Command and
 * scripted agents are their own families (by program or script).
 */
export function modelFamily(profile: AgentProfile): string {
  switch (profile.kind) {
    case 'anthropic':
    case 'openai':
      return `${profile.kind}/${(/^[a-z]+/i.exec(profile.model)?.[0] ?? profile.model).toLowerCase()}`;
    case 'command':
      return `command/${profile.command.trim().split(/\s+/)[0]?.split('/').pop() ?? 'command'}`;
    case 'scripted':
      return `scripted/${profile.name ?? profile.scriptPath}`;
  }
}

/** Turns zod issues into one readable line: `field: problem; field: problem`. */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => (issue.path.length ? `${issue.path.join('.')}: ${issue.message}` : issue.message))
    .join('; ');
}
