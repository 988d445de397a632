import type { DesignReviewSummary, Finding, JudgeScores } from './assessments';
import type { RiskClass } from './risk';

/**
 * What a person sees before deciding a gate after impl: the goal, the plan, what was predicted
 * against what happened, the diff, the tests, the review's findings and the ledger trace. It is
 * bounded (a few KB) because it travels in the workflow's state and the gate's details.
 */
export interface ReviewPackage {
  readonly intentId: string;
  readonly goal: string;
  readonly branch: string;
  readonly baseBranch: string;
  readonly environment?: string;
  readonly agent: string;
  readonly ladderLevel: number;
  readonly risk: { readonly class: RiskClass; readonly confidence: number; readonly rationale: string };
  /** The LLD's headings and first lines: the plan the agent chose. */
  readonly plan: string;
  readonly predicted: { readonly files?: number; readonly lines?: number };
  readonly actual: { readonly files: number; readonly lines: number; readonly added: number; readonly deleted: number; readonly spendUsd: string };
  readonly diffSummary: ReadonlyArray<{ readonly path: string; readonly added: number; readonly deleted: number }>;
  /** Files beyond the first MAX_DIFF_FILES, counted only. */
  readonly moreFiles: number;
  readonly tests: ReadonlyArray<{ readonly attempt: number; readonly passed: boolean; readonly summary: string }>;
  readonly review?: { readonly verdict: 'APPROVE' | 'BLOCK'; readonly findings: readonly Finding[]; readonly scores?: JudgeScores; readonly summary: string };
  /**
   * What agent-written code tried that its sandbox stopped or kept to itself (ESCAPE_ATTEMPTED,
   * ANSWER_REDACTED rows): the first of them in words, and how many in all.
   */
  readonly attempts?: { readonly listed: readonly string[]; readonly total: number };
  /**
   * The spec's test plan as the last check after impl found it (TEST_PLAN_CHECKED): each planned
   * test, its file and its status (`ran`, `unverified` when the run printed no test names);
   * absent when the spec planned no test by file.
   */
  readonly testPlan?: ReadonlyArray<PlannedTestLine>;
  /** The intent's ledger events, oldest first (the last MAX_TRACE of them). */
  readonly ledgerTrace: readonly string[];
  /**
   * What the secret scan found in the intent's changes, from the ledger (never a value): each
   * credential held back from an attempt (SECRET_IN_CHANGE) and each one let in by a person's
   * allowance (SECRET_ALLOWED). The last MAX_SECRET_LINES of each; absent when there were none.
   */
  readonly secrets?: { readonly held: readonly string[]; readonly allowed: readonly string[] };
}

/** One planned test in the review package (see src/safety/test-plan.ts for the statuses). */
export interface PlannedTestLine {
  readonly requirement: string;
  readonly test: string;
  readonly file: string;
  readonly existing: boolean;
  readonly status: string;
}

/**
 * What a gate's GATE_REQUESTED row carries of its review package, for a person deciding from a
 * notification: the predicted against the actual size, and the review's verdict.
 */
export function packageFacts(pkg: ReviewPackage): Record<string, unknown> {
  return { predicted: pkg.predicted, actual: { files: pkg.actual.files, lines: pkg.actual.lines }, review: pkg.review?.verdict };
}

export const MAX_DIFF_FILES = 30;
export const MAX_TRACE = 40;
export const MAX_SECRET_LINES = 20;

/** What a design gate (lld, spec) shows beside its document, as Markdown. */
export function renderDocumentFacts(d: { readonly checks: string; readonly attempts: number; readonly predicted?: { readonly files: number; readonly lines: number }; readonly review?: DesignReviewSummary }): string {
  const predicted = d.predicted ? `files ${d.predicted.files}, lines ${d.predicted.lines}` : 'none given';
  const facts = `**Checks:** ${d.checks} (attempt ${d.attempts})\n\n**Predicted size (triage):** ${predicted}`;
  return d.review ? `${facts}\n\n${renderDesignReview(d.review)}` : facts;
}

/** The design reviewer's verdict and findings, as Markdown. */
export function renderDesignReview(r: DesignReviewSummary): string {
  const lines = [`**Design review:** ${r.verdict} by ${r.reviewer} (${r.model})${r.summary ? ` — ${r.summary}` : ''}`];
  for (const f of r.findings) lines.push(`- [${f.severity}/${f.category}] ${f.message}${f.path ? ` (${f.path})` : ''}`);
  if (r.total > r.findings.length) lines.push(`- … and ${r.total - r.findings.length} more (in the review's file in the lineage)`);
  return lines.join('\n');
}

/** The package as Markdown, for the CLI prompt and the Web UI's current details. */
export function renderReviewPackage(p: ReviewPackage): string {
  const lines = [
    `**Goal:** ${p.goal}`,
    `**Branch:** \`${p.branch}\` → \`${p.baseBranch}\`${p.environment ? ` (environment: ${p.environment})` : ''} · agent ${p.agent} at L${p.ladderLevel}`,
    `**Risk:** ${p.risk.class}, confidence ${Math.round(p.risk.confidence * 100)}%${p.risk.rationale ? ` — ${p.risk.rationale}` : ''}`,
    `**Predicted vs actual:** files ${p.predicted.files ?? '?'} → ${p.actual.files}, lines ${p.predicted.lines ?? '?'} → ${p.actual.lines} (+${p.actual.added} −${p.actual.deleted}), spend $${p.actual.spendUsd}`,
    '',
    '**Plan:**',
    p.plan || '(no design written)',
    '',
    '**Diff:**',
    ...p.diffSummary.map((f) => `- ${f.path} (+${f.added} −${f.deleted})`),
    ...(p.moreFiles > 0 ? [`- … and ${p.moreFiles} more file(s)`] : []),
    '',
    `**Tests:** ${p.tests.map((t) => `attempt ${t.attempt}: ${t.passed ? 'passed' : 'failed'} (${t.summary})`).join('; ') || 'not run'}`,
  ];
  if (p.testPlan && p.testPlan.length > 0) {
    lines.push('', '**Test plan (spec):**', ...p.testPlan.map((t) => `- ${t.status}: \`${t.test}\` in ${t.file}${t.existing ? ' (existing)' : ''} — ${t.requirement}`));
  }
  if (p.attempts && p.attempts.total > 0) {
    lines.push('', `**Tried in its sandbox (${p.attempts.total}; this gate is a person's):**`, ...p.attempts.listed.map((a) => `- ${a}`));
    if (p.attempts.total > p.attempts.listed.length) lines.push(`- … and ${p.attempts.total - p.attempts.listed.length} more (warden audit lists each)`);
  }
  if (p.review) {
    lines.push('', `**Review:** ${p.review.verdict}${p.review.summary ? ` — ${p.review.summary}` : ''}`);
    for (const f of p.review.findings) lines.push(`- [${f.severity}/${f.category}] ${f.message}${f.path ? ` (${f.path})` : ''}`);
    if (p.review.scores) {
      const s = p.review.scores;
      lines.push(`Judge scores: alignment ${s.strategicAlignment}, autonomy ${s.autonomyAppropriateness}, quality ${s.outputQuality}, efficiency ${s.resourceEfficiency}, learning ${s.learningApplication}`);
    }
  }
  if (p.secrets) {
    lines.push('', `**Secrets:** ${p.secrets.held.length} held back from the change (never committed), ${p.secrets.allowed.length} let in by the config's secrets.allow`);
    for (const s of p.secrets.held) lines.push(`- held back: ${s}`);
    for (const s of p.secrets.allowed) lines.push(`- ALLOWED: ${s}`);
  }
  lines.push('', '**Ledger trace:**', ...p.ledgerTrace.map((t) => `- ${t}`));
  return lines.join('\n');
}
