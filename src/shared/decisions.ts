import { z } from 'zod';
import { GateKindSchema } from './gates';

export { GateKindSchema, GateSettingsSchema, type GateKind, type GateSettings } from './gates';

/** Set in every agent process's environment: a decision sent from there is the agent's own. */
export const AGENT_SESSION_VARIABLE = 'WARDEN_AGENT_SESSION';

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
    /**
     * Set by the CLI when it runs inside an agent's process (WARDEN_AGENT_SESSION is in its
     * environment): such a decision is the agent deciding its own gate, and is refused.
     */
    agentSession: z.string().max(200).optional(),
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

/** A decision as the workflow recorded it. */
export interface RecordedDecision extends Decision {
  /** ISO time the workflow received it (workflow time, deterministic). */
  readonly at: string;
  /** True when no one decided and the gate's timeout policy did. */
  readonly timedOut: boolean;
}
