import { z } from 'zod';

/**
 * Gates an intent can wait at: `merge` before anything reaches the base branch; `blast-radius`
 * when the change outgrows its prediction; `anomaly` when the behaviour monitor finds a HIGH one.
 */
export const GateKindSchema = z.enum(['merge', 'blast-radius', 'anomaly']);
export type GateKind = z.infer<typeof GateKindSchema>;

/**
 * Payload of the `decide` signal. Anyone with access to the namespace can send it (CLI or Web
 * UI), so the workflow validates it and ignores anything that does not parse.
 */
export const DecisionSchema = z
  .object({
    gate: GateKindSchema,
    decision: z.enum(['approve', 'reject']),
    by: z.string().trim().min(1, 'a decision must say who made it'),
    reason: z.string().trim().max(2000).optional(),
  })
  .refine((d) => d.decision !== 'reject' || (d.reason !== undefined && d.reason.length > 0), {
    message: 'a rejection needs a reason',
    path: ['reason'],
  });
export type Decision = z.infer<typeof DecisionSchema>;

/** A decision as the workflow recorded it. */
export interface RecordedDecision extends Decision {
  /** ISO time the workflow received it (workflow time, deterministic). */
  readonly at: string;
  /** True when no one decided and the gate's timeout policy did. */
  readonly timedOut: boolean;
}
