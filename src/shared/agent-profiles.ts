import { z } from 'zod';
import { DurationSchema } from './schema-primitives';

/**
 * Agent profiles: who does a stage's work. `scripted` replays a script, `command` runs a CLI
 * agent in the worktree, `anthropic` and `openai` call a model over HTTP. HTTP profiles are
 * strict: an API key written into a profile is an error — keys come from the environment only.
 */

/** A profile's name: its automation-ladder scope and its identity in the ledger (default: its kind). */
const AgentName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'an agent name is 1-64 letters, digits, dots, dashes or underscores').optional();

/** The agent CLIs Warden drives itself: it writes their command lines and installs them on first use. */
export const AGENT_CLIS = ['aider', 'codex', 'claude'] as const;

export const ScriptedAgentProfileSchema = z.object({
  kind: z.literal('scripted'),
  name: AgentName,
  /** Absolute path of the JSON script the agent replays. */
  scriptPath: z.string().min(1).max(4096),
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
  /**
   * Endpoint root, as the provider's SDK takes it: openai with `/v1` (https://api.openai.com/v1),
   * anthropic without (https://api.anthropic.com); the other form is turned into it (see
   * `baseUrlOf`). A local server (llama.cpp, vLLM, Ollama) works the same way.
   */
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
export const AnthropicAgentProfileSchema = z.object({ kind: z.literal('anthropic'), ...HttpModelFields }).strict();

/** OpenAI's Chat Completions API, or any endpoint that speaks it (by `baseUrl`). */
export const OpenAiAgentProfileSchema = z.object({ kind: z.literal('openai'), ...HttpModelFields }).strict();

export const CommandAgentProfileSchema = z.object({
  kind: z.literal('command'),
  name: AgentName,
  /**
   * Shell command run in the worktree, e.g. `claude -p` or `aider --message {prompt}`. With `cli`
   * it is only the program (a path, or a name on PATH): Warden adds the CLI's arguments.
   */
  command: z.string().trim().min(1, 'the command of a command agent must not be empty').max(20_000),
  /**
   * A CLI Warden knows how to drive (see src/activities/agents/cli-invocations.ts): its
   * non-interactive flags, its model and gateway settings, a scratch home with what it needs,
   * telemetry and update checks off. Its documents are read from a file, its stdout kept as a log.
   */
  cli: z.enum(AGENT_CLIS).optional(),
  /**
   * What a `cli` may do. `auto`: its widest non-interactive mode inside bubblewrap (commands
   * included: tests, builds, git, grep; the sandbox is what holds them) and edits only elsewhere.
   * `edits`: edits only, wherever it runs. A profile can narrow a CLI this way, never widen it.
   * Default: `auto`.
   */
  cliTools: z.enum(['auto', 'edits']).optional(),
  /**
   * Where a document stage's answer is read: `stdout`, or `file` (the prompt names a file in the
   * worktree; stdout is kept as the log). Default: `file` for a `cli`, else `stdout`.
   */
  answer: z.enum(['stdout', 'file']).optional(),
  /** `stdin` pipes the prompt in; `arg` replaces `{prompt}` / `{promptFile}` in the command. */
  promptVia: z.enum(['stdin', 'arg']).default('stdin'),
  /** Kill the agent after this long. */
  timeout: DurationSchema.default('30m'),
  /** Kill the agent once it has printed this many bytes. */
  maxOutputBytes: z.number().int().positive().default(1_000_000),
  /**
   * Where the command runs (see src/activities/sandbox.ts): `none` a plain process, `process`
   * the same with resource limits, `bubblewrap` inside bwrap (only the worktree writable),
   * `auto` bubblewrap when it works on the worker. Anything below bubblewrap runs only where the
   * intent allows unconfined code (`confinement.allowUnconfinedCode`). HIGH risk always needs
   * bubblewrap.
   */
  sandbox: z.enum(['auto', 'none', 'process', 'bubblewrap']).default('auto'),
  /**
   * What the command may reach over the network: `gateway` only Warden's model gateway (the
   * default when the profile names an `upstream`), `none` nothing (the default otherwise), `host`
   * the worker's whole network (recorded; the merge gate then always needs a person, and every
   * decision a signature). Only
   * bubblewrap can enforce `gateway` and `none`.
   */
  network: z.enum(['gateway', 'none', 'host'], { error: "network is 'gateway' (only the model gateway), 'none' or 'host' (the worker's whole network)" }).optional(),
  /** The model the command's calls go to, through the gateway: its endpoint, keys, models and output cap. */
  upstream: z.discriminatedUnion('kind', [AnthropicAgentProfileSchema, OpenAiAgentProfileSchema]).optional(),
});




export const AgentProfileSchema = z.discriminatedUnion('kind', [
  ScriptedAgentProfileSchema,
  CommandAgentProfileSchema,
  AnthropicAgentProfileSchema,
  OpenAiAgentProfileSchema,
]);
export type AgentProfile = z.infer<typeof AgentProfileSchema>;
export type CommandAgentProfile = z.infer<typeof CommandAgentProfileSchema>;
export type AnthropicAgentProfile = z.infer<typeof AnthropicAgentProfileSchema>;
export type OpenAiAgentProfile = z.infer<typeof OpenAiAgentProfileSchema>;
export type HttpAgentProfile = AnthropicAgentProfile | OpenAiAgentProfile;
