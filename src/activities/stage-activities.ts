import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import { parseDuration } from '../shared/duration';
import { redactDeep, type Redactor } from '../shared/redact';
import { agentForCall, agentForStage, modelOf, modelsForbiddenAt } from '../shared/agent-routing';
import type { ModelGateway } from '../gateway/gateway';
import { DEFAULT_KEEP_FOR_RESUME, type Intent, type SecretAllowance } from '../shared/intent';
import type { ReplaySource } from '../gateway/lease';
import type { AgentStage } from '../shared/stages';
import { detectCascade, type CascadeLevel } from '../safety/cascade-detector';
import { withVerdict, type ScopeVerdict } from '../safety/scope-judge';
import { askScopeJudge } from './scope-judge';
import type { AnomalyNotice } from '../safety/behaviour-watch';
import type { PricingTable } from '../safety/pricing';
import { FailureType } from '../shared/errors';
import { currentAttemptScope } from '../gateway/attempt-scope';
import { createAgent, SpendMeter } from './agents';
import { activityLogger } from './log-context';
import { detectTestCommand } from './test-command';
import { changesAgainstBase, git, gitRaw, isAncestor, type NameStatus } from './git';
import { commitAll } from './index-commit';
import { archiveLineageFolder, artifactName, copyLineageFolder, readLineageArtifact, readPriorArtifacts, writeLineageFile } from './lineage';
import { recordLineageRef } from './lineage-ref';
import { dropExpiredResumeRefs, resumableFrom } from './resume-ref';
import { recordEndingRefs } from './ending-refs';
import type { GlobalStopSet, GlobalStopWatch } from './global-stop-watch';
import { agentEnvironment, runProcess, type RunProcessOptions } from './process';
import { gitDirsOf, probeBubblewrap, resolveSandboxLevel, sandboxCommand, sandboxEnvironment } from './sandbox';
import { parseWatchReport } from './sandbox-watch';
import { redactionsIn, type AttemptReport } from '../shared/sandbox-attempts';
import { AGENT_SESSION_VARIABLE } from '../shared/decisions';
import { buildPrompt } from './prompts';
import { recordingContextOf } from './recording-context';
import type { RecordingContext } from '../ledger/exchange-store';
import { classifyTestRun, describeTestRun, feedbackTail, instructionForTestRun, readFailingTests, readTestCounts, type TestRunClass } from './test-results';
import { holdBackSecrets, inspectStep, mergeBaseOf, restoreOutside, revertChanges, scanChangedFilesForStubs, takeRepoSnapshot, changeFromBaseOf, type InspectedWorktree, type RepoSnapshot } from './change-inspection';
import type { SecretScan } from '../shared/secret-findings';
import { detectTestTampering } from './test-tamper';
import { checkTestPlanIn, type TestPlanCheck } from './test-plan-check';
import { checkLld, checkSpec, type DocumentCheck } from '../safety/document-checks';
import { formatStubFindings } from '../safety/stub-detector';
import { activeLineageDir, branchForIntent, lineageRefFor, resumeRefFor } from '../shared/ids';
import { MERGE_CONDITION_FORMS, parseMergeCondition } from '../shared/merge-conditions';
import { matchGlob, pathAllowed } from '../shared/glob';
import type { HaltDetails, KillSwitchDetails } from '../shared/halt';
import { ensureWorktree, mergeIntoBase, removeWorktree, worktreePathFor, type WorktreeRef } from './worktree';
import { readDesignReviewAssessment, readReviewAssessment, readTriageAssessment } from '../shared/assessment-parsing';
import type { DesignReviewAssessment, ReviewAssessment, TriageAssessment } from '../shared/assessments';

/** What the worker injects into activities. */
export interface ActivityDeps {
  /** Folder under which intent worktrees are made (outside any target repo). */
  readonly worktreeRoot: string;
  /** Folder that keeps a copy of every intent's lineage (merged ones only with `lineage.location: ref`). */
  readonly lineageRoot: string;
  readonly logger: Logger;
  /** Scrubs secrets from agent and test output before it is stored anywhere. */
  readonly redact: Redactor;
  /** Prices usage the agent did not price itself. */
  readonly pricing: PricingTable;
  /** `development` refuses paid cloud model endpoints (config `mode`). Default: development. */
  readonly mode?: 'development' | 'production';
  /** Replaces global fetch for HTTP agents (tests). */
  readonly fetch?: typeof fetch;
  /** The worker's model gateway: command agents with `network: 'gateway'` reach their model only through it. */
  readonly gateway?: ModelGateway;
  /** This host's own task queue: an intent's stages run there once it has made the intent's worktree. */
  readonly hostQueue?: string;
  /** Keeps what a replay of the intent needs (the first call per intent counts); absent when recording is off. */
  readonly recordContext?: (intentId: string, context: RecordingContext) => Promise<void>;
}

/** What rebasing onto a moved base branch found (see rebaseOntoBase). */
export type RebaseOutcome =
  | { readonly moved: false }
  | { readonly moved: true; readonly baseHead: string; readonly head: string; readonly conflicts: readonly string[]; readonly detail: string }
  | { readonly moved: true; readonly baseHead: string; readonly head: string; readonly same: boolean; readonly tests: { readonly passed: boolean; readonly summary: string; readonly tail: string; readonly attempts?: AttemptReport } };

/** A diff's content without what moves when the base moves under it (hunk positions, blob ids). */
function changeFingerprint(diff: string): string {
  const kept = diff.split('\n').filter((line) => !line.startsWith('@@') && !line.startsWith('index '));
  return createHash('sha256').update(kept.join('\n')).digest('hex');
}

/** What the checks of the merge conditions found, one result per condition. */
export interface MergeConditionReport {
  readonly met: boolean;
  /** What the sandbox saw the `run:` commands try, when anything. */
  readonly attempts?: AttemptReport;
  readonly results: ReadonlyArray<{ readonly condition: string; readonly met: boolean; readonly detail: string }>;
}

/** An intent's worktree, and the task queue of the host that holds it. */
export interface PreparedWorktree extends WorktreeRef {
  readonly hostQueue?: string;
}

export interface IntentRef {
  readonly intent: Intent;
}

export interface StageInput extends IntentRef {
  readonly stage: AgentStage;
  readonly attempt: number;
  /** What went wrong last time (e.g. the failing tests), for the next prompt. */
  readonly feedback?: string;
  /** The most this call may cost: reserved against the day's budget before the agent runs. */
  readonly maxCallUsd: string;
  /**
   * The commit this attempt starts from. After `warden resume --from STAGE` the branch may hold
   * later commits of the run that was reset; the worktree is moved back to this one first.
   */
  readonly startCommit?: string;
  /** Conditions an approver attached to the gate before this stage; they go into the prompt. */
  readonly conditions?: readonly string[];
  /**
   * The call reviews the document attempt `attempt` of `stage` (lld, spec) wrote: it runs on the
   * `review` route's agent, may not call the author's model, and answers a verdict with findings.
   */
  readonly designReview?: boolean;
}

/** What the safety layers need to know about one agent answer, computed where the answer is. */
export interface StageSafety {
  readonly cascade: { readonly level: CascadeLevel; readonly score: number; readonly patterns: readonly string[] };
  /** Short hash of the output: equal hashes mean the agent said the same thing. */
  readonly outputHash: string;
  readonly latencyMs: number;
  /** The scope judge's reading of the answer, where the intent has a judge for this stage. */
  readonly judge?: ScopeVerdict;
  /** HIGH findings of the worker's behaviour monitor for this intent, added by the interceptor. */
  readonly anomalies?: readonly AnomalyNotice[];
}

/** Small by design: it is recorded in workflow history. Documents stay in the worktree. */
export interface StageResult {
  readonly artifactPath: string;
  readonly promptPath: string;
  readonly summary: string;
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** Exact decimal USD: what the agent reported, or its usage priced by the model. */
  readonly costUsd: string;
  readonly model: string;
  readonly commit?: string;
  readonly safety: StageSafety;
  /** Triage only: its risk assessment (zod-validated JSON, or read from the text). */
  readonly triage?: TriageAssessment;
  /** Review only: verdict, findings and judge scores. */
  readonly review?: ReviewAssessment;
  /** A design review only: the reviewer's verdict and findings on the document. */
  readonly designReview?: DesignReviewAssessment;
  /** What the agent's sandbox saw it try, when anything (the workflow records each and tells the merge gate). */
  readonly attempts?: AttemptReport;
  /** What the secret scan found in the agent's change, when it found anything (see holdBackSecrets). */
  readonly secrets?: SecretScan;
  /** lld and spec (not their design review): the document's mechanical checks (see document-checks.ts). */
  readonly documentCheck?: DocumentCheck;
}

/** What the mechanical gates found after an impl attempt. */
export interface ImplementationCheck {
  readonly ok: boolean;
  readonly stubCount: number;
  readonly tamperCount: number;
  /** The findings, for the next impl prompt. */
  readonly feedback: string;
}

/**
 * What impl's attempt is judged on once its tests have run: the change's size, the mechanical
 * checks, and the spec's test plan when it was asked for.
 */
export interface ImplementationInspection {
  readonly size: { readonly files: number; readonly lines: number };
  readonly checks: ImplementationCheck;
  readonly plan?: TestPlanCheck;
}

export interface TestRunResult {
  /** What the tests' sandbox saw them try, when anything (the workflow records each and tells the merge gate). */
  readonly attempts?: AttemptReport;
  readonly attempt: number;
  readonly passed: boolean;
  readonly ran: boolean;
  readonly summary: string;
  readonly passedCount?: number;
  readonly failedCount?: number;
  /** Names of the failing tests, when the runner prints them: the two-strike rule compares them. */
  readonly failingTests: readonly string[];
  readonly logPath?: string;
  /** The end of the output, fed back to the next impl attempt. */
  readonly tail: string;
  /** The commit that recorded the test log, if one was made. */
  readonly commit?: string;
  /** What kind of result it was (collection error, failures, timeout), and what to do about it. */
  readonly kind: TestRunClass;
  readonly instruction: string;
  /** What the secret scan found in what the tests wrote, when it found anything. */
  readonly secrets?: SecretScan;
}

const TEST_OUTPUT_CAP = 4 * 1024 * 1024;

/**
 * Stage activities, built with their dependencies (see `createActivities`). `globalStop` (one
 * per worker) stops running agents and tests when the global stop is set.
 */
export function createStageActivities(deps: ActivityDeps, globalStop: GlobalStopWatch) {
  const worktree = (intent: Intent): Promise<WorktreeRef> =>
    ensureWorktree({ repoPath: intent.repoPath, baseBranch: intent.baseBranch, intentId: intent.id, worktreeRoot: deps.worktreeRoot });
  const stoppable = <T>(work: (signal: AbortSignal) => Promise<T>): Promise<T> => stoppableWork(globalStop, work);

  /**
   * Runs a repo command (its tests, a merge condition) confined like the tests, within the test
   * timeout; what it wrote is judged like what the agent wrote. The output is redacted.
   */
  const runConfined = async (r: { readonly intent: Intent; readonly worktreePath: string; readonly head: string; readonly command: string; readonly slot: number; readonly who: string }) => {
    const run = await confinedTestRun(r.intent, r.worktreePath, r.command, r.slot);
    const repoSnapshot = await takeRepoSnapshot(r.intent.repoPath, { worktree: r.worktreePath });
    const outcome = await stoppable((signal) => runProcess({ ...run, timeoutMs: parseDuration(r.intent.limits.testTimeout), maxOutputBytes: TEST_OUTPUT_CAP, signal, kind: 'tests' }));
    const inspected = await refuseEscapes(r.intent, r.worktreePath, r.head, repoSnapshot, r.who);
    const secrets = await holdBackSecrets({ worktreePath: r.worktreePath, repoPath: r.intent.repoPath, baseCommit: r.head, allowances: allowancesOf(r.intent), inspected });
    const output = deps.redact(`$ ${r.command}\n${outcome.stdout}${outcome.stderr}`);
    const watched = parseWatchReport(outcome.report ?? '');
    const attempts = watched.attempts.length > 0 ? watched : undefined;
    return { outcome, output, passed: outcome.termination === 'exited' && outcome.exitCode === 0, attempts, secrets };
  };

  return {
    /**
     * Creates (or finds) the intent's worktree on `warden/<id>`, and says which host's queue its
     * stages go to from then on. Idempotent. `resumeAt`: a host taking the intent over from
     * another starts from the commit the last step left (fetched from the remote before this runs,
     * see host-placement.ts); a worktree of an earlier stay on this host is reset to it.
     */
    async prepareWorktree({ intent, resumeAt }: IntentRef & { readonly resumeAt?: string }): Promise<PreparedWorktree> {
      const ref = await worktree(intent);
      if (resumeAt && ref.head !== resumeAt) await rewindTo(intent, ref.worktreePath, resumeAt);
      return { ...ref, head: resumeAt ?? ref.head, ...(deps.hostQueue ? { hostQueue: deps.hostQueue } : {}) };
    },

    /**
     * Runs one attempt of an agent stage in the worktree: prompt → agent → artifact → commit.
     * Heartbeats while the agent works; cancellation kills the agent. A retry after the commit
     * commits nothing new (same content, nothing staged).
     */
    async runAgentStage(input: StageInput): Promise<StageResult> {
      // Heartbeat for the whole attempt, git work included: a busy worker must not look dead.
      return whileHeartbeating(async () => {
        const { intent, stage, attempt } = input;
        const designReview = input.designReview === true;
        const scope = currentAttemptScope();
        const profile = agentForCall(intent, input);
        // The worker interceptor's meter reserves against the budgets; without it, calls are only priced.
        const meter = scope?.meter ?? new SpendMeter({ pricing: deps.pricing, declaredCapUsd: input.maxCallUsd });
        // This worker's prices may not be those `warden run` checked: refused before anything starts.
        meter.refuseUnpriced(modelOf(profile));
        const { worktreePath, head } = await worktree(intent);
        if (input.startCommit && head !== input.startCommit) {
          const dropped = await rewindTo(intent, worktreePath, input.startCommit);
          await scope?.event?.('ROLLBACK', 'medium', `the worktree was reset from ${head.slice(0, 12)} to ${input.startCommit.slice(0, 12)} before ${stage} attempt ${attempt} (a resume): ${dropped.length} untracked or ignored path(s) removed with it`, {
            metadata: { from: head, to: input.startCommit, removed: dropped.slice(0, 50) },
          });
        }
        const baseCommit = input.startCommit ?? head;
        // What the recording of the agent's exchanges was made against. Not waited for: the stage
        // neither waits on the ledger for it nor fails with it (a lost context is logged).
        if (deps.recordContext) {
          const log = activityLogger(deps.logger);
          void recordingContextOf(intent, baseCommit)
            // Redacted like every stored thing: a profile's command or URL may carry a secret.
            .then((context) => deps.recordContext!(intent.id, redactDeep(context, deps.redact)))
            .catch((error: unknown) => log.error({ err: error }, 'could not record the intent\'s recording context'));
        }
        // The target repo's own working tree, to catch an agent that writes outside its worktree.
        const repoSnapshot = await takeRepoSnapshot(intent.repoPath, { worktree: worktreePath });
        const priorArtifacts = await readPriorArtifacts(worktreePath, intent.id, stage);
        // The reviewer reads the document under review after what it was written from.
        if (designReview) priorArtifacts.push(await readLineageArtifact(worktreePath, intent.id, artifactName(stage, attempt)));
        const prompt = buildPrompt({ intent, stage, attempt, priorArtifacts, feedback: input.feedback, conditions: input.conditions, designReview });
        // A design review's files sit beside the document's: 02-lld.review.md, 02-lld.review.prompt.md.
        const suffix = designReview ? '.review' : '';
        // The agent says what it sent: the prompt plus what the agent adds (where its answer goes, files it is shown).
        const promptName = artifactName(stage, attempt, `${suffix}.prompt.md`);
        const promptPath = path.join(activeLineageDir(intent.id), promptName);
        const recordPrompt = async (sent: string): Promise<void> => void (await writeLineageFile(worktreePath, intent.id, promptName, deps.redact(sent)));
        const started = Date.now();
        const agent = createAgent(profile, { mode: deps.mode ?? 'development', env: process.env, fetch: deps.fetch, gateway: deps.gateway });
        const result = await stoppable((signal) =>
          agent.run({
            intentId: intent.id,
            stage,
            attempt,
            ...(designReview ? { designReview } : {}),
            prompt,
            worktreePath,
            signal,
            // whileHeartbeating already beats once a second for the whole attempt.
            heartbeat: () => undefined,
            riskHint: intent.riskHint,
            allowUnconfinedCode: intent.confinement.allowUnconfinedCode,
            declaredPaths: intent.paths,
            goal: intent.goal,
            meter,
            event: scope?.event,
            forbiddenModels: modelsForbiddenAt(intent, stage, designReview),
            recordPrompt,
            testCommand: stage === 'impl' ? (intent.testCommand ?? detectTestCommand(worktreePath)) : undefined,
            ...(intent.replayOf ? { replayOf: replaySourceOf(intent, intent.replayOf, worktreePath, deps.worktreeRoot) } : {}),
          }),
        );
        const latencyMs = Date.now() - started;
        const inspected = await refuseEscapes(intent, worktreePath, baseCommit, repoSnapshot);
        // Before anything is committed: a secret in the change is put back, never committed.
        const secrets = await holdBackSecrets({ worktreePath, repoPath: intent.repoPath, baseCommit, allowances: allowancesOf(intent), inspected });
        const output = deps.redact(result.output);
        const log = result.log === undefined ? undefined : deps.redact(result.log);
        const attempts = withOutputRedactions(result.attempts, redactionsIn(result.output, output) + (log === undefined ? 0 : redactionsIn(result.log!, log)));
        const model = result.model ?? profile.kind;
        // Every paid call of the attempt, each priced as it was made (an unknown model was refused before).
        const costUsd = meter.totalUsd();
        const usage = meter.totalUsage();
        const artifactPath = await writeLineageFile(worktreePath, intent.id, artifactName(stage, attempt, `${suffix}.md`), output);
        // A CLI's printout is its log, not its answer: kept beside the answer.
        if (log !== undefined) await writeLineageFile(worktreePath, intent.id, artifactName(stage, attempt, `${suffix}.log.txt`), log);
        const commit = await commitAll(worktreePath, `warden(${intent.id}): ${designReview ? `design review of ${stage}` : stage} attempt ${attempt}`);
        activityLogger(deps.logger).info({ commit, costUsd }, 'stage attempt done');
        // The scope judge, where the intent has one for this stage, reads the answer too (never a design review's).
        const judged = intent.judge?.stages.includes(stage) && !designReview
          ? await stoppable((signal) =>
              askScopeJudge(
                {
                  judge: intent.judge!, intentId: intent.id, stage, attempt, goal: intent.goal, paths: intent.paths, answer: output, writtenBy: modelOf(profile), meter, event: scope?.event, signal, heartbeat: () => undefined,
                  ...(intent.replayOf ? { replayOf: replaySourceOf(intent, intent.replayOf, worktreePath, deps.worktreeRoot) } : {}),
                },
                { mode: deps.mode ?? 'development', env: process.env, fetch: deps.fetch, gateway: deps.gateway },
              ),
            )
          : undefined;
        // The document as committed is checked here, where it was written: no second call to read it back.
        const documentCheck = (stage === 'lld' || stage === 'spec') && !designReview ? checkDesignDocument(intent, stage, output, worktreePath) : undefined;
        const detected = detectCascade(output, { goal: intent.goal, paths: intent.paths });
        const cascade = withVerdict({ level: detected.level, score: detected.score, patterns: detected.matches.map((m) => `${m.category}: ${m.excerpt}`).slice(0, 10) }, judged);
        return {
          artifactPath,
          promptPath,
          summary: firstLine(output),
          inputTokens: usage.inputTokens,
          outputTokens: usage.outputTokens,
          costUsd,
          model,
          commit,
          safety: {
            cascade,
            ...(judged ? { judge: judged } : {}),
            outputHash: createHash('sha256').update(output).digest('hex').slice(0, 16),
            latencyMs,
          },
          ...(stage === 'triage' ? { triage: readTriageAssessment(output) } : {}),
          ...(stage === 'review' ? { review: readReviewAssessment(output) } : {}),
          ...(designReview ? { designReview: readDesignReviewAssessment(output) } : {}),
          ...(documentCheck ? { documentCheck } : {}),
          ...(attempts ? { attempts } : {}),
          ...(foundAny(secrets) ? { secrets } : {}),
        };
      });
    },

    /**
     * Runs the repo's test command in the worktree, confined like the agent that wrote the code
     * (see `confinedTestRun`), then inspects what the run changed before anything is committed:
     * an escape is reverted and halts the intent, as after an agent step.
     */
    async runTests({ intent, attempt }: { readonly intent: Intent; readonly attempt: number }): Promise<TestRunResult> {
      // Heartbeat for the whole attempt, git work included: a busy worker must not look dead.
      return whileHeartbeating(async () => {
        const { worktreePath, head } = await worktree(intent);
        const command = intent.testCommand ?? detectTestCommand(worktreePath);
        if (!command) {
          return { attempt, passed: true, ran: false, kind: 'passed', instruction: '', summary: 'no test command: nothing to run', tail: '', failingTests: [] };
        }
        // Tests are agent-written code: what they wrote is judged like what the agent wrote.
        const { outcome, output, passed, attempts, secrets } = await runConfined({ intent, worktreePath, head, command, slot: attempt, who: 'the test run' });
        const counts = readTestCounts(output);
        const kind = classifyTestRun({ exitCode: outcome.exitCode, termination: outcome.termination, output });
        const summary = describeTestRun(outcome.exitCode, outcome.termination, counts);
        const logPath = await writeLineageFile(worktreePath, intent.id, artifactName('impl', attempt, '-tests.log'), output);
        const commit = await commitAll(worktreePath, `warden(${intent.id}): tests after impl attempt ${attempt}: ${summary}`);
        return {
          commit,
          kind,
          instruction: instructionForTestRun(kind),
          attempt,
          passed,
          ran: true,
          summary,
          passedCount: counts.passed,
          failedCount: counts.failed,
          failingTests: readFailingTests(output),
          logPath,
          tail: feedbackTail(output, worktreePath),
          ...(attempts ? { attempts } : {}),
          ...(foundAny(secrets) ? { secrets } : {}),
        };
      });
    },

    /**
     * Before merging: when the base branch moved since the change was approved, the branch is
     * rebased onto it and the tests run again on the result. Says whether it moved, whether the
     * rebase conflicted (the branch is left as approved), the tests' verdict, and whether the
     * change is still the one approved (its diff, line numbers aside). Idempotent: a retry after
     * the rebase finds the branch rebased already and only checks it again.
     */
    async rebaseOntoBase({ intent, approvedHead: known }: { readonly intent: Intent; readonly approvedHead?: string }): Promise<RebaseOutcome> {
      return whileHeartbeating(async () => {
        const { worktreePath } = await worktree(intent);
        const approvedHead = known ?? (await git(worktreePath, ['rev-parse', 'HEAD']));
        const baseRef = `refs/heads/${intent.baseBranch}`;
        // An unknown commit fails the check: the rebase below then says what is wrong.
        if (await isAncestor(worktreePath, baseRef, approvedHead).catch(() => false)) return { moved: false };
        const baseHead = await git(worktreePath, ['rev-parse', baseRef]);
        const oldBase = await git(worktreePath, ['merge-base', baseRef, approvedHead]);
        const approvedChange = changeFingerprint(await git(worktreePath, ['diff', '--no-color', oldBase, approvedHead, '--', '.', ':(exclude)docs/lineage']));
        if ((await gitRaw(worktreePath, ['merge-base', '--is-ancestor', baseRef, 'HEAD'])).code !== 0) {
          await git(worktreePath, ['reset', '-q', '--hard', approvedHead]);
          const rebased = await gitRaw(worktreePath, ['rebase', '-q', baseRef]);
          if (rebased.code !== 0) {
            const conflicts = (await gitRaw(worktreePath, ['diff', '--name-only', '--diff-filter=U'])).stdout.split('\n').filter(Boolean);
            await gitRaw(worktreePath, ['rebase', '--abort']);
            // impl makes the change again on the base as it is now; the lineage so far comes along.
            await git(worktreePath, ['reset', '-q', '--hard', baseRef]);
            const lineage = activeLineageDir(intent.id);
            if ((await gitRaw(worktreePath, ['cat-file', '-e', `${approvedHead}:${lineage}`])).code === 0) await git(worktreePath, ['checkout', approvedHead, '--', lineage]);
            const head = (await commitAll(worktreePath, `warden(${intent.id}): start again from ${intent.baseBranch} ${baseHead.slice(0, 12)}: the change conflicted with it`)) ?? baseHead;
            return { moved: true, baseHead, head, conflicts: conflicts.length > 0 ? conflicts : ['(git named none)'], detail: deps.redact((rebased.stdout + rebased.stderr).trim().slice(-1500)) };
          }
        }
        const head = await git(worktreePath, ['rev-parse', 'HEAD']);
        const same = changeFingerprint(await git(worktreePath, ['diff', '--no-color', baseRef, head, '--', '.', ':(exclude)docs/lineage'])) === approvedChange;
        const command = intent.testCommand ?? detectTestCommand(worktreePath);
        if (!command) return { moved: true, baseHead, head, same, tests: { passed: true, summary: 'no test command: nothing to run', tail: '' } };
        const { outcome, output, passed, attempts } = await runConfined({ intent, worktreePath, head, command, slot: 999, who: 'the test run after the rebase' });
        const summary = describeTestRun(outcome.exitCode, outcome.termination, readTestCounts(output));
        return { moved: true, baseHead, head, same, tests: { passed, summary, tail: feedbackTail(output, worktreePath), ...(attempts ? { attempts } : {}) } };
      });
    },

    /**
     * The conditions set at the gates before merge, checked on the branch as it would merge (see
     * merge-conditions.ts). A `run:` command is agent-adjacent code (it runs the repo's scripts):
     * it is confined like the tests, and what it writes is judged like their writes.
     */
    async checkMergeConditions({ intent, conditions }: { readonly intent: Intent; readonly conditions: readonly string[] }): Promise<MergeConditionReport> {
      return whileHeartbeating(async () => {
        const { worktreePath, head } = await worktree(intent);
        const files = await changesAgainstBase(worktreePath, intent.baseBranch);
        const results: Array<MergeConditionReport['results'][number]> = [];
        const seen: AttemptReport = { attempts: [], more: 0 };
        for (const [index, text] of conditions.entries()) {
          const condition = parseMergeCondition(text);
          if (!condition) {
            results.push({ condition: text, met: false, detail: `not a check Warden can run (${MERGE_CONDITION_FORMS})` });
          } else if (condition.kind === 'max-files') {
            results.push({ condition: text, met: files.length <= condition.limit, detail: `${files.length} file(s) changed` });
          } else if (condition.kind === 'max-lines') {
            const lines = files.reduce((n, f) => n + f.added + f.deleted, 0);
            results.push({ condition: text, met: lines <= condition.limit, detail: `${lines} line(s) changed` });
          } else if (condition.kind === 'only-paths') {
            const outside = files.filter((f) => !pathAllowed(condition.globs, f.path)).map((f) => f.path);
            results.push({ condition: text, met: outside.length === 0, detail: outside.length === 0 ? 'every changed file matches' : `outside: ${outside.slice(0, 10).join(', ')}` });
          } else if (condition.kind === 'run') {
            const { outcome, output, passed: met, attempts } = await runConfined({ intent, worktreePath, head, command: condition.command, slot: 1000 + index, who: `the merge condition "${condition.command}"` });
            if (attempts) Object.assign(seen, { attempts: [...seen.attempts, ...attempts.attempts], more: seen.more + attempts.more });
            const tail = output.slice(-1500);
            results.push({ condition: text, met, detail: met ? 'passed' : `${outcome.termination === 'exited' ? `exit ${outcome.exitCode}` : outcome.termination}: ${tail}` });
          }
        }
        return { met: results.every((r) => r.met), results, ...(seen.attempts.length > 0 ? { attempts: seen } : {}) };
      });
    },

    /**
     * After an impl attempt's tests, in one call: the change's size against the base (for the
     * blast radius), the mechanical gates, and, when `testPlan` is given (the tests passed), the
     * spec's test plan. All three only read the worktree as the tests left it; the workflow judges
     * them in that order.
     */
    async inspectImplementation({ intent, testPlan }: IntentRef & { readonly testPlan?: { readonly testLogPath?: string } }): Promise<ImplementationInspection> {
      const { worktreePath } = await worktree(intent);
      // Nothing runs in the worktree during this call: the merge base and the change found once serve every check.
      const mergeBase = await mergeBaseOf({ worktreePath, baseRef: `refs/heads/${intent.baseBranch}`, repoPath: intent.repoPath });
      const seen = await changeFromBaseOf({ worktreePath, repoPath: intent.repoPath, base: mergeBase });
      const changes = seen.committed ?? (await changesAgainstBase(worktreePath, intent.baseBranch, mergeBase));
      const size = { files: changes.length, lines: changes.reduce((n, c) => n + c.added + c.deleted, 0) };
      const checks = await checkImplementationIn(worktreePath, intent, mergeBase, seen);
      const plan = testPlan
        ? await checkTestPlanIn({ worktreePath, intentId: intent.id, baseBranch: intent.baseBranch, testLogPath: testPlan.testLogPath, changedFiles: changes.map((c) => c.path) })
        : undefined;
      return { size, checks, ...(plan ? { plan } : {}) };
    },

    /**
     * `warden revert`: reverts the merge commit of another intent on this intent's branch (with
     * its first parent as the mainline). Later commits on the base that changed the same lines
     * make it conflict: then nothing is committed and the intent fails saying where. Idempotent:
     * a retry finds the revert made.
     */
    async revertMerge({ intent, mergedCommit }: { readonly intent: Intent; readonly mergedCommit: string }): Promise<{ readonly commit: string; readonly files: number }> {
      const { worktreePath, head } = await worktree(intent);
      const marker = `This reverts commit ${mergedCommit}`;
      if ((await git(worktreePath, ['log', '-1', '--format=%B', head])).includes(marker)) {
        return { commit: head, files: (await changesAgainstBase(worktreePath, intent.baseBranch)).length };
      }
      if ((await gitRaw(worktreePath, ['merge-base', '--is-ancestor', mergedCommit, `refs/heads/${intent.baseBranch}`])).code !== 0) {
        throw ApplicationFailure.create({ type: FailureType.RevertConflict, message: `${mergedCommit.slice(0, 12)} is not on ${intent.baseBranch}: there is nothing to revert there`, nonRetryable: true });
      }
      const parents = (await git(worktreePath, ['rev-list', '--parents', '-n', '1', mergedCommit])).split(' ').length - 1;
      const reverted = await gitRaw(worktreePath, ['revert', '--no-edit', ...(parents > 1 ? ['-m', '1'] : []), mergedCommit]);
      if (reverted.code !== 0) {
        const conflicts = (await gitRaw(worktreePath, ['diff', '--name-only', '--diff-filter=U'])).stdout.split('\n').filter(Boolean);
        await gitRaw(worktreePath, ['revert', '--abort']);
        throw ApplicationFailure.create({
          type: FailureType.RevertConflict,
          message: `later commits on ${intent.baseBranch} changed what ${intent.revertOf?.intentId ?? mergedCommit.slice(0, 12)} changed (conflicts in ${conflicts.join(', ') || 'files git did not name'}): revert it by hand, or start an intent that undoes it`,
          nonRetryable: true,
        });
      }
      return { commit: await git(worktreePath, ['rev-parse', 'HEAD']), files: (await changesAgainstBase(worktreePath, intent.baseBranch)).length };
    },

    /** The files the change touches (against the base) that match one of `globs`: what a custom gate's `when.paths` looks at. */
    async changedFilesMatching({ intent, globs }: { readonly intent: Intent; readonly globs: readonly string[] }): Promise<string[]> {
      const { worktreePath } = await worktree(intent);
      const changes = await changesAgainstBase(worktreePath, intent.baseBranch);
      return changes.map((c) => c.path).filter((p) => globs.some((glob) => matchGlob(glob, p))).slice(0, 200);
    },

    /**
     * Puts the lineage where it is kept once the intent merges (the intent's `lineage.location`):
     * `ref`, its lineage ref in the repository and a copy in the worker's lineage folder, the
     * branch left as it is (the merge leaves the lineage out); `tree`, moved from active/ to
     * done/ and committed on the intent branch, to merge with it. Returns where it can be read.
     */
    async archiveLineage({ intent }: IntentRef): Promise<ArchivedLineage> {
      const { worktreePath } = await worktree(intent);
      if (intent.lineage.location === 'tree') {
        const done = await archiveLineageFolder(worktreePath, intent.id);
        await commitAll(worktreePath, `warden(${intent.id}): archive lineage`);
        return { lineagePath: path.join(intent.repoPath, done) };
      }
      const folder = path.join(worktreePath, activeLineageDir(intent.id));
      const lineageRef = await recordLineageRef(intent.repoPath, intent.id, folder);
      const lineagePath = await copyLineageFolder(folder, path.join(deps.lineageRoot, intent.id));
      return { ...(lineagePath ? { lineagePath } : {}), ...(lineageRef ? { lineageRef } : {}) };
    },

    /** Merges the intent branch into the base branch. Call only after the merge gate approved. */
    async mergeIntent({ intent }: IntentRef): Promise<{ readonly mergedCommit: string }> {
      const mergedCommit = await mergeIntoBase({
        repoPath: intent.repoPath,
        baseBranch: intent.baseBranch,
        intentId: intent.id,
        message: `warden: merge intent ${intent.id}\n\n${intent.goal}`,
        ...(intent.lineage.location === 'ref' ? { withoutLineage: { message: changeMessage(intent) } } : {}),
      });
      activityLogger(deps.logger).info({ mergedCommit }, 'merged');
      return { mergedCommit };
    },

    /**
     * Removes the worktree whatever the outcome; deletes the branch when asked. Idempotent. With
     * `lineage.location: ref` the lineage goes into the lineage ref first; either way it is then
     * moved to the worker's lineage folder.
     */
    async cleanupIntent(input: IntentRef & { readonly deleteBranch: boolean; readonly keepForResume?: boolean }): Promise<{ readonly lineageCopy?: string; readonly lineageRef?: string }> {
      const { intent } = input;
      // Before the branch may go: the lineage into its ref, and what a later `warden resume`
      // continues from, kept for the retention. (A merged intent has nothing to resume; a workflow
      // from before the flag keeps its commits.)
      const now = new Date();
      const { lineageRef, kept } = await recordEndingRefs(intent.repoPath, intent.id, {
        ...(intent.lineage.location === 'ref' ? { lineageFolder: path.join(worktreePathFor(deps.worktreeRoot, intent.repoPath, intent.id), activeLineageDir(intent.id)) } : {}),
        ...((input.keepForResume ?? true) ? { keepForResumeMs: parseDuration(keepForResumeOf(intent)) } : {}),
        now,
      });
      await dropExpiredResumeRefs(intent.repoPath, now, kept);
      const removed = await removeWorktree({
        repoPath: intent.repoPath,
        intentId: intent.id,
        worktreeRoot: deps.worktreeRoot,
        lineageRoot: deps.lineageRoot,
        deleteBranch: input.deleteBranch,
      });
      return { ...removed, ...(lineageRef ? { lineageRef } : {}) };
    },
  };
}

/** The sandbox's report with the secrets cut from what the agent printed, when there were any. */
function withOutputRedactions(report: AttemptReport | undefined, count: number): AttemptReport | undefined {
  if (count === 0) return report;
  return { attempts: [...(report?.attempts ?? []), { kind: 'output-redacted', count }], more: report?.more ?? 0 };
}

/** Where an archived lineage can be read: a folder, and the lineage ref when it went into one. */
export interface ArchivedLineage {
  readonly lineagePath?: string;
  readonly lineageRef?: string;
}

/** The message of the commit that brings an intent's change, without its lineage, to the base branch. */
function changeMessage(intent: Intent): string {
  const subject = intent.goal.split('\n')[0]!.trim();
  return `warden(${intent.id}): ${subject.length > 72 ? `${subject.slice(0, 71)}…` : subject}\n\n${intent.goal}\n\nPrompts, logs, documents and every attempt's commit: git log ${lineageRefFor(intent.id)}\n`;
}

/**
 * How the repo's tests run: in the sandbox the impl agent gets (its profile's level, or `auto`
 * for agents that run no command themselves, raised by risk), with no network unless the
 * intent's `confinement.testNetwork` says `host`, with the agent's cleaned environment and the
 * agent-session marker (a decision sent from a test is the agent's own).
 */
async function confinedTestRun(intent: Intent, worktreePath: string, command: string, attempt: number): Promise<Pick<RunProcessOptions, 'command' | 'exec' | 'cwd' | 'env' | 'report'>> {
  const impl = agentForStage(intent, 'impl');
  const { level, bwrapPath } = await resolveSandboxLevel({
    setting: impl.kind === 'command' ? impl.sandbox : 'auto',
    risk: intent.riskHint,
    allowUnconfined: intent.confinement.allowUnconfinedCode,
    what: "the repo's tests",
    probe: probeBubblewrap,
  });
  const exec = sandboxCommand({
    level,
    bwrapPath,
    worktreePath,
    ...(level === 'bubblewrap' ? gitDirsOf(worktreePath) : {}),
    network: intent.confinement.testNetwork === 'host',
    command,
    watch: true,
  });
  const env: NodeJS.ProcessEnv = {
    ...sandboxEnvironment(level, agentEnvironment(process.env)),
    CI: 'true',
    [AGENT_SESSION_VARIABLE]: `${intent.id}/tests/${attempt}`,
  };
  // What the tests try is watched as what the agent tries (bubblewrap on its own network).
  return { command, exec, cwd: worktreePath, env, report: level === 'bubblewrap' && intent.confinement.testNetwork !== 'host' };
}

/**
 * After agent-written code ran (the agent, or the repo's tests): any change outside the declared
 * paths, a symlink out of the worktree, a touch of `.git`, or a write to the target repo's own
 * tree is reverted, and the intent halts (SANDBOX_ESCAPE_ATTEMPTED). Otherwise returns what the
 * inspection saw, for the secret scan that follows at once.
 */
async function refuseEscapes(intent: Intent, worktreePath: string, baseCommit: string, repoSnapshot: RepoSnapshot, who = 'the agent'): Promise<InspectedWorktree> {
  const branch = branchForIntent(intent.id);
  const { report, seen } = await inspectStep({ worktreePath, repoPath: intent.repoPath, baseCommit, declaredPaths: intent.paths, repoSnapshot, branch });
  if (report.ok) return seen;
  await revertChanges(worktreePath, baseCommit, { repoPath: intent.repoPath, branch });
  const { restored, notRestored } = await restoreOutside(repoSnapshot, report.violations);
  const undone = [
    restored.length ? `put back outside the worktree: ${restored.slice(0, 10).join(', ')}` : '',
    notRestored.length ? `NOT put back (changed before the step too, or gone): ${notRestored.slice(0, 10).join(', ')}` : '',
  ].filter(Boolean);
  const details: HaltDetails = {
    eventType: 'SANDBOX_ESCAPE_ATTEMPTED',
    reason: `${who}: ${report.summary}${undone.length ? `; ${undone.join('; ')}` : ''}`,
    suggestion: `the change was reverted; look at ${who === 'the agent' ? 'the agent' : `${who} (agent-written code)`} and the declared paths before resuming`,
    current: report.violations.length + report.omittedViolations,
    threshold: 0,
    rollback: {
      reason: `${who}'s change was reverted: the worktree reset to ${baseCommit.slice(0, 12)} and cleaned${undone.length ? `; ${undone.join('; ')}` : ''}`,
      metadata: { to: baseCommit, reverted: report.violations.map((v) => ({ kind: v.kind, path: v.path })), omitted: report.omittedViolations, restored, notRestored },
    },
  };
  throw ApplicationFailure.create({ type: FailureType.SafetyHalt, message: `SANDBOX_ESCAPE_ATTEMPTED: ${details.reason}`, nonRetryable: true, details: [details] });
}

/** The paths where the person who started the intent allowed secrets (none for an intent started before there were any). */
function allowancesOf(intent: Intent): readonly SecretAllowance[] {
  return (intent as { readonly secrets?: Intent['secrets'] }).secrets?.allow ?? [];
}

/** How long the intent's commits are kept for a resume (an intent started before there was a setting: the default). */
function keepForResumeOf(intent: Intent): string {
  return (intent.lineage as { readonly keepForResume?: string } | undefined)?.keepForResume ?? DEFAULT_KEEP_FOR_RESUME;
}

function foundAny(scan: SecretScan): boolean {
  return scan.held.length > 0 || scan.allowed.length > 0;
}

/**
 * Moves the intent branch back to `commit` (an ancestor of its head): the rewind of a resume.
 * Ignored files go too (build output, caches, anything the run that was reset left behind that
 * git does not track): the stage starts from the commit and nothing else. Returns what was removed.
 */
async function rewindTo(intent: Intent, worktreePath: string, commit: string): Promise<string[]> {
  const ancestor = await gitRaw(worktreePath, ['merge-base', '--is-ancestor', commit, 'HEAD']);
  // An ended intent's branch may be gone (made anew from the base) or moved: its commits are kept under its resume ref.
  if (ancestor.code !== 0 && !(await resumableFrom(intent.repoPath, intent.id, commit))) {
    throw ApplicationFailure.create({
      type: FailureType.GitFailed,
      message: `cannot rewind ${worktreePath} to ${commit}: it is neither on the intent branch nor kept under ${resumeRefFor(intent.id)} (dropped after its retention, lineage.keepForResume?)`,
      nonRetryable: true,
    });
  }
  await git(worktreePath, ['reset', '-q', '--hard', commit]);
  const removed = await git(worktreePath, ['clean', '-ffdx']);
  return removed.split('\n').map((line) => line.replace(/^Removing /, '')).filter(Boolean);
}

/**
 * Runs an agent or test call with a signal that aborts on the activity's cancellation or on the
 * global stop, whichever comes first. A call the global stop ended fails at once with a
 * non-retryable KILL_SWITCH (details: midRun) rather than waiting for its cancellation to arrive
 * on a heartbeat: the workflow treats it as the stop it is (see intentWorkflow).
 */
async function stoppableWork<T>(watch: GlobalStopWatch, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const ctx = Context.current();
  return watch.during(async (stopSignal) => {
    const stopped = (): boolean => stopSignal.aborted && !ctx.cancellationSignal.aborted;
    let result: T | undefined;
    try {
      result = await work(AbortSignal.any([ctx.cancellationSignal, stopSignal]));
    } catch (error) {
      if (!stopped()) throw error;
    }
    // A killed process returns normally (termination 'aborted'); either way the stop ends the call.
    if (stopped()) throw stoppedByGlobalStop(stopSignal.reason as GlobalStopSet);
    return result as T;
  });
}

function stoppedByGlobalStop(stop: GlobalStopSet): ApplicationFailure {
  const details: KillSwitchDetails = { source: 'global_stop', midRun: true };
  return ApplicationFailure.create({
    type: FailureType.KillSwitch,
    message: `kill switch (global_stop): ${stop.message}; the running call was stopped`,
    nonRetryable: true,
    details: [details],
  });
}

/** Runs `fn` with a heartbeat every second, so Temporal knows the activity is alive throughout. */
async function whileHeartbeating<T>(fn: () => Promise<T>): Promise<T> {
  const ctx = Context.current();
  const beat = setInterval(() => ctx.heartbeat(), 1000);
  try {
    return await fn();
  } finally {
    clearInterval(beat);
  }
}


function firstLine(text: string): string {
  const line = text.split('\n').find((l) => l.trim()) ?? '';
  return line.trim().slice(0, 200);
}

/** What a replayed attempt's requests are matched by: the original intent, and what differs between the runs by construction. */
function replaySourceOf(intent: Intent, original: NonNullable<Intent['replayOf']>, worktreePath: string, worktreeRoot: string): ReplaySource {
  const originalWorktree = worktreePathFor(worktreeRoot, original.repoPath, original.intentId);
  return {
    intentId: original.intentId,
    substitutions: [
      [worktreePath, originalWorktree],
      [intent.repoPath, original.repoPath],
      // The repository as seen from the worktree: aider names its git folder so.
      [path.relative(worktreePath, intent.repoPath), path.relative(originalWorktree, original.repoPath)],
      [intent.id, original.intentId],
    ],
  };
}

/**
 * The mechanical gates after an impl attempt: stubs the intent added (TypeScript/JavaScript by
 * the compiler's AST, Python by patterns) and test tampering against the base branch (tests
 * deleted, skipped, focused, or assertions removed). Findings send impl back.
 */
async function checkImplementationIn(
  worktreePath: string,
  intent: Intent,
  mergeBase: string,
  seen: { readonly untracked: readonly string[]; readonly diff: readonly NameStatus[] },
): Promise<ImplementationCheck> {
  const baseRef = `refs/heads/${intent.baseBranch}`;
  // Both checks only read the worktree as the tests left it: the diff and the untracked files found once serve both.
  const { untracked, diff } = seen;
  const stubs = (await scanChangedFilesForStubs({ worktreePath, baseRef, repoPath: intent.repoPath, mergeBase, untracked, diff })).filter((f) => f.severity === 'block');
  const tampering = await detectTestTampering(worktreePath, baseRef, mergeBase, untracked, diff);
  const findings = [
    ...(stubs.length ? [formatStubFindings(stubs)] : []),
    ...tampering.map((t) => `test tampering (${t.kind}) in ${t.path}${t.line ? `:${t.line}` : ''}: ${t.detail}`),
  ];
  return { ok: findings.length === 0, stubCount: stubs.length, tamperCount: tampering.length, feedback: findings.join('\n').slice(0, 4000) };
}

/** The mechanical checks of a design document: the LLD's sections and the paths it names, the spec's requirement → test mapping. */
function checkDesignDocument(intent: Intent, stage: 'lld' | 'spec', text: string, worktreePath: string): DocumentCheck {
  if (stage === 'spec') return checkSpec(text);
  return checkLld(text, { declaredPaths: intent.paths, exists: (file) => existsSync(path.join(worktreePath, file)) });
}
