import { z } from 'zod';
import { PROFILE_DEFAULTS } from '../config/profiles';
import { IntentLimitsConfigSchema, LimitsOverridesSchema, mergeLimits } from '../config/schema';
import { GatesConfigSchema } from './gates';
import { DurationSchema } from './duration';
import { RiskClassSchema, type RiskClass } from './risk';

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

export const AgentProfileSchema = z.discriminatedUnion('kind', [
  ScriptedAgentProfileSchema,
  CommandAgentProfileSchema,
]);
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
  agent: AgentProfileSchema,
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

/** Turns zod issues into one readable line: `field: problem; field: problem`. */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => (issue.path.length ? `${issue.path.join('.')}: ${issue.message}` : issue.message))
    .join('; ');
}
