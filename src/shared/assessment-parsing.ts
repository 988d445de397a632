import { z } from 'zod';
import type { DesignReviewAssessment, ReviewAssessment, TriageAssessment } from './assessments';
import type { RiskClass } from './risk';
import { describeIssues, RiskClassSchema } from './schema-primitives';

/**
 * Reads triage's and review's answers. Agents are asked for a JSON object (see prompts.ts); the
 * first `{…}` block of the output is validated here with zod, in the activities. An answer
 * without a valid block is read from its plain words where it can be ("Risk: LOW", a first
 * line "APPROVE"), and is marked `structured: false`: it never lets anything pass on its own.
 */

const Probability = z.number().min(0).max(1);

export const TriageAnswerSchema = z.object({
  risk: RiskClassSchema,
  confidence: Probability,
  affectedPaths: z.array(z.string().min(1)).max(200).default([]),
  rationale: z.string().max(4000).default(''),
  predicted: z.object({ files: z.number().int().min(0), lines: z.number().int().min(0) }).optional(),
});

export const FindingSchema = z.object({
  severity: z.enum(['critical', 'high', 'medium', 'low']),
  category: z.string().trim().min(1).max(60),
  message: z.string().trim().min(1).max(2000),
  path: z.string().optional(),
});

const Score = z.number().min(1).max(5);
export const JudgeScoresSchema = z.object({
  strategicAlignment: Score,
  autonomyAppropriateness: Score,
  outputQuality: Score,
  resourceEfficiency: Score,
  learningApplication: Score,
});

export const ReviewAnswerSchema = z.object({
  verdict: z.enum(['APPROVE', 'BLOCK']),
  findings: z.array(FindingSchema).max(100).default([]),
  scores: JudgeScoresSchema.optional(),
  summary: z.string().max(4000).default(''),
});

export const DesignReviewAnswerSchema = z.object({
  verdict: z.enum(['APPROVE', 'REQUEST_CHANGES', 'BLOCK']),
  findings: z.array(FindingSchema).max(100).default([]),
  summary: z.string().max(4000).default(''),
});

/** The first balanced-looking JSON object in `text`, parsed; undefined when there is none. */
function firstJsonObject(text: string): { value?: unknown; error?: string } | undefined {
  const fenced = /```(?:json)?\s*(\{[\s\S]*?\})\s*```/.exec(text);
  const candidate = fenced?.[1] ?? /\{[\s\S]*\}/.exec(text)?.[0];
  if (!candidate) return undefined;
  try {
    return { value: JSON.parse(candidate) as unknown };
  } catch (error) {
    return { error: `the JSON block does not parse: ${(error as Error).message}` };
  }
}

/** The output's JSON block validated by `schema`: the data, or what was wrong (undefined: no block). */
function validBlock<S extends z.ZodType>(schema: S, output: string): { block?: { value?: unknown }; data?: z.infer<S>; problems?: string } {
  const block = firstJsonObject(output);
  if (block?.value === undefined) return { block, problems: block?.error };
  const parsed = schema.safeParse(block.value);
  return parsed.success ? { block, data: parsed.data } : { block, problems: describeIssues(parsed.error) };
}

/**
 * Triage's assessment. Without a valid block: the risk named in the text ("Risk: HIGH"), or
 * MEDIUM when none is named, with confidence 0 so the confidence gate never passes; a valid
 * `predicted` is kept.
 */
export function readTriageAssessment(output: string): TriageAssessment {
  const { block, data, problems } = validBlock(TriageAnswerSchema, output);
  if (data) return { ...data, structured: true };
  const named = /\brisk\b\W{0,3}(LOW|MEDIUM|HIGH|PROHIBITED)\b/i.exec(output)?.[1]?.toUpperCase() as RiskClass | undefined;
  // A prediction that is valid on its own still bounds the blast-radius check (the hard cap bounds it too).
  const predicted = TriageAnswerSchema.shape.predicted.safeParse((block?.value as { predicted?: unknown } | undefined)?.predicted);
  return {
    risk: named ?? 'MEDIUM',
    confidence: 0,
    affectedPaths: [],
    rationale: '',
    ...(predicted.success && predicted.data ? { predicted: predicted.data } : {}),
    structured: false,
    ...(problems ? { problems } : {}),
  };
}

/**
 * Review's assessment. Without a valid block: APPROVE only when the answer's first word is
 * APPROVE, else BLOCK; no findings, no scores (so the judge rule cannot pass).
 */
export function readReviewAssessment(output: string): ReviewAssessment {
  const { data, problems } = validBlock(ReviewAnswerSchema, output);
  if (data) return { ...data, structured: true };
  const verdict = /^\W*APPROVE\b/i.test(output.trim()) ? 'APPROVE' : 'BLOCK';
  return { verdict, findings: [], summary: output.trim().split('\n')[0]?.slice(0, 200) ?? '', structured: false, ...(problems ? { problems } : {}) };
}

/**
 * The design reviewer's assessment. Without a valid block: the verdict its answer starts with
 * (APPROVE, REQUEST_CHANGES or BLOCK), else REQUEST_CHANGES: an answer nobody can read goes to
 * the person at the gate, and does not send the author's document back.
 */
export function readDesignReviewAssessment(output: string): DesignReviewAssessment {
  const { data, problems } = validBlock(DesignReviewAnswerSchema, output);
  if (data) return { ...data, structured: true };
  const first = /^\W*(APPROVE|REQUEST_CHANGES|BLOCK)\b/i.exec(output.trim())?.[1]?.toUpperCase() as DesignReviewAssessment['verdict'] | undefined;
  return { verdict: first ?? 'REQUEST_CHANGES', findings: [], summary: output.trim().split('\n')[0]?.slice(0, 200) ?? '', structured: false, ...(problems ? { problems } : {}) };
}
