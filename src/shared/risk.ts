import { z } from 'zod';

/** Risk classes of an intent: LOW auto-executes, MEDIUM logs, HIGH asks first, PROHIBITED never runs. */
export const RiskClassSchema = z.enum(['LOW', 'MEDIUM', 'HIGH', 'PROHIBITED']);
export type RiskClass = z.infer<typeof RiskClassSchema>;

/** Whether `risk` is `floor` or riskier. */
export function riskAtLeast(risk: RiskClass, floor: RiskClass): boolean {
  return RiskClassSchema.options.indexOf(risk) >= RiskClassSchema.options.indexOf(floor);
}
