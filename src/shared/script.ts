import { z } from 'zod';
import { AGENT_STAGES } from './stages';

/** One file change a scripted attempt makes: whole-file write, or deletion. */
export const ScriptEditSchema = z.union([
  z.object({ path: z.string().min(1), content: z.string() }),
  z.object({ path: z.string().min(1), delete: z.literal(true) }),
]);

export const ScriptAttemptSchema = z.object({
  /** What the agent "says": the stage's artifact. */
  output: z.string(),
  edits: z.array(ScriptEditSchema).default([]),
  usage: z
    .object({ inputTokens: z.number().int().min(0), outputTokens: z.number().int().min(0) })
    .default({ inputTokens: 0, outputTokens: 0 }),
  /**
   * Cost of the attempt in USD. Without it, `usage` is priced by the script's model (which must
   * then be in the pricing table, unless the usage is zero).
   */
  costUsd: z.number().min(0).optional(),
  /** Wait this long before answering (milliseconds). */
  delayMs: z.number().int().min(0).default(0),
  /** Fail the attempt with this message instead of answering. */
  fail: z.string().optional(),
});

/**
 * A scripted agent's script: per stage, a list of attempts. Attempt N of a stage replays entry
 * N-1, or the last entry once the list runs out. A stage with no entry answers "ok".
 */
export const AgentScriptSchema = z.object({
  model: z.string().default('scripted'),
  stages: z.partialRecord(z.enum(AGENT_STAGES), z.array(ScriptAttemptSchema).min(1)),
  /** The answers to the review of a design document, per document, attempt by attempt like `stages`. */
  designReview: z.partialRecord(z.enum(['lld', 'spec']), z.array(ScriptAttemptSchema).min(1)).optional(),
});
export type AgentScript = z.infer<typeof AgentScriptSchema>;
export type ScriptAttempt = z.infer<typeof ScriptAttemptSchema>;
