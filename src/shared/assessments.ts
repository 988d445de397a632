import type { RiskClass } from './risk';

/**
 * The structured answers of triage and review, and the rules that read them. Agents' answers
 * are parsed into these by assessment-parsing.ts (in the activities); workflow code uses only
 * this module.
 */

export interface TriageAssessment {
  readonly risk: RiskClass;
  readonly confidence: number;
  readonly affectedPaths: readonly string[];
  readonly rationale: string;
  readonly predicted?: { readonly files: number; readonly lines: number };
  /** False when no valid JSON block was found and the risk was read from the text (or assumed). */
  readonly structured: boolean;
  /** What was wrong with the JSON block, when there was one. */
  readonly problems?: string;
}

export interface Finding {
  readonly severity: 'critical' | 'high' | 'medium' | 'low';
  readonly category: string;
  readonly message: string;
  readonly path?: string;
}

/** The five judge scores (1-5) of the LLM-as-judge rule. */
export interface JudgeScores {
  readonly strategicAlignment: number;
  readonly autonomyAppropriateness: number;
  readonly outputQuality: number;
  readonly resourceEfficiency: number;
  readonly learningApplication: number;
}

export interface ReviewAssessment {
  readonly verdict: 'APPROVE' | 'BLOCK';
  readonly findings: readonly Finding[];
  readonly scores?: JudgeScores;
  readonly summary: string;
  readonly structured: boolean;
  readonly problems?: string;
}

/**
 * The design reviewer's answer on an lld or spec: APPROVE lets the document go to its gate,
 * REQUEST_CHANGES goes to the gate with the findings for the person to weigh, BLOCK sends the
 * document back to its author.
 */
export interface DesignReviewAssessment {
  readonly verdict: 'APPROVE' | 'REQUEST_CHANGES' | 'BLOCK';
  readonly findings: readonly Finding[];
  readonly summary: string;
  readonly structured: boolean;
  readonly problems?: string;
}

/** What a design gate shows of the reviewer's answer: who reviewed, the verdict, the first findings. */
export interface DesignReviewSummary {
  readonly verdict: DesignReviewAssessment['verdict'];
  readonly reviewer: string;
  readonly model: string;
  readonly summary: string;
  readonly findings: readonly Finding[];
  /** All the findings, when more than the ones listed. */
  readonly total: number;
}

/** A design review without an answer: the person at the gate weighs the document without one. */
export const UNANSWERED_DESIGN_REVIEW: DesignReviewAssessment = { verdict: 'REQUEST_CHANGES', findings: [], summary: 'the reviewer gave no answer', structured: false };

/** Triage's assessment of an empty answer: MEDIUM risk with no confidence, so nothing passes on it. */
export const UNANSWERED_TRIAGE: TriageAssessment = { risk: 'MEDIUM', confidence: 0, affectedPaths: [], rationale: '', structured: false };

/** Review's assessment of an empty answer: BLOCK, with no findings and no scores. */
export const UNANSWERED_REVIEW: ReviewAssessment = { verdict: 'BLOCK', findings: [], summary: '', structured: false };

/**
 * The judge rule for autonomous execution: average ≥ 4.0, no score ≤ 1, autonomy
 * appropriateness > 2. Returns why not, or undefined when the scores allow it.
 */
export function judgeRefusal(scores: JudgeScores | undefined): string | undefined {
  if (!scores) return 'no judge scores';
  const values = Object.values(scores);
  const average = values.reduce((a, b) => a + b, 0) / values.length;
  if (average < 4) return `judge average ${average.toFixed(2)} < 4.0`;
  if (Math.min(...values) <= 1) return 'a judge score is 1 (critical failure)';
  if (scores.autonomyAppropriateness <= 2) return `autonomy appropriateness ${scores.autonomyAppropriateness} ≤ 2`;
  return undefined;
}

/** Confidence a triage needs, per risk, before anything may pass without a person. */
export const CONFIDENCE_THRESHOLDS: Record<Exclude<RiskClass, 'PROHIBITED'>, number> = { LOW: 0.5, MEDIUM: 0.7, HIGH: 0.9 };

/** Why the confidence gate fails (escalate to a person), or undefined when it passes. */
export function confidenceRefusal(assessment: Pick<TriageAssessment, 'risk' | 'confidence'>): string | undefined {
  if (assessment.risk === 'PROHIBITED') return 'PROHIBITED risk';
  const threshold = CONFIDENCE_THRESHOLDS[assessment.risk];
  if (assessment.confidence >= threshold) return undefined;
  return `confidence ${Math.round(assessment.confidence * 100)}% < ${Math.round(threshold * 100)}% for ${assessment.risk} risk`;
}

/** Critical security findings: each one opens the human-only security gate. */
export function criticalSecurityFindings(review: Pick<ReviewAssessment, 'findings'>): Finding[] {
  return review.findings.filter((f) => f.severity === 'critical' && f.category.toLowerCase() === 'security');
}
