/**
 * The agent CLIs Warden drives itself: for each, the command line that runs it once, without a
 * terminal and without asking anything, against the model gateway; the files it needs in its
 * home (made fresh for every attempt, never the user's own); and the variables that keep it from
 * reaching anything but the gateway (telemetry, update checks, price lists, plugin fetches).
 */
import type { CommandAgentProfile, HttpAgentProfile } from '../../shared/agent-profiles';

export type AgentCli = NonNullable<CommandAgentProfile['cli']>;

/**
 * What a CLI may do in one run. `full`: its widest non-interactive mode, commands included
 * (tests, builds, git, grep), without asking; only inside bubblewrap, which confines what the
 * commands do. `edits`: it edits files and runs nothing; everywhere else (see `cliModeFor`).
 */
export type CliMode = 'full' | 'edits';

/**
 * The CLIs that have an edits-only mode. Codex has none that works: its own sandbox
 * (`workspace-write`) runs every tool, apply_patch included, through bubblewrap and a helper of
 * its own, and without them (0.169.0, tried here) it cannot write even the worktree. So Codex
 * always runs with full access, which outside bubblewrap is what the operator's opt-in to
 * unconfined code (`confinement.allowUnconfinedCode`, recorded) accepts.
 */
export const EDITS_ONLY_CLIS: ReadonlySet<AgentCli> = new Set(['aider', 'claude']);

/**
 * The mode a CLI runs in: `full` only where the sandbox is bubblewrap and the profile did not
 * narrow it (`cliTools: 'edits'`); a profile can narrow a CLI, never widen it outside bubblewrap.
 */
export function cliModeFor(cli: AgentCli, level: 'none' | 'process' | 'bubblewrap', cliTools: CommandAgentProfile['cliTools']): CliMode {
  if (!EDITS_ONLY_CLIS.has(cli)) return 'full';
  return level === 'bubblewrap' && cliTools !== 'edits' ? 'full' : 'edits';
}

export interface CliContext {
  /** The program: a path or a name on PATH (the profile's `command`). */
  readonly program: string;
  /** The model the CLI calls, through the gateway. */
  readonly upstream: HttpAgentProfile;
  /** The gateway as the CLI sees it (inside a sandbox: its own loopback). */
  readonly gatewayUrl: string;
  /** HOME as the CLI sees it. */
  readonly home: string;
  /** The prompt, in a file the CLI can read. */
  readonly promptFile: string;
  /** Files of the worktree to hand the CLI (aider edits only the files it is given). */
  readonly files: readonly string[];
  /** The CLI is to create one new file at the worktree's root (a document stage's answer). */
  readonly newFile?: boolean;
  /** What it may do (see `CliMode`). */
  readonly mode: CliMode;
  /** The repository's test command, for a CLI that runs the tests itself in `full` mode (aider); none at a document stage. */
  readonly testCommand?: string;
}

export interface CliInvocation {
  /** Run with /bin/sh -c in the worktree. */
  readonly command: string;
  readonly env: Readonly<Record<string, string>>;
  /** Written into the scratch home before the run, by path relative to it. */
  readonly homeFiles: Readonly<Record<string, string>>;
  /** The CLI refuses this mode as root: inside the sandbox it runs as another user (see SandboxSpec.nonRoot). */
  readonly nonRoot?: boolean;
}

/** Commits and files a CLI makes are attributed to this identity, never to the user's. */
const GIT_IDENTITY = { name: 'Warden agent', email: 'agent@warden.invalid' };

const GITCONFIG = `[user]\n\tname = ${GIT_IDENTITY.name}\n\temail = ${GIT_IDENTITY.email}\n[init]\n\tdefaultBranch = main\n`;

/** Variables every CLI gets: a git identity of its own, and no colour or pager. */
const COMMON_ENV = {
  GIT_AUTHOR_NAME: GIT_IDENTITY.name,
  GIT_AUTHOR_EMAIL: GIT_IDENTITY.email,
  GIT_COMMITTER_NAME: GIT_IDENTITY.name,
  GIT_COMMITTER_EMAIL: GIT_IDENTITY.email,
  NO_COLOR: '1',
  TERM: 'dumb',
  PAGER: 'cat',
  GIT_PAGER: 'cat',
} as const;

/** `'…'` for /bin/sh. */
export function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/**
 * Reads the prompt file into `warden_prompt` for {@link PROMPT_ARGUMENT}. A bare `"$(cat FILE)"`
 * drops the text's trailing newlines; the CLI is to get the prompt byte for byte, as the lineage
 * records it, so a `.` guards the end and the argument takes it off again.
 */
function readPrompt(promptFile: string): string {
  return `warden_prompt=$(cat ${shellQuote(promptFile)} && printf .)`;
}

/** The prompt {@link readPrompt} read, as one argument. */
const PROMPT_ARGUMENT = '"${warden_prompt%.}"';

export function cliInvocation(cli: AgentCli, ctx: CliContext): CliInvocation {
  switch (cli) {
    case 'aider':
      return aider(ctx);
    case 'codex':
      return codex(ctx);
    case 'claude':
      return claude(ctx);
  }
}

/** aider talks to the model through litellm: a provider prefix, and model metadata so it asks no price list online. */
function aider(ctx: CliContext): CliInvocation {
  const provider = ctx.upstream.kind === 'anthropic' ? 'anthropic' : 'openai';
  const model = `${provider}/${ctx.upstream.model}`;
  const metadata = {
    [model]: {
      max_tokens: ctx.upstream.maxTokens,
      max_input_tokens: 200_000,
      max_output_tokens: ctx.upstream.maxTokens,
      input_cost_per_token: 0,
      output_cost_per_token: 0,
      litellm_provider: provider,
      mode: 'chat',
    },
  };
  const args = [
    ctx.program,
    '--model',
    model,
    // No second model: every call goes to the one the profile names.
    '--weak-model',
    model,
    '--model-metadata-file',
    `${ctx.home}/.aider.model.metadata.json`,
    // SEARCH/REPLACE blocks: the whole-file format cuts a Markdown document at its first fence.
    '--edit-format',
    'diff',
    '--yes-always',
    // Without git aider roots itself at the files' common folder, so it keeps git to edit the
    // worktree's files; a new file (the answer) is made without git: in the sandbox .git is
    // read-only and aider's `git add` of a new file would fail there, leaving it empty.
    ...(ctx.newFile ? ['--no-git'] : []),
    '--no-auto-commits',
    '--no-dirty-commits',
    '--no-auto-lint',
    // aider only suggests shell commands (it runs them only on a person's explicit yes, which never comes).
    '--no-suggest-shell-commands',
    // Its way to run commands: the tests after each edit, their failures handed back to the model.
    ...(ctx.mode === 'full' && ctx.testCommand && !ctx.newFile ? ['--test-cmd', ctx.testCommand, '--auto-test'] : []),
    '--no-check-update',
    '--analytics-disable',
    '--no-show-model-warnings',
    '--no-show-release-notes',
    '--no-pretty',
    '--map-tokens',
    '0',
    '--no-gitignore',
    '--chat-history-file',
    '/dev/null',
    '--input-history-file',
    '/dev/null',
    '--message-file',
    ctx.promptFile,
    // Without git, aider edits only the files it is given.
    ...ctx.files,
  ];
  return {
    command: `${args.map(shellQuote).join(' ')} </dev/null`,
    // A wide console: aider folds its output at the console's width, mid-path, and that output
    // reaches the next stage's prompt; unfolded, its paths read whole (and a replay swaps them).
    env: { ...COMMON_ENV, LITELLM_LOCAL_MODEL_COST_MAP: 'True', ANTHROPIC_API_BASE: ctx.gatewayUrl, COLUMNS: '1000' },
    homeFiles: {
      '.gitconfig': GITCONFIG,
      '.aider.model.metadata.json': JSON.stringify(metadata, null, 2),
      // A fresh price cache (non-empty, or aider downloads one at start): the model's own entry.
      '.aider/caches/model_prices_and_context_window.json': JSON.stringify(metadata),
    },
  };
}

/** Codex reads its provider from `$CODEX_HOME/config.toml`; every optional feature that phones out is off. */
function codex(ctx: CliContext): CliInvocation {
  const toml = (value: string) => JSON.stringify(value);
  // Always full access: Codex has no edits-only mode that works (see EDITS_ONLY_CLIS).
  const sandboxMode = 'danger-full-access';
  const config = [
    `model = ${toml(ctx.upstream.model)}`,
    'model_provider = "warden"',
    'approval_policy = "never"',
    `sandbox_mode = ${toml(sandboxMode)}`,
    'check_for_update_on_startup = false',
    '',
    '[model_providers.warden]',
    'name = "Warden model gateway"',
    `base_url = ${toml(`${ctx.gatewayUrl}/v1`)}`,
    'env_key = "OPENAI_API_KEY"',
    'wire_api = "responses"',
    'request_max_retries = 0',
    'stream_max_retries = 0',
    '',
    '[analytics]',
    'enabled = false',
    '',
    '[otel]',
    'exporter = "none"',
    '',
    // Each of these reaches public hosts at start (plugin lists, model discovery, updates).
    '[features]',
    'plugins = false',
    'remote_plugin = false',
    'apps = false',
    'tool_suggest = false',
    'api_key_model_discovery = false',
    'in_app_updates = false',
    '',
  ].join('\n');
  const command = `${readPrompt(ctx.promptFile)} && ${shellQuote(ctx.program)} exec --strict-config --ephemeral --skip-git-repo-check -s ${sandboxMode} ${PROMPT_ARGUMENT} </dev/null`;
  return {
    command,
    env: { ...COMMON_ENV, CODEX_HOME: `${ctx.home}/.codex` },
    homeFiles: { '.gitconfig': GITCONFIG, '.codex/config.toml': config },
  };
}

/**
 * Claude Code: print mode, no traffic but the model's. `full`: every tool without asking
 * (`bypassPermissions`), which it refuses to root, so it runs as another user inside the
 * sandbox's user namespace. `edits`: edits accepted without asking; every command is refused.
 */
function claude(ctx: CliContext): CliInvocation {
  const permissions = ctx.mode === 'full' ? 'bypassPermissions' : 'acceptEdits';
  const command = `${readPrompt(ctx.promptFile)} && ${shellQuote(ctx.program)} -p ${PROMPT_ARGUMENT} --model ${shellQuote(ctx.upstream.model)} --permission-mode ${permissions} --output-format text </dev/null`;
  return {
    command,
    env: {
      ...COMMON_ENV,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_TELEMETRY: '1',
      DISABLE_AUTOUPDATER: '1',
      DISABLE_ERROR_REPORTING: '1',
    },
    homeFiles: { '.gitconfig': GITCONFIG },
    ...(ctx.mode === 'full' ? { nonRoot: true } : {}),
  };
}
