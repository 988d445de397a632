/** Risk classes of an intent, least to most: LOW auto-executes, MEDIUM logs, HIGH asks first, PROHIBITED never runs. */
export const RISK_CLASSES = ['LOW', 'MEDIUM', 'HIGH', 'PROHIBITED'] as const;
export type RiskClass = (typeof RISK_CLASSES)[number];

/** Whether `risk` is `floor` or riskier. */
export function riskAtLeast(risk: RiskClass, floor: RiskClass): boolean {
  return RISK_CLASSES.indexOf(risk) >= RISK_CLASSES.indexOf(floor);
}
