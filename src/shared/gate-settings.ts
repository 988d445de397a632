import { z } from 'zod';
import { GATES, type GateKind } from './gates';
import { DurationSchema, GateKindSchema, RiskClassSchema } from './schema-primitives';

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
    /** Optional gates only (`lld`, `spec`, `cost-overrun`): false switches the gate off; `spec` is off until true (or a `minRisk`). */
    enabled: z.boolean().optional(),
    /** `lld` and `spec` only: the lowest triage risk that asks for the document's approval (default HIGH). */
    minRisk: RiskClassSchema.exclude(['PROHIBITED']).optional(),
  })
  .strict();
export type GateSettings = z.infer<typeof GateSettingsSchema>;

/** Settings for every gate, checked against what each gate allows. */
export const GatesConfigSchema = z.partialRecord(GateKindSchema, GateSettingsSchema).superRefine((gates, ctx) => {
  for (const [gate, settings] of Object.entries(gates) as Array<[GateKind, GateSettings]>) {
    if (settings.enabled === false && !GATES[gate].optional) {
      ctx.addIssue({ code: 'custom', path: [gate, 'enabled'], message: `the ${gate} gate cannot be switched off (only lld, spec and cost-overrun can)` });
    }
    if (settings.minRisk !== undefined && gate !== 'lld' && gate !== 'spec') {
      ctx.addIssue({ code: 'custom', path: [gate, 'minRisk'], message: 'minRisk applies to the lld and spec gates only' });
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
