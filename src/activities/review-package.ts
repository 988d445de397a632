import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { ReviewAssessment, TriageAssessment } from '../shared/assessments';
import { activeLineageDir } from '../shared/ids';
import { agentIdOf } from '../shared/agent-routing';
import type { Intent } from '../shared/intent';
import { MAX_DIFF_FILES, MAX_SECRET_LINES, MAX_TRACE, type ReviewPackage } from '../shared/review-package';
import type { Ledger } from '../ledger/ledger';
import { changesAgainstBase } from './git';
import { ensureWorktree } from './worktree';

/** What the workflow knows and the package repeats; the rest is read from git and the ledger. */
export interface ReviewPackageFacts {
  readonly triage: Pick<TriageAssessment, 'risk' | 'confidence' | 'rationale' | 'predicted'>;
  readonly review?: ReviewAssessment;
  readonly tests: ReviewPackage['tests'];
  readonly spendUsd: string;
  readonly ladderLevel: number;
  /** What agent-written code was seen trying in its sandbox, when anything. */
  readonly attempts?: ReviewPackage['attempts'];
  /** The last check of the spec's test plan, when the spec had one. */
  readonly testPlan?: ReviewPackage['testPlan'];
}

/** Longest plan excerpt in the package. */
const MAX_PLAN_CHARS = 1_500;

export function createReviewPackageActivities(deps: { readonly worktreeRoot: string; readonly ledger: Ledger }) {
  return {
    /** Gathers the review package for a gate after impl. Reads only; safe to retry. */
    async buildReviewPackage({ intent, facts }: { readonly intent: Intent; readonly facts: ReviewPackageFacts }): Promise<ReviewPackage> {
      const { worktreePath, branch } = await ensureWorktree({ repoPath: intent.repoPath, baseBranch: intent.baseBranch, intentId: intent.id, worktreeRoot: deps.worktreeRoot });
      const files = await changesAgainstBase(worktreePath, intent.baseBranch);
      const added = files.reduce((n, f) => n + f.added, 0);
      const deleted = files.reduce((n, f) => n + f.deleted, 0);
      const trace = await deps.ledger.queries.timeline(intent.id);
      const secretRows = (type: string) => trace.filter((e) => e.type === type).slice(-MAX_SECRET_LINES).map((e) => e.summary.slice(0, 300));
      const secrets = { held: secretRows('SECRET_IN_CHANGE'), allowed: secretRows('SECRET_ALLOWED') };
      return {
        intentId: intent.id,
        goal: intent.goal,
        branch,
        baseBranch: intent.baseBranch,
        ...(intent.environment ? { environment: intent.environment } : {}),
        agent: agentIdOf(intent.agent),
        ladderLevel: facts.ladderLevel,
        risk: { class: facts.triage.risk, confidence: facts.triage.confidence, rationale: facts.triage.rationale.slice(0, 500) },
        plan: await planExcerpt(worktreePath, intent.id),
        predicted: { ...facts.triage.predicted },
        actual: { files: files.length, lines: added + deleted, added, deleted, spendUsd: facts.spendUsd },
        diffSummary: files.slice(0, MAX_DIFF_FILES),
        moreFiles: Math.max(0, files.length - MAX_DIFF_FILES),
        tests: facts.tests,
        ...(facts.attempts ? { attempts: facts.attempts } : {}),
        ...(facts.testPlan ? { testPlan: facts.testPlan } : {}),
        ...(facts.review
          ? { review: { verdict: facts.review.verdict, findings: facts.review.findings.slice(0, 20), scores: facts.review.scores, summary: facts.review.summary.slice(0, 500) } }
          : {}),
        ...(secrets.held.length + secrets.allowed.length > 0 ? { secrets } : {}),
        ledgerTrace: trace.slice(-MAX_TRACE).map((e) => `${e.at.toISOString()} ${e.type}${e.stage ? ` [${e.stage}]` : ''}: ${e.summary.slice(0, 160)}${e.usd ? ` ($${e.usd})` : ''}`),
      };
    },
  };
}

const attemptOf = (name: string): number => Number(/-attempt-(\d+)/.exec(name)?.[1] ?? 1);

/** The latest LLD's headings and the lines right under them, cut to MAX_PLAN_CHARS. */
async function planExcerpt(worktreePath: string, intentId: string): Promise<string> {
  const dir = path.join(worktreePath, activeLineageDir(intentId));
  let text: string;
  try {
    const attempts = (await readdir(dir)).filter((n) => /^02-lld(-attempt-\d+)?\.md$/.test(n));
    const latest = attempts.sort((a, b) => attemptOf(a) - attemptOf(b)).at(-1);
    if (!latest) return '';
    text = await readFile(path.join(dir, latest), 'utf8');
  } catch {
    return '';
  }
  return text.trim().slice(0, MAX_PLAN_CHARS);
}
