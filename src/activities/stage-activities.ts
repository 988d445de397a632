import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import { parseDuration } from '../shared/duration';
import type { Redactor } from '../shared/redact';
import type { Intent } from '../shared/intent';
import type { AgentStage } from '../shared/stages';
import { createAgent } from './agents';
import { activityLogger } from './log-context';
import { commitAll } from './git';
import { archiveLineageFolder, artifactName, readPriorArtifacts, writeLineageFile } from './lineage';
import { agentEnvironment, runProcess } from './process';
import { buildPrompt } from './prompts';
import { describeTestRun, readTestCounts } from './test-results';
import { ensureWorktree, mergeIntoBase, removeWorktree, type WorktreeRef } from './worktree';

/** What the worker injects into activities. */
export interface ActivityDeps {
  /** Folder under which intent worktrees are made (outside any target repo). */
  readonly worktreeRoot: string;
  /** Folder that keeps the lineage of intents that were not merged. */
  readonly lineageRoot: string;
  readonly logger: Logger;
  /** Scrubs secrets from agent and test output before it is stored anywhere. */
  readonly redact: Redactor;
}

export interface IntentRef {
  readonly intent: Intent;
}

export interface StageInput extends IntentRef {
  readonly stage: AgentStage;
  readonly attempt: number;
  /** What went wrong last time (e.g. the failing tests), for the next prompt. */
  readonly feedback?: string;
}

/** Small by design: it is recorded in workflow history. Documents stay in the worktree. */
export interface StageResult {
  readonly artifactPath: string;
  readonly promptPath: string;
  readonly summary: string;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly costUsd: number;
  readonly model?: string;
  readonly commit?: string;
}

export interface TestRunResult {
  readonly attempt: number;
  readonly passed: boolean;
  readonly ran: boolean;
  readonly summary: string;
  readonly passedCount?: number;
  readonly failedCount?: number;
  readonly logPath?: string;
  /** The end of the output, fed back to the next impl attempt. */
  readonly tail: string;
}

const TEST_OUTPUT_CAP = 4 * 1024 * 1024;
const FEEDBACK_TAIL_CHARS = 1500;

/** Stage activities, built with their dependencies (see `createActivities`). */
export function createStageActivities(deps: ActivityDeps) {
  const worktree = (intent: Intent): Promise<WorktreeRef> =>
    ensureWorktree({ repoPath: intent.repoPath, baseBranch: intent.baseBranch, intentId: intent.id, worktreeRoot: deps.worktreeRoot });

  return {
    /** Creates (or finds) the intent's worktree on `warden/<id>`. Idempotent. */
    async prepareWorktree({ intent }: IntentRef): Promise<WorktreeRef> {
      return worktree(intent);
    },

    /**
     * Runs one attempt of an agent stage in the worktree: prompt → agent → artifact → commit.
     * Heartbeats while the agent works; cancellation kills the agent. A retry after the commit
     * commits nothing new (same content, nothing staged).
     */
    async runAgentStage(input: StageInput): Promise<StageResult> {
      const { intent, stage, attempt } = input;
      const ctx = Context.current();
      const { worktreePath } = await worktree(intent);
      const prompt = buildPrompt({
        intent,
        stage,
        attempt,
        priorArtifacts: await readPriorArtifacts(worktreePath, intent.id, stage),
        feedback: input.feedback,
      });
      const promptPath = await writeLineageFile(worktreePath, intent.id, artifactName(stage, attempt, '.prompt.md'), deps.redact(prompt));
      const result = await createAgent(intent.agent).run({
        intentId: intent.id,
        stage,
        attempt,
        prompt,
        worktreePath,
        signal: ctx.cancellationSignal,
        heartbeat: () => ctx.heartbeat(),
      });
      const output = deps.redact(result.output);
      const artifactPath = await writeLineageFile(worktreePath, intent.id, artifactName(stage, attempt), output);
      const commit = await commitAll(worktreePath, `warden(${intent.id}): ${stage} attempt ${attempt}`);
      activityLogger(deps.logger).info({ commit, costUsd: result.costUsd }, 'stage attempt done');
      return {
        artifactPath,
        promptPath,
        summary: firstLine(output),
        inputTokens: result.usage.inputTokens,
        outputTokens: result.usage.outputTokens,
        costUsd: result.costUsd,
        model: result.model,
        commit,
      };
    },

    /** Runs the repo's test command in the worktree and records its output in the lineage. */
    async runTests({ intent, attempt }: { readonly intent: Intent; readonly attempt: number }): Promise<TestRunResult> {
      const ctx = Context.current();
      const { worktreePath } = await worktree(intent);
      const command = intent.testCommand ?? detectTestCommand(worktreePath);
      if (!command) {
        return { attempt, passed: true, ran: false, summary: 'no test command: nothing to run', tail: '' };
      }
      const outcome = await runProcess({
        command,
        cwd: worktreePath,
        env: { ...agentEnvironment(process.env), CI: 'true' },
        timeoutMs: parseDuration(intent.limits.testTimeout),
        maxOutputBytes: TEST_OUTPUT_CAP,
        signal: ctx.cancellationSignal,
        heartbeat: () => ctx.heartbeat(),
      });
      const output = deps.redact(`$ ${command}\n${outcome.stdout}${outcome.stderr}`);
      const counts = readTestCounts(output);
      const passed = outcome.termination === 'exited' && outcome.exitCode === 0;
      const summary = describeTestRun(outcome.exitCode, outcome.termination, counts);
      const logPath = await writeLineageFile(worktreePath, intent.id, artifactName('impl', attempt, '-tests.log'), output);
      await commitAll(worktreePath, `warden(${intent.id}): tests after impl attempt ${attempt}: ${summary}`);
      return {
        attempt,
        passed,
        ran: true,
        summary,
        passedCount: counts.passed,
        failedCount: counts.failed,
        logPath,
        tail: output.slice(-FEEDBACK_TAIL_CHARS),
      };
    },

    /** Moves the lineage from active/ to done/ and commits it on the intent branch. */
    async archiveLineage({ intent }: IntentRef): Promise<{ readonly lineagePath: string }> {
      const { worktreePath } = await worktree(intent);
      const lineagePath = await archiveLineageFolder(worktreePath, intent.id);
      await commitAll(worktreePath, `warden(${intent.id}): archive lineage`);
      return { lineagePath };
    },

    /** Merges the intent branch into the base branch. Call only after the merge gate approved. */
    async mergeIntent({ intent }: IntentRef): Promise<{ readonly mergedCommit: string }> {
      const mergedCommit = await mergeIntoBase({
        repoPath: intent.repoPath,
        baseBranch: intent.baseBranch,
        intentId: intent.id,
        message: `warden: merge intent ${intent.id}\n\n${intent.goal}`,
      });
      activityLogger(deps.logger).info({ mergedCommit }, 'merged');
      return { mergedCommit };
    },

    /** Removes the worktree whatever the outcome; deletes the branch when asked. Idempotent. */
    async cleanupIntent(input: IntentRef & { readonly deleteBranch: boolean }): Promise<{ readonly lineageCopy?: string }> {
      return removeWorktree({
        repoPath: input.intent.repoPath,
        intentId: input.intent.id,
        worktreeRoot: deps.worktreeRoot,
        lineageRoot: deps.lineageRoot,
        deleteBranch: input.deleteBranch,
      });
    },
  };
}

/** `npm test` when package.json has a test script; otherwise none. */
export function detectTestCommand(worktreePath: string): string | undefined {
  const pkg = path.join(worktreePath, 'package.json');
  if (!existsSync(pkg)) return undefined;
  try {
    const scripts = (JSON.parse(readFileSync(pkg, 'utf8')) as { scripts?: Record<string, string> }).scripts;
    return scripts?.test ? 'npm test --silent' : undefined;
  } catch {
    return undefined;
  }
}

function firstLine(text: string): string {
  const line = text.split('\n').find((l) => l.trim()) ?? '';
  return line.trim().slice(0, 200);
}
