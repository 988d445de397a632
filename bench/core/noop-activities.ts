import { ApplicationFailure } from '@temporalio/activity';
import type { WardenActivities } from '../../src/activities';
import { createStageActivities } from '../../src/activities/stage-activities';
import { branchForIntent } from '../../src/shared/ids';
import type { AgentStage } from '../../src/shared/stages';

/** What the benchmark learns from the activities as they run (all in this process). */
export interface CoreObserver {
  /**
   * The review package of a gate was built: the workflow attaches it to the pending gate and waits
   * for a person next. (It asks for the package after announcing the gate.)
   */
  reviewPackageBuilt(intentId: string): void;
  /** The merge stage's first activity (the rebase onto the base branch) began. */
  mergeStarted(intentId: string): void;
}

/**
 * Every activity that works on the intent's repository. Building them opens nothing (each is a
 * closure over its dependencies), so their names can be read without a worker.
 */
const REPOSITORY_ACTIVITIES = Object.keys(createStageActivities(undefined as never, undefined as never));

/**
 * A repository activity the benchmark has no stand-in for fails the intent at once, naming itself:
 * a new stage activity then stops the benchmark with a clear line instead of retrying against a
 * repository that does not exist and hanging.
 */
function withoutStandIn(name: string) {
  return async (): Promise<never> => {
    throw ApplicationFailure.nonRetryable(`${name} works on the repository and bench/core/noop-activities.ts has no stand-in for it`, 'BenchStandInMissing');
  };
}

const NO_SAFETY_FINDINGS = { cascade: { level: 'NONE', score: 0, patterns: [] } } as const;

/**
 * Warden's orchestration core with nothing to orchestrate: every stage activity (worktree, agent
 * stages, tests, checks, merge) answers at once with a passing result, while the workflow, its
 * stage guard, the gate keeper, the agent-safety activity interceptor and the ledger (PostgreSQL)
 * stay real. What is left is what Warden itself costs per intent.
 */
export function noopStageActivities(real: WardenActivities, observer: CoreObserver): WardenActivities {
  const stageAnswer = (intentId: string, stage: AgentStage, attempt: number) => ({
    artifactPath: `docs/lineage/active/${intentId}/${stage}.md`,
    promptPath: `docs/lineage/active/${intentId}/${stage}.prompt.md`,
    summary: `${stage} done`,
    inputTokens: 0,
    outputTokens: 0,
    costUsd: '0',
    model: 'noop',
    // Distinct per stage and attempt: the same output twice is what the loop detector looks for.
    safety: { ...NO_SAFETY_FINDINGS, outputHash: `${intentId}:${stage}:${attempt}`, latencyMs: 0 },
  });
  const standIns: Partial<WardenActivities> = {
    async prepareWorktree({ intent }) {
      return { worktreePath: `/nonexistent/${intent.id}`, branch: branchForIntent(intent.id), head: 'noop' };
    },
    async runAgentStage({ intent, stage, attempt }) {
      const answer = stageAnswer(intent.id, stage, attempt);
      if (stage === 'triage') {
        return { ...answer, triage: { risk: 'LOW', confidence: 0.95, affectedPaths: ['lib/**'], rationale: 'no-op', predicted: { files: 1, lines: 10 }, structured: true } };
      }
      if (stage === 'review') {
        return {
          ...answer,
          review: { verdict: 'APPROVE', findings: [], scores: { strategicAlignment: 5, autonomyAppropriateness: 5, outputQuality: 5, resourceEfficiency: 5, learningApplication: 5 }, summary: 'no-op', structured: true },
        };
      }
      if (stage === 'lld' || stage === 'spec') return { ...answer, documentCheck: { ok: true, errors: [] } };
      return answer;
    },
    async runTests({ attempt }) {
      return { attempt, passed: true, ran: true, summary: '1 passed', passedCount: 1, failedCount: 0, failingTests: [], tail: '', kind: 'passed', instruction: '' };
    },
    async inspectImplementation() {
      return { size: { files: 1, lines: 10 }, checks: { ok: true, stubCount: 0, tamperCount: 0, feedback: '' }, plan: { planned: true, ok: true, tests: [], problems: [] } };
    },
    async buildReviewPackage({ intent, facts }) {
      setImmediate(() => observer.reviewPackageBuilt(intent.id)); // once this answer is on its way
      return {
        intentId: intent.id,
        goal: intent.goal,
        branch: branchForIntent(intent.id),
        baseBranch: intent.baseBranch,
        agent: intent.agent.kind,
        ladderLevel: facts.ladderLevel,
        risk: { class: facts.triage.risk, confidence: facts.triage.confidence, rationale: facts.triage.rationale },
        plan: '',
        predicted: {},
        actual: { files: 1, lines: 10, added: 10, deleted: 0, spendUsd: facts.spendUsd },
        diffSummary: [],
        moreFiles: 0,
        tests: facts.tests,
        ledgerTrace: [],
      };
    },
    async archiveLineage({ intent }) {
      return { lineagePath: `docs/lineage/done/${intent.id}` };
    },
    async mergeIntent() {
      return { mergedCommit: 'noop' };
    },
    async cleanupIntent() {
      return {};
    },
    async rebaseOntoBase({ intent }) {
      observer.mergeStarted(intent.id);
      return { moved: false };
    },
    async checkMergeConditions() {
      return { met: true, results: [] };
    },
    async changedFilesMatching() {
      return [];
    },
  };
  const missing = Object.fromEntries(REPOSITORY_ACTIVITIES.filter((name) => !(name in standIns)).map((name) => [name, withoutStandIn(name)]));
  return { ...real, ...missing, ...standIns } as WardenActivities;
}
