import { z } from 'zod';
import { DurationSchema } from './duration';
import { RiskClassSchema } from './risk';

/**
 * Gates an intent can wait at, in the order they can come up:
 * - `architecture`: triage rated the intent HIGH risk; a person approves before the LLD is written.
 * - `lld`: the low-level design is written; a person approves it (from `minRisk` up, default HIGH).
 * - `cost-overrun`: spend reached `budgetWarnAt` (80%) of the intent budget; continue?
 * - `cascade`: a stage answer tried to widen the task (cascade detector HIGH).
 * - `anomaly`: the behaviour monitor found a HIGH anomaly.
 * - `blast-radius`: the change outgrew triage's prediction or the hard cap.
 * - `security`: review reported a critical security finding.
 * - `production`: the intent targets production; a person signs off before merge.
 * - `merge`: always, unless the automation ladder lets it pass.
 */
export const GateKindSchema = z.enum(['architecture', 'lld', 'cost-overrun', 'cascade', 'anomaly', 'blast-radius', 'security', 'production', 'merge']);
export type GateKind = z.infer<typeof GateKindSchema>;

export interface GateDefinition {
  /** What the person is asked, in one line. */
  readonly question: string;
  /** Who an escalation names when nobody decides in time (unless configured). */
  readonly escalateTo: string;
  /** Never auto-passed by the automation ladder, whatever its level. */
  readonly humanOnly: boolean;
  /** May be switched off (`enabled: false`); the others always open on their condition. */
  readonly optional: boolean;
}

export const GATES: Record<GateKind, GateDefinition> = {
  architecture: { question: 'Review the proposed approach before the design is written.', escalateTo: 'architect', humanOnly: false, optional: false },
  lld: { question: 'Approve the low-level design before the spec and the implementation?', escalateTo: 'the intent owner', humanOnly: false, optional: true },
  'cost-overrun': { question: 'Approaching the cost budget. Continue?', escalateTo: 'budget_owner', humanOnly: false, optional: true },
  cascade: { question: 'A stage tried to widen the task. Let the intent go on?', escalateTo: 'the intent owner', humanOnly: true, optional: false },
  anomaly: { question: 'The behaviour monitor found a HIGH anomaly. Let the intent go on?', escalateTo: 'the intent owner', humanOnly: false, optional: false },
  'blast-radius': { question: 'The change is larger than predicted. Let it go on?', escalateTo: 'the intent owner', humanOnly: false, optional: false },
  security: { question: 'Critical security finding: review it before anything merges.', escalateTo: 'security_team', humanOnly: true, optional: false },
  production: { question: 'This change targets production. Sign off before merge?', escalateTo: 'deployment_lead', humanOnly: true, optional: false },
  merge: { question: 'Merge the branch?', escalateTo: 'the intent owner', humanOnly: false, optional: false },
};

/** Per-gate settings, from the config file's `gates` and the intent's own (the intent's win). */
export const GateSettingsSchema = z
  .object({
    /** Only these may decide the gate; absent means anyone but the agent. */
    approvers: z.array(z.string().trim().min(1)).min(1).optional(),
    /** How long the gate waits for a decision. Default: the intent's `limits.gateTimeout`. */
    timeout: DurationSchema.optional(),
    /** What a timeout does after escalating: reject (default), or wait one more timeout once. */
    onTimeout: z.enum(['reject', 'wait-again']).optional(),
    /** How long `defer` extends the wait (once). Default: the gate's timeout again. */
    deferPeriod: DurationSchema.optional(),
    /** Who an escalation names when the gate times out. */
    escalateTo: z.string().trim().min(1).optional(),
    /** Optional gates only (`lld`, `cost-overrun`): false switches the gate off. */
    enabled: z.boolean().optional(),
    /** `lld` only: the lowest triage risk that asks for LLD approval (default HIGH). */
    minRisk: RiskClassSchema.exclude(['PROHIBITED']).optional(),
  })
  .strict();
export type GateSettings = z.infer<typeof GateSettingsSchema>;

/** Settings for every gate, checked against what each gate allows. */
export const GatesConfigSchema = z.partialRecord(GateKindSchema, GateSettingsSchema).superRefine((gates, ctx) => {
  for (const [gate, settings] of Object.entries(gates) as Array<[GateKind, GateSettings]>) {
    if (settings.enabled === false && !GATES[gate].optional) {
      ctx.addIssue({ code: 'custom', path: [gate, 'enabled'], message: `the ${gate} gate cannot be switched off (only lld and cost-overrun can)` });
    }
    if (settings.minRisk !== undefined && gate !== 'lld') {
      ctx.addIssue({ code: 'custom', path: [gate, 'minRisk'], message: 'minRisk applies to the lld gate only' });
    }
  }
});
export type GatesConfig = z.infer<typeof GatesConfigSchema>;

/** Config-file settings with the intent's on top, gate by gate. */
export function mergeGateSettings(base: GatesConfig | undefined, overrides: GatesConfig | undefined): GatesConfig {
  const merged: GatesConfig = { ...base };
  for (const [gate, settings] of Object.entries(overrides ?? {}) as Array<[GateKind, GateSettings]>) {
    merged[gate] = { ...merged[gate], ...settings };
  }
  return merged;
}
