import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { parseDuration } from '../../shared/duration';
import { FailureType } from '../../shared/errors';
import type { CommandAgentProfile } from '../../shared/intent';
import { networkOf } from '../../shared/agent-routing';
import { agentIdOf } from '../../shared/agent-routing';
import type { ModelGateway } from '../../gateway/gateway';
import { gatewayEnvironment, SANDBOX_GATEWAY_URL } from '../../gateway/sandbox-route';
import { upstreamOf } from '../../gateway/upstream';
import { AGENT_SESSION_VARIABLE } from '../../shared/decisions';
import { git } from '../git';
import { agentEnvironment, runProcess, type ProcessOutcome } from '../process';
import { pathAllowed } from '../../shared/glob';
import { cliInvocation, cliModeFor, EDITS_ONLY_CLIS, shellQuote, type CliMode } from './cli-invocations';
import { testsSection } from '../prompts';
import {
  gitDirsOf,
  probeBubblewrap,
  programMounts,
  resolveSandboxLevel,
  sandboxCommand,
  sandboxEnvironment,
  SANDBOX_HOME,
  type BubblewrapProbe,
  type SandboxLevel,
} from '../sandbox';
import { notReplayable, type Agent, type AgentRequest, type AgentResult } from './agent';
import { parseWatchReport } from '../sandbox-watch';
import { attemptEventType, describeAttempt, type AttemptReport } from '../../shared/sandbox-attempts';

export interface CommandAgentDeps {
  /** Whether bubblewrap works on this worker; default: the cached `probeBubblewrap`. */
  readonly probeBubblewrap?: () => Promise<BubblewrapProbe>;
  /** The worker's model gateway: the only road to a model for `network: 'gateway'`. */
  readonly gateway?: ModelGateway;
}

/** How much of stderr a failure message quotes. */
const STDERR_TAIL_CHARS = 500;

const PROMPT = '{prompt}';
const PROMPT_FILE = '{promptFile}';

/**
 * An agent that runs `profile.command` with `/bin/sh -c` in the request's worktree, with
 * Warden's own credentials removed from its environment, in the sandbox `resolveSandboxLevel`
 * picks from `profile.sandbox` and the request's risk (see sandbox.ts). The prompt goes to stdin
 * (`promptVia: 'stdin'`) or replaces `{prompt}` / `{promptFile}` in the command
 * (`promptVia: 'arg'`); the command's stdout is the agent's output.
 *
 * Failures are `ApplicationFailure`s typed AGENT_FAILED (non-zero exit), AGENT_TIMED_OUT,
 * AGENT_OUTPUT_TOO_LARGE (non-retryable) or SANDBOX_UNAVAILABLE (non-retryable, raised before
 * anything runs); cancellation throws a `CancelledFailure`.
 * A bad profile throws INVALID_INTENT (non-retryable) here, before anything runs.
 *
 * A command reports no token usage, so its cost cannot be known: each run reserves the declared
 * per-call cap (`limits.maxCallUsd`) and is counted at that cap, marked unmetered (a run that then
 * fails counts too: it ran). Declare `maxCallUsd: "0"` for a command that costs nothing.
 */
export function createCommandAgent(profile: CommandAgentProfile, deps: CommandAgentDeps = {}): Agent {
  const network = networkOf(profile);
  const { gateway } = deps;
  const profileName = agentIdOf(profile);
  const answerMode = profile.answer ?? (profile.cli ? 'file' : 'stdout');
  if (profile.cli && !profile.upstream) throw invalidProfile(`the ${profile.cli} CLI needs an upstream: the model it calls through the gateway`);
  if (network === 'gateway' && !profile.upstream) {
    throw invalidProfile("a command agent with network 'gateway' needs an upstream: the model its calls are forwarded to");
  }
  let timeoutMs: number;
  try {
    timeoutMs = parseDuration(profile.timeout);
  } catch (err) {
    throw invalidProfile(`agent timeout: ${(err as Error).message}`);
  }
  if (profile.cli && profile.cliTools === 'edits' && !EDITS_ONLY_CLIS.has(profile.cli)) {
    throw invalidProfile(`cliTools 'edits' cannot be had with ${profile.cli}: it has no edits-only mode that works (see docs/agents.md); use aider or claude, or leave cliTools out`);
  }
  if (
    !profile.cli &&
    profile.promptVia === 'arg' &&
    !profile.command.includes(PROMPT) &&
    !profile.command.includes(PROMPT_FILE)
  ) {
    throw invalidProfile(`an agent with promptVia 'arg' needs ${PROMPT} or ${PROMPT_FILE} in its command`);
  }

  return {
    async run(request: AgentRequest): Promise<AgentResult> {
      const viaArg = profile.promptVia === 'arg';
      if (viaArg && request.prompt.includes('\0') && profile.command.includes(PROMPT)) {
        throw ApplicationFailure.create({
          type: FailureType.AgentFailed,
          message: 'the prompt contains a NUL byte and cannot be passed as an argument; use promptVia stdin',
          nonRetryable: true,
        });
      }
      // Before anything is written or run: a sandbox that cannot be had stops the stage here.
      const { level, bwrapPath } = await resolveSandboxLevel({
        setting: profile.sandbox,
        risk: request.riskHint,
        allowUnconfined: request.allowUnconfinedCode === true,
        what: `the ${request.stage} agent (${profileName})`,
        probe: deps.probeBubblewrap ?? probeBubblewrap,
      });
      if (network === 'gateway' && !gateway) {
        throw ApplicationFailure.create({
          type: FailureType.SandboxUnavailable,
          message: `the ${profileName} agent reaches its model through the model gateway, but this worker runs none; the agent was not started`,
          nonRetryable: true,
        });
      }
      if (network === 'host') {
        await request.event?.('HOST_NETWORK_GRANTED', 'medium', `the ${request.stage} agent (${profileName}) runs with the worker's whole network (network: host): nothing it calls is metered or screened, the merge gate needs a person, and only signed decisions count`, {
          suggestion: "Give the profile an upstream and network 'gateway', so its model calls are metered, limited and screened.",
          metadata: { agent: profileName, sandbox: level },
        });
      }
      const answerFile = answerMode === 'file' && request.stage !== 'impl' ? ANSWER_FILE : undefined;
      const cliMode = profile.cli ? cliModeFor(profile.cli, level, profile.cliTools) : undefined;
      if (profile.cli && cliMode === 'edits') {
        const why = level === 'bubblewrap' ? "its profile narrows it (cliTools: 'edits')" : `it runs at sandbox '${level}', outside bubblewrap, where nothing would confine its commands`;
        await request.event?.('CLI_TOOLS_NARROWED', 'low', `the ${request.stage} agent (${profileName}) runs ${profile.cli} with edits only, no commands (no tests, builds or git): ${why}`, {
          ...(level === 'bubblewrap' ? {} : { suggestion: 'Run it where bubblewrap works (sandbox auto or bubblewrap) to give it its whole toolset.' }),
          metadata: { agent: profileName, cli: profile.cli, mode: cliMode, sandbox: level },
        });
      }
      // An impl agent that can run the tests is told how: the repository's own test command.
      const testsFor = request.stage === 'impl' && request.testCommand ? testsHow(profile, cliMode) : undefined;
      // What the command gets (on stdin, as an argument or in the prompt file), and so what the lineage keeps.
      let prompt = request.prompt;
      if (testsFor && request.testCommand) prompt = `${prompt}\n${testsSection(request.testCommand, testsFor)}`;
      if (answerFile) prompt = `${prompt}\n${answerInstruction(answerFile)}`;
      await request.recordPrompt?.(prompt);
      const lease =
        network === 'gateway' && gateway && profile.upstream
          ? gateway.issue({
              intentId: request.intentId,
              stage: request.stage,
              attempt: request.attempt,
              agentId: agentIdOf(profile),
              upstream: upstreamOf(profile.upstream),
              meter: request.meter,
              event: request.event,
              forbiddenModels: request.forbiddenModels,
              screening: { goal: request.goal, paths: request.declaredPaths },
              replayOf: request.replayOf,
            })
          : undefined;
      if (request.replayOf && !lease && network !== 'none') throw notReplayable(request.stage, profileName);
      // Outside the worktree, so it never shows up in the agent's diff: the prompt file and a CLI's scratch home.
      const scratch = (viaArg && profile.command.includes(PROMPT_FILE)) || profile.cli ? await mkdtemp(path.join(os.tmpdir(), 'warden-agent-')) : undefined;
      try {
        let command = profile.command;
        let cliEnv: Readonly<Record<string, string>> = {};
        let homeDir: string | undefined;
        let nonRoot = false;
        if (profile.cli && scratch && profile.upstream) {
          const promptFile = path.join(scratch, 'prompt.md');
          await writeFile(promptFile, prompt, { mode: 0o600 });
          homeDir = path.join(scratch, 'home');
          const invocation = cliInvocation(profile.cli, {
            program: profile.command,
            upstream: profile.upstream,
            gatewayUrl: level === 'bubblewrap' ? SANDBOX_GATEWAY_URL : (gateway?.url ?? ''),
            home: level === 'bubblewrap' ? SANDBOX_HOME : homeDir,
            promptFile,
            files: profile.cli === 'aider' ? await filesForAider(request, answerFile) : [],
            newFile: answerFile !== undefined,
            mode: cliMode ?? 'edits',
            testCommand: request.stage === 'impl' ? request.testCommand : undefined,
          });
          for (const [name, content] of Object.entries(invocation.homeFiles)) {
            await mkdir(path.dirname(path.join(homeDir, name)), { recursive: true });
            await writeFile(path.join(homeDir, name), content, { mode: 0o600 });
          }
          command = invocation.command;
          cliEnv = invocation.env;
          nonRoot = invocation.nonRoot === true;
        } else if (viaArg) {
          if (scratch !== undefined) {
            const promptFile = path.join(scratch, 'prompt.md');
            await writeFile(promptFile, prompt, { mode: 0o600 });
            command = command.split(PROMPT_FILE).join(shellQuote(promptFile));
          }
          command = command.split(PROMPT).join(shellQuote(prompt));
        }
        if (answerFile) await rm(path.join(request.worktreePath, answerFile), { force: true });

        const exec = sandboxCommand({
          level,
          bwrapPath,
          worktreePath: request.worktreePath,
          ...(level === 'bubblewrap' ? gitDirsOf(request.worktreePath) : {}),
          network: network === 'host',
          ...(lease && gateway ? { gatewaySocket: gateway.socketPath } : {}),
          command,
          // The sandbox's /tmp is its own; the prompt file must still be readable there.
          // A CLI installed where the sandbox hides things (a tools folder under /tmp) is bound in.
          readOnlyPaths: [...(scratch === undefined ? [] : [scratch]), ...(profile.cli && level === 'bubblewrap' ? programMounts(profile.command) : [])],
          ...(homeDir && level === 'bubblewrap' ? { homeDir } : {}),
          watch: true,
          ...(nonRoot && level === 'bubblewrap' ? { nonRoot } : {}),
        });
        const watchedRun = level === 'bubblewrap' && network !== 'host';
        const env: NodeJS.ProcessEnv = {
          ...sandboxEnvironment(level, agentEnvironment(process.env)),
          // The marker tells `warden approve` & co. that they run inside an agent: the agent's
          // own decisions are refused (and recorded) even if it reaches the cluster somehow.
          [AGENT_SESSION_VARIABLE]: `${request.intentId}/${request.stage}/${request.attempt}`,
          ...cliEnv,
          ...(homeDir && level !== 'bubblewrap' ? { HOME: homeDir } : {}),
          ...(lease && gateway ? gatewayEnvironment(level === 'bubblewrap' ? SANDBOX_GATEWAY_URL : gateway.url, lease.key) : {}),
        };
        const run = async (): Promise<ProcessOutcome> => {
          try {
            return await runProcess({
              command,
              exec,
              cwd: request.worktreePath,
              env,
              stdin: viaArg || profile.cli ? undefined : prompt,
              timeoutMs,
              maxOutputBytes: profile.maxOutputBytes,
              // A lease that halts stops the agent (after a grace, or at once if it keeps calling).
              signal: lease ? AbortSignal.any([request.signal, lease.stopSignal]) : request.signal,
              heartbeat: request.heartbeat,
              report: watchedRun,
              kind: 'agent',
            });
          } catch (err) {
            // E2BIG (a prompt over the kernel's 128 KiB argument limit) will not fix itself.
            const code = (err as { cause?: NodeJS.ErrnoException }).cause?.code;
            throw ApplicationFailure.create({
              type: FailureType.AgentFailed,
              message: (err as Error).message,
              nonRetryable: code === 'E2BIG',
              cause: err as Error,
            });
          }
        };
        let outcome: ProcessOutcome;
        if (lease) {
          // Every model call went through the gateway: metered there, call by call.
          try {
            outcome = await run();
          } finally {
            await lease.end();
          }
          // The gateway halted the attempt (a budget, a forbidden model, a loop, a CRITICAL answer): that is its end, whatever the CLI exited with.
          if (lease.halt) throw lease.halt.failure;
        } else {
          // No gateway: a run that started may have spent (a failed or killed one too); one that could not start cost nothing.
          outcome = await request.meter.call('command', { kind: 'declared', pricedByModel: false }, async () => ({
            value: await run(),
            report: { kind: 'unmetered', reason: 'a command agent outside the gateway reports no token usage' },
          }));
        }
        const attempts = attemptsOf(outcome, lease?.redactions ?? 0);
        let result: AgentResult;
        try {
          result = toResult(outcome, profile, level);
        } catch (error) {
          // A failed attempt's evidence is not lost with its result: recorded here, from the activity.
          await recordFailedAttempts(request, attempts);
          throw error;
        }
        if (attempts) result = { ...result, attempts };
        if (answerFile) result = { ...result, output: await takeAnswer(request.worktreePath, answerFile, request.stage), log: result.output };
        if (lease) result = { ...result, usage: request.meter.totalUsage(), model: profile.upstream?.model };
        return result;
      } finally {
        if (scratch !== undefined) await rm(scratch, { recursive: true, force: true });
      }
    },
  };
}

/** What the sandbox's watcher reported, with the gateway's redactions; undefined when nothing. */
function attemptsOf(outcome: ProcessOutcome, redactions: number): AttemptReport | undefined {
  const watched = parseWatchReport(outcome.report ?? '');
  const attempts = [...watched.attempts, ...(redactions > 0 ? [{ kind: 'answer-redacted' as const, count: redactions }] : [])];
  return attempts.length > 0 ? { attempts, more: watched.more } : undefined;
}

async function recordFailedAttempts(request: AgentRequest, report: AttemptReport | undefined): Promise<void> {
  if (!report || !request.event) return;
  for (const [index, attempt] of report.attempts.entries()) {
    await request.event(attemptEventType(attempt), 'high', `the ${request.stage} agent (attempt ${request.attempt}, which failed) ${describeAttempt(attempt)}`, { key: `attempt-${index}`, metadata: { ...attempt } });
  }
}

/**
 * Whether an impl agent is told how to run the tests, and how: a CLI in `full` mode runs them
 * itself (aider: after each edit, on its own), one with edits only cannot; an agent of your own
 * may run commands wherever it runs.
 */
function testsHow(profile: CommandAgentProfile, mode: CliMode | undefined): 'agent-runs' | 'cli-runs' | undefined {
  if (!profile.cli) return 'agent-runs';
  if (mode !== 'full') return undefined;
  return profile.cli === 'aider' ? 'cli-runs' : 'agent-runs';
}

function toResult(outcome: ProcessOutcome, profile: CommandAgentProfile, level: SandboxLevel): AgentResult {
  const tail = stderrTail(outcome.stderr);
  switch (outcome.termination) {
    case 'aborted':
      throw new CancelledFailure('agent cancelled');
    case 'timed-out':
      throw ApplicationFailure.create({
        type: FailureType.AgentTimedOut,
        message: `agent command timed out after ${profile.timeout}${tail}`,
        nonRetryable: false,
      });
    case 'output-cap':
      throw ApplicationFailure.create({
        type: FailureType.AgentOutputTooLarge,
        message: `agent command printed more than ${profile.maxOutputBytes} bytes and was killed`,
        nonRetryable: true,
      });
    case 'exited':
      if (outcome.exitCode !== 0) {
        const how =
          outcome.exitCode === null ? `was killed by ${outcome.signal ?? 'a signal'}` : `exited with code ${outcome.exitCode}`;
        throw ApplicationFailure.create({
          type: FailureType.AgentFailed,
          message: `agent command ${how}${level === 'none' ? '' : ` (sandbox: ${level})`}${tail}`,
          nonRetryable: false,
        });
      }
      return { output: outcome.stdout, usage: { inputTokens: 0, outputTokens: 0 } };
  }
}

/** Where a document stage's answer is written, at the worktree's root; read, then removed. */
const ANSWER_FILE = 'WARDEN-ANSWER.md';

function answerInstruction(file: string): string {
  return `\n## Where your answer goes\nWrite your whole answer, exactly as asked above, to the file \`${file}\` at the root of the working directory (create it). Warden reads that file; what you print is kept only as a log. Change no other file.\n`;
}

/** The answer the agent wrote, removed from the worktree so it is not part of the change. */
async function takeAnswer(worktreePath: string, file: string, stage: string): Promise<string> {
  const full = path.join(worktreePath, file);
  let text: string;
  try {
    text = await readFile(full, 'utf8');
  } catch {
    throw ApplicationFailure.create({
      type: FailureType.AgentFailed,
      message: `the ${stage} agent wrote no answer to ${file}; its log is in the lineage`,
      nonRetryable: false,
    });
  }
  await rm(full, { force: true });
  if (!text.trim()) throw ApplicationFailure.create({ type: FailureType.AgentFailed, message: `the ${stage} agent left ${file} empty`, nonRetryable: false });
  return text;
}

/** What aider is handed: at impl the declared files that exist, else the answer file it is to write. */
async function filesForAider(request: AgentRequest, answerFile: string | undefined): Promise<string[]> {
  if (answerFile) return [answerFile];
  const listed = (await git(request.worktreePath, ['ls-files'])).split('\n').filter(Boolean);
  return listed.filter((file) => !file.startsWith('docs/lineage/') && pathAllowed(request.declaredPaths ?? ['**'], file)).slice(0, 50);
}

function stderrTail(stderr: string): string {
  const trimmed = stderr.trimEnd();
  if (trimmed === '') return '';
  return trimmed.length > STDERR_TAIL_CHARS
    ? `; stderr ends: …${trimmed.slice(-STDERR_TAIL_CHARS)}`
    : `; stderr: ${trimmed}`;
}

function invalidProfile(message: string): ApplicationFailure {
  return ApplicationFailure.create({ type: FailureType.InvalidIntent, message, nonRetryable: true });
}
