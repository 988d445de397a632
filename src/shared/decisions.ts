import { z } from 'zod';

/**
 * Gates an intent can wait at: `merge` before anything reaches the base branch; `blast-radius`
 * when the change outgrows its prediction; `anomaly` when the behaviour monitor finds a HIGH one.
 */
export const GateKindSchema = z.enum(['merge', 'blast-radius', 'anomaly']);
export type GateKind = z.infer<typeof GateKindSchema>;

/** approve; reject (with a reason); approve with conditions for the next stage; defer once. */
export const DecisionKindSchema = z.enum(['approve', 'reject', 'approve-with-conditions', 'defer']);
export type DecisionKind = z.infer<typeof DecisionKindSchema>;

/**
 * Payload of the `decide` signal and update. Anyone with access to the namespace can send it
 * (CLI or Web UI), so the workflow validates it; an invalid or unauthorised one changes nothing
 * and is recorded as a refused decision.
 */
export const DecisionSchema = z
  .object({
    gate: GateKindSchema,
    decision: DecisionKindSchema,
    by: z.string().trim().min(1, 'a decision must say who made it'),
    reason: z.string().trim().max(2000).optional(),
    /** With approve-with-conditions: what the next stage must respect (added to its prompt). */
    conditions: z.array(z.string().trim().min(1).max(1000)).max(20).optional(),
  })
  .refine((d) => d.decision !== 'reject' || (d.reason !== undefined && d.reason.length > 0), {
    message: 'a rejection needs a reason',
    path: ['reason'],
  })
  .refine((d) => d.decision !== 'approve-with-conditions' || (d.conditions?.length ?? 0) > 0, {
    message: 'approve-with-conditions needs at least one condition',
    path: ['conditions'],
  });
export type Decision = z.infer<typeof DecisionSchema>;

/** What the `decide` update answers. */
export interface DecisionAnswer {
  readonly accepted: boolean;
  /** Why it was refused, when it was. */
  readonly reason?: string;
}

/** Per-gate settings an intent may carry: who may decide, how long a defer extends the wait. */
export const GateSettingsSchema = z
  .object({
    /** Only these may decide the gate; absent means anyone but the agent. */
    approvers: z.array(z.string().trim().min(1)).min(1).optional(),
    /** How long `defer` extends the wait (once). Default: the gate timeout again. */
    deferPeriod: z.string().regex(/^\d+(\.\d+)?\s*(ms|s|m|h|d)$/).optional(),
    /** Who an escalation names when the gate times out. */
    escalateTo: z.string().trim().min(1).optional(),
  })
  .strict();
export type GateSettings = z.infer<typeof GateSettingsSchema>;

/** A decision as the workflow recorded it. */
export interface RecordedDecision extends Decision {
  /** ISO time the workflow received it (workflow time, deterministic). */
  readonly at: string;
  /** True when no one decided and the gate's timeout policy did. */
  readonly timedOut: boolean;
}
