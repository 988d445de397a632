import { z } from 'zod';
import { AnthropicAgentProfileSchema, OpenAiAgentProfileSchema } from './agent-profiles';
import { AGENT_STAGES } from './stages';

/**
 * The scope judge: a model, asked through the gateway like any agent, whether a stage's answer
 * goes beyond the intent's goal. Off unless the config names one. Its "beyond" — or no verdict
 * at all — puts a person at the stage's cascade gate (src/activities/scope-judge.ts).
 */

/** The stages whose answers are judged unless the config says otherwise: those that make the work. */
export const DEFAULT_JUDGED_STAGES = ['lld', 'spec', 'impl'] as const;

const JudgedStagesSchema = z.array(z.enum(AGENT_STAGES)).min(1);

/** The config's `judge`: an agent profile by name (a model over HTTP) and the stages it reads. */
export const JudgeSettingsSchema = z
  .object({
    agent: z.string().trim().min(1),
    stages: JudgedStagesSchema.optional(),
  })
  .strict();
export type JudgeSettings = z.infer<typeof JudgeSettingsSchema>;

/** What an intent carries: the judge's profile itself, and the stages it reads. */
export const IntentJudgeSchema = z
  .object({
    agent: z.discriminatedUnion('kind', [AnthropicAgentProfileSchema, OpenAiAgentProfileSchema]),
    stages: JudgedStagesSchema.default([...DEFAULT_JUDGED_STAGES]),
  })
  .strict();
export type IntentJudge = z.infer<typeof IntentJudgeSchema>;
