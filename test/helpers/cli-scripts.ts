import path from 'node:path';
import type { AgentCli } from '../../src/activities/agents/cli-invocations';
import type { Reply, RecordedRequest } from './model-server';
import { SAMPLE_LLD, SAMPLE_SPEC } from '../../src/client/sample-repo';
import type { AgentStage } from '../../src/shared/stages';
import { programPath } from '../setup/prerequisites';

/**
 * Scripts for `startModelServer` that make the real agent CLIs (aider, Codex CLI, Claude Code,
 * installed by scripts/install-agent-clis.sh) write a file and then finish with a final answer,
 * deterministically: each reply is decided by the conversation the request carries (how many
 * tool results it holds), never by a counter, so a CLI that retries or sends a side request gets
 * the same answer for the same state. Warden's own command lines and homes for the CLIs are in
 * src/activities/agents/cli-invocations.ts; test/helpers/cli-runs.md says what each CLI sends.
 */

export type { AgentCli } from '../../src/activities/agents/cli-invocations';

/**
 * The agent profile that runs `cli` (as installed here) in bubblewrap, its model `model` of the
 * API `kind` reached through Warden's gateway at the scripted model server `serverUrl`.
 */
export function cliAgentProfile(cli: AgentCli, kind: 'openai' | 'anthropic', model: string, serverUrl: string) {
  return {
    kind: 'command' as const,
    cli,
    command: programPath(cli)!,
    sandbox: 'bubblewrap' as const,
    upstream: { kind, model, baseUrl: kind === 'openai' ? `${serverUrl}/v1` : serverUrl, apiKeyEnv: ['WARDEN_TEST_UPSTREAM_KEY'], maxTokens: 4096 },
  };
}

/** The pinned versions scripts/install-agent-clis.sh installs. */
export const AGENT_CLI_VERSIONS = { aider: '0.86.2', codex: '0.169.0', claude: '2.1.331' } as const;

const json = (value: unknown): string => `\n\`\`\`json\n${JSON.stringify(value)}\n\`\`\`\n`;
/** What a scripted model has a CLI write as each document stage's answer for the sample repository's "Add slugify" intent. */
export const STAGE_DOCUMENTS: Readonly<Record<Exclude<AgentStage, 'impl'>, string>> = {
  triage: `# Triage\n\nAdds slugify to lib/strings.js.\n${json({ risk: 'LOW', confidence: 0.9, affectedPaths: ['lib/strings.js'], rationale: 'one pure function', predicted: { files: 1, lines: 12 } })}`,
  lld: SAMPLE_LLD,
  spec: SAMPLE_SPEC,
  review: `APPROVE\n${json({ verdict: 'APPROVE', summary: 'matches the design', findings: [], scores: { strategicAlignment: 5, autonomyAppropriateness: 4, outputQuality: 4, resourceEfficiency: 4, learningApplication: 4 } })}`,
};

export interface FileEditScript {
  readonly cli: AgentCli;
  /** Relative to the CLI's working directory, with `/` (e.g. `lib/strings.js`). */
  readonly path: string;
  /** The whole new content of the file (created or overwritten). End it with a newline: see notes. */
  readonly content: string;
  /** The final answer the CLI prints (and, for aider, the text before the edit). */
  readonly finalText?: string;
  /**
   * Claude Code: the working directory, for the absolute path its `Read`/`Write` tools want.
   * Default: read from its prompt ("Primary working directory: …"), which is right unless a
   * sandbox shows the folder under another path.
   */
  readonly cwd?: string;
}

type Respond = (request: RecordedRequest, index: number) => Reply;

/** A `respond` for `startModelServer` that makes `spec.cli` write `spec.path` and then finish. */
export function scriptFileEdit(spec: FileEditScript): Respond {
  if (spec.path === '' || path.posix.isAbsolute(spec.path) || spec.path.split('/').includes('..')) {
    throw new Error(`scriptFileEdit: path must be relative inside the working directory: ${spec.path}`);
  }
  switch (spec.cli) {
    case 'aider':
      return aiderScript(spec);
    case 'codex':
      return codexScript(spec);
    case 'claude':
      return claudeScript(spec);
  }
}

const finalOf = (spec: FileEditScript): string => spec.finalText ?? `Updated ${spec.path}.`;

// ---------------------------------------------------------------------------------------------
// aider: Chat Completions, the edit is plain text in its edit format

/**
 * aider reads edits out of the reply's text, in the edit format its command line chose (the
 * script tells them apart by the system prompt). `whole`: a line with the file name, then a
 * fenced block with the whole file. `diff`: a SEARCH/REPLACE block whose SEARCH is the file's
 * current content as aider showed it (the file is in its chat), or empty for a file it has not
 * shown (which creates a new file, but would append to an existing one).
 *
 * Every request of the conversation gets the edit until aider shows the file with the new
 * content, then the final text alone. This matters: when a reply names a file that is not in
 * its chat, aider adds the file and asks again ("I added these files to the chat") WITHOUT
 * applying the first reply's edit; the second reply must carry the edit again. With
 * auto-commits on, aider's separate commit-message request gets a one-line message.
 *
 * The fence is the one aider asks for (``` unless a file in its chat has lines starting with
 * it). `whole` cannot carry content with a line starting with that fence (Markdown with code
 * blocks: aider would end the file there and make files of what follows), and `diff` cannot
 * carry lines that look like its markers (`=======`, `<<<<<<< SEARCH`, `>>>>>>> REPLACE`): such
 * a reply says so in its text and carries no edit.
 */
function aiderScript(spec: FileEditScript): Respond {
  const final = finalOf(spec);
  const wanted = withNewline(spec.content);
  return (request) => {
    if (request.dialect !== 'chat') return { text: final };
    if (/commit message/i.test(request.system) && !/SEARCH|file listing/.test(request.system)) {
      return { text: `Update ${spec.path}` };
    }
    const fence = aiderFenceOf(request);
    const shown = shownContentOf(spec.path, fence, request);
    if (shown === wanted) return { text: final };
    const diff = /SEARCH/.test(request.system) && /REPLACE/.test(request.system);
    const lines = wanted.split('\n');
    const clash = diff
      ? lines.find((line) => /^(?:<{5,9} SEARCH>?|={5,9}|>{5,9} REPLACE)\s*$/.test(line.trim()))
      : lines.find((line) => line.startsWith(fence[0]) || line.startsWith(fence[1]));
    if (clash !== undefined) {
      return { text: `scriptFileEdit cannot write ${spec.path} in aider's ${diff ? 'diff' : 'whole'} edit format: its line ${JSON.stringify(clash)} would end the block.${diff ? '' : ' Run aider with --edit-format diff.'}` };
    }
    return { text: `${final}\n\n${diff ? aiderDiffEdit(spec, fence, shown ?? '') : aiderWholeEdit(spec, fence)}` };
  };
}

type Fence = readonly [open: string, close: string];

const withNewline = (text: string): string => (text === '' || text.endsWith('\n') ? text : `${text}\n`);
const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * The fence aider's prompt asks for: ``` (its default), ```` or a tag such as <source>, as its
 * format reminder (system prompt) or its example replies (example messages) use it.
 */
function aiderFenceOf(request: RecordedRequest): Fence {
  const messages = (request.body.messages ?? []) as Array<{ role: string; content: unknown }>;
  const text = [request.system, ...messages.map((m) => (typeof m.content === 'string' ? m.content : ''))].join('\n');
  const match = /\n(`{3,4}|<(?:source|code|pre|codeblock|sourcecode)>)[A-Za-z]*\n(?:\/\/ entire file content|<{7} SEARCH)/.exec(text);
  const open = match?.[1] ?? '```';
  return [open, open.startsWith('<') ? `</${open.slice(1)}` : open];
}

/** The file's content as aider last showed it in the conversation ("path\n<fence>\ncontent<fence>\n" in a user message). */
function shownContentOf(file: string, fence: Fence, request: RecordedRequest): string | undefined {
  const messages = (request.body.messages ?? []) as Array<{ role: string; content: unknown }>;
  const pattern = new RegExp(`(?:^|\\n)${escapeRegExp(file)}\\n${escapeRegExp(fence[0])}\\n([\\s\\S]*?)^${escapeRegExp(fence[1])}$`, 'm');
  let shown: string | undefined;
  for (const message of messages) {
    if (message.role !== 'user' || typeof message.content !== 'string') continue;
    const match = pattern.exec(message.content);
    if (match) shown = match[1]!;
  }
  return shown;
}

function aiderWholeEdit(spec: FileEditScript, fence: Fence): string {
  return `${spec.path}\n${fence[0]}\n${withNewline(spec.content)}${fence[1]}\n`;
}

function aiderDiffEdit(spec: FileEditScript, fence: Fence, current: string): string {
  return `${spec.path}\n${fence[0]}\n<<<<<<< SEARCH\n${current}=======\n${withNewline(spec.content)}>>>>>>> REPLACE\n${fence[1]}\n`;
}

// ---------------------------------------------------------------------------------------------
// Codex CLI: Responses API, one tool call, then a message

/**
 * First turn (no tool result yet): write the file with the best tool the request offers: the
 * freeform `apply_patch` (a `custom_tool_call`, offered to model names in Codex's catalog such
 * as `gpt-5.5`), its JSON variant, or a shell tool (`exec_command`, `shell_command`, `shell`)
 * running a command that decodes the content from base64. `*** Add File:` overwrites an existing
 * file. apply_patch always ends the file with a newline, so content without one goes by shell
 * when a shell tool is offered. After the tool's output: the final message.
 */
function codexScript(spec: FileEditScript): Respond {
  const final = finalOf(spec);
  return (request) => {
    if (request.dialect !== 'responses' || request.toolResultCount > 0) return { text: final };
    return { toolCalls: [codexWriteCall(spec, request)] };
  };
}

function codexWriteCall(spec: FileEditScript, request: RecordedRequest): { name: string; input: Record<string, unknown> } | { name: string; customInput: string } {
  const offers = (name: string): boolean => request.toolNames.includes(name);
  const shellTool = ['exec_command', 'shell_command', 'shell'].find(offers);
  const patchFits = spec.content.endsWith('\n') || shellTool === undefined;
  if (patchFits && request.customToolNames.includes('apply_patch')) return { name: 'apply_patch', customInput: addFilePatch(spec) };
  if (patchFits && offers('apply_patch')) return { name: 'apply_patch', input: { input: addFilePatch(spec) } };
  const command = shellWriteCommand(spec.path, spec.content);
  switch (shellTool) {
    case 'shell':
      return { name: 'shell', input: { command: ['bash', '-c', command] } };
    case 'shell_command':
      return { name: 'shell_command', input: { command } };
    default:
      return { name: 'exec_command', input: { cmd: command } };
  }
}

/** An apply_patch patch that (re)creates the file with the content. */
export function addFilePatch(spec: Pick<FileEditScript, 'path' | 'content'>): string {
  const lines = spec.content === '' ? [''] : withNewline(spec.content).slice(0, -1).split('\n');
  return `*** Begin Patch\n*** Add File: ${spec.path}\n${lines.map((line) => `+${line}\n`).join('')}*** End Patch\n`;
}

/** A POSIX shell command that writes exactly `content` to `file` (its folder made first). */
export function shellWriteCommand(file: string, content: string): string {
  const quote = (text: string): string => `'${text.replace(/'/g, `'\\''`)}'`;
  const dir = path.posix.dirname(file);
  const base64 = Buffer.from(content, 'utf8').toString('base64');
  return `${dir === '.' ? '' : `mkdir -p ${quote(dir)} && `}printf '%s' ${quote(base64)} | base64 -d > ${quote(file)}`;
}

// ---------------------------------------------------------------------------------------------
// Claude Code: Anthropic Messages, Read then Write, then a text

/**
 * Claude Code's `Write` refuses to overwrite a file that was not `Read` first in the
 * conversation, and both want absolute paths. So: no tool result yet → `Read` (an error result
 * for a new file does no harm); one → `Write`; more → the final text. A request that does not
 * offer `Write` (a side request) gets the final text.
 */
function claudeScript(spec: FileEditScript): Respond {
  const final = finalOf(spec);
  return (request) => {
    if (request.dialect !== 'messages' || !request.toolNames.includes('Write')) return { text: final };
    const cwd = spec.cwd ?? workingDirectoryOf(request);
    const filePath = cwd === undefined ? spec.path : path.posix.join(cwd, spec.path);
    if (request.toolResultCount === 0) return { toolCalls: [{ name: 'Read', input: { file_path: filePath } }] };
    if (request.toolResultCount === 1) return { toolCalls: [{ name: 'Write', input: { file_path: filePath, content: spec.content } }] };
    return { text: final };
  };
}

/** The working directory Claude Code states in its prompt. */
export function workingDirectoryOf(request: RecordedRequest): string | undefined {
  const pattern = /Primary working directory: ([^\s\\"]+)/;
  return pattern.exec(request.system)?.[1] ?? pattern.exec(JSON.stringify(request.body))?.[1];
}
