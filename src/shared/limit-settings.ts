import { z } from 'zod';
import { DurationSchema, PositiveDurationSchema, UsdSchema } from './schema-primitives';
import { DEFAULT_STAGE_TIME_LIMITS } from './stages';

/*
 * The limits an intent runs under: their schema, the default profile's values, and how overrides
 * merge. The intent schema and the config file's profiles both build on them.
 */

/** A USD amount that must be more than zero: a cost ceiling of "0" would switch its check off. */
const PositiveUsdSchema = UsdSchema.refine((usd) => /[1-9]/.test(usd), 'must be more than 0 (a maximum of "0" would turn the check off)');

/** Limits that travel with each intent into its workflow (deterministic, durable). */
export const IntentLimitsConfigSchema = z.object({
  /** Attempts per stage; impl is the edit → test loop. */
  attempts: z.object({
    triage: z.number().int().min(1),
    lld: z.number().int().min(1),
    spec: z.number().int().min(1),
    impl: z.number().int().min(1),
    review: z.number().int().min(1),
    /** Refusals by the completeness gate (stubs, test tampering) before the intent halts. */
    completeness: z.number().int().min(1),
  }),
  /** All agent calls of one intent together. */
  totalAttempts: z.number().int().min(1),
  /** Hard limit per intent. `"0"` = unlimited (only when set explicitly). */
  budgetUsd: UsdSchema,
  /**
   * Hard limits per stage (e.g. `{ "impl": "3" }`); a stage not named has only the intent's. As
   * for every budget, `"0"` written for a stage means no stage limit (`mergeLimits` drops it).
   */
  stageBudgetUsd: z.partialRecord(z.enum(['triage', 'lld', 'spec', 'impl', 'review']), UsdSchema),
  /** The most one agent call may cost: the budget check adds it before every call. Never 0. */
  maxCallUsd: PositiveUsdSchema,
  /** Warn (and, with gates, ask a human) at this share of a budget. */
  budgetWarnAt: z.number().gt(0).lt(1),
  /** Wait at least this long before dispatching the same stage's agent again. */
  cooldown: DurationSchema,
  /** One attempt of an agent call (the activity's timeout): a backstop; `stageTimeLimits` bound the stage. */
  stageTimeout: PositiveDurationSchema,
  /**
   * Working time per stage, all its attempts, retries and test runs together: a workflow timer
   * that cancels the stage and halts the intent. Waits for a person (gates, pause) do not count.
   */
  stageTimeLimits: z.object({ triage: PositiveDurationSchema, lld: PositiveDurationSchema, spec: PositiveDurationSchema, impl: PositiveDurationSchema, review: PositiveDurationSchema }),
  /** Working time of the whole intent, counted like `stageTimeLimits`. */
  totalTimeout: PositiveDurationSchema,
  gateTimeout: PositiveDurationSchema,
  /** How long a pause holds the intent before its policy applies, like a gate's timeout. */
  pauseTimeout: PositiveDurationSchema,
  /** After `pauseTimeout` with no resume (escalated first): stop the intent (default), or resume it. */
  onPauseTimeout: z.enum(['stop', 'resume']),
  testTimeout: PositiveDurationSchema,
  blastRadius: z.object({
    /** Stop at a gate when the diff exceeds the triage prediction by this factor. */
    factor: z.number().min(1),
    maxFiles: z.number().int().positive(),
    maxLines: z.number().int().positive(),
  }),
});
export type IntentLimitsConfig = z.infer<typeof IntentLimitsConfigSchema>;

/**
 * The default profile's limits, and those of an intent that names none: $5 per intent, impl 5
 * attempts and completeness 3, a 60 s cooldown before the same stage's agent runs again, two hours
 * of working time in all, a day for a gate, and a change of at most 10 files and 2,000 lines.
 */
export const DEFAULT_INTENT_LIMITS: IntentLimitsConfig = {
  attempts: { triage: 3, lld: 3, spec: 3, impl: 5, review: 3, completeness: 3 },
  totalAttempts: 20,
  budgetUsd: '5',
  stageBudgetUsd: {},
  maxCallUsd: '0.50',
  budgetWarnAt: 0.8,
  cooldown: '60s',
  stageTimeout: '30m',
  // Planning 30 min a stage, implementation 60 (its test runs included), review 30, 120 in all.
  stageTimeLimits: { ...DEFAULT_STAGE_TIME_LIMITS },
  totalTimeout: '2h',
  gateTimeout: '24h',
  // A pause forgotten for a day stops the intent: nothing merges that no one is watching.
  pauseTimeout: '24h',
  onPauseTimeout: 'stop',
  testTimeout: '10m',
  // A change past half again its prediction, or past 10 files / 2000 lines, waits for a person.
  blastRadius: { factor: 1.5, maxFiles: 10, maxLines: 2000 },
};

/** Limits overrides, two levels deep (e.g. `{ attempts: { impl: 2 } }`); unknown keys are errors. */
export const LimitsOverridesSchema = IntentLimitsConfigSchema.extend({
  attempts: IntentLimitsConfigSchema.shape.attempts.partial().strict(),
  stageTimeLimits: IntentLimitsConfigSchema.shape.stageTimeLimits.partial().strict(),
  blastRadius: IntentLimitsConfigSchema.shape.blastRadius.partial().strict(),
})
  .partial()
  .strict();
export type LimitsOverrides = z.infer<typeof LimitsOverridesSchema>;

/**
 * `base` with `overrides` on top. A stage budget of `"0"` means what `"0"` means for every other
 * budget, no limit: the stage is dropped, so only the intent's budget applies to it.
 */
export function mergeLimits(base: IntentLimitsConfig, overrides: LimitsOverrides | undefined): IntentLimitsConfig {
  const stageBudgetUsd = Object.fromEntries(
    Object.entries({ ...base.stageBudgetUsd, ...overrides?.stageBudgetUsd }).filter(([, usd]) => usd === undefined || /[1-9]/.test(usd)),
  ) as IntentLimitsConfig['stageBudgetUsd'];
  return {
    ...base,
    ...overrides,
    attempts: { ...base.attempts, ...overrides?.attempts },
    stageBudgetUsd,
    stageTimeLimits: { ...base.stageTimeLimits, ...overrides?.stageTimeLimits },
    blastRadius: { ...base.blastRadius, ...overrides?.blastRadius },
  };
}
