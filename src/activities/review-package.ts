import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { ReviewAssessment, TriageAssessment } from '../shared/assessments';
import { activeLineageDir } from '../shared/ids';
import { agentIdOf } from '../shared/agent-routing';
import type { Intent } from '../shared/intent';
import { MAX_DIFF_FILES, MAX_SECRET_LINES, MAX_TRACE, packageFacts, type ReviewPackage } from '../shared/review-package';
import type { Ledger } from '../ledger/ledger';
import type { Redactor } from '../shared/redact';
import { writeLedgerBatch, type LedgerBatch, type LedgerRow } from './ledger-activities';
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

export interface ReviewPackageInput {
  readonly intent: Intent;
  readonly facts: ReviewPackageFacts;
  /**
   * The rows that open the gate (its GATE_REQUESTED, after whatever the workflow recorded before
   * it), written once the package is built: the gate needs no ledger write of its own, and a
   * person who finds the package finds the request in the ledger. GATE_REQUESTED gets the
   * package's figures (see packageFacts).
   */
  readonly ledgerBatch?: LedgerBatch;
}

export function createReviewPackageActivities(deps: { readonly worktreeRoot: string; readonly ledger: Ledger; readonly redact: Redactor }) {
  return {
    /**
     * Gathers the review package for a gate after impl, then writes the gate's request rows.
     * Reads git and the ledger; its write is idempotent by row id, so it is safe to retry.
     */
    async buildReviewPackage({ intent, facts, ledgerBatch }: ReviewPackageInput): Promise<ReviewPackage> {
      const pkg = await gatherPackage(deps, intent, facts);
      if (ledgerBatch) await writeLedgerBatch(deps, { rows: ledgerBatch.rows.map((row) => withPackageFacts(row, pkg)) });
      return pkg;
    },
  };
}

/** GATE_REQUESTED with the package's figures; any other row as it is. */
function withPackageFacts(row: LedgerRow, pkg: ReviewPackage): LedgerRow {
  if (!('safetyEvent' in row) || row.safetyEvent.eventType !== 'GATE_REQUESTED') return row;
  return { safetyEvent: { ...row.safetyEvent, metadata: { ...row.safetyEvent.metadata, ...packageFacts(pkg) } } };
}

/** The package: the facts the workflow knows, the change from git, the trace from the ledger. Reads only. */
async function gatherPackage(deps: { readonly worktreeRoot: string; readonly ledger: Ledger }, intent: Intent, facts: ReviewPackageFacts): Promise<ReviewPackage> {
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
