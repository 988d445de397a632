import { z } from 'zod';
import { CUSTOM_GATE_ID, GATE_KINDS } from './gates';
import { DurationSchema, PathGlobSchema, RiskClassSchema } from './schema-primitives';

/** A custom gate as the config writes it (see custom-gates.ts for what each field does). */
export const CustomGateSchema = z
  .object({
    id: z
      .string()
      .regex(CUSTOM_GATE_ID, 'a gate id is 2-40 lower-case letters, digits or dashes, starting with a letter')
      .refine((id) => !(GATE_KINDS as readonly string[]).includes(id), 'that is a built-in gate: configure it under gates instead'),
    after: z.enum(['triage', 'lld', 'spec', 'impl', 'review']),
    prompt: z.string().trim().min(1).max(1000),
    when: z
      .object({
        minRisk: RiskClassSchema.exclude(['PROHIBITED']).optional(),
        environment: z.string().trim().min(1).max(60).optional(),
        paths: z.array(PathGlobSchema).min(1).max(50).optional(),
        findingCategory: z.string().trim().min(1).max(60).optional(),
      })
      .strict()
      .optional(),
    approvers: z.array(z.string().trim().min(1)).min(1).optional(),
    timeout: DurationSchema.optional(),
    onTimeout: z.enum(['reject', 'wait-again']).optional(),
    deferPeriod: DurationSchema.optional(),
    escalateTo: z.string().trim().min(1).optional(),
    ladder: z.boolean().optional(),
  })
  .strict()
  .superRefine((gate, ctx) => {
    if (gate.when?.paths && gate.after !== 'impl' && gate.after !== 'review') {
      ctx.addIssue({ code: 'custom', path: ['when', 'paths'], message: 'when.paths needs a change to look at: after impl or review' });
    }
    if (gate.when?.findingCategory && gate.after !== 'review') {
      ctx.addIssue({ code: 'custom', path: ['when', 'findingCategory'], message: 'when.findingCategory needs review findings: after review' });
    }
  });

export const CustomGatesSchema = z
  .array(CustomGateSchema)
  .max(20)
  .superRefine((gates, ctx) => {
    const seen = new Set<string>();
    gates.forEach((gate, i) => {
      if (seen.has(gate.id)) ctx.addIssue({ code: 'custom', path: [i, 'id'], message: `two custom gates are named ${gate.id}` });
      seen.add(gate.id);
    });
  });
