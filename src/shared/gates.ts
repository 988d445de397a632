/**
 * Gates an intent can wait at, in the order they can come up:
 * - `architecture`: triage rated the intent HIGH risk; a person approves before the LLD is written.
 * - `lld`: the low-level design is written; a person approves it (from `minRisk` up, default HIGH).
 * - `spec`: the test specification is written; a person approves it (from `minRisk` up, default
 *   HIGH). Off unless the config switches it on.
 * - `cost-overrun`: spend reached `budgetWarnAt` (80%) of the intent budget; continue?
 * - `cascade`: a stage answer tried to widen the task (cascade detector HIGH).
 * - `anomaly`: the behaviour monitor found a HIGH anomaly.
 * - `blast-radius`: the change outgrew triage's prediction or the hard cap.
 * - `security`: review reported a critical security finding.
 * - `production`: the intent targets production; a person signs off before merge.
 * - `merge`: always, unless the automation ladder lets it pass.
 */
export const GATE_KINDS = ['architecture', 'lld', 'spec', 'cost-overrun', 'cascade', 'anomaly', 'blast-radius', 'security', 'production', 'merge'] as const;
export type GateKind = (typeof GATE_KINDS)[number];

/** Whether `value` names a built-in gate. */
export function isGateKind(value: unknown): value is GateKind {
  return (GATE_KINDS as readonly unknown[]).includes(value);
}

/** A custom gate's id, as the config's `customGates` names it (never a built-in gate's name). */
export const CUSTOM_GATE_ID = /^[a-z][a-z0-9-]{1,39}$/;

/** A gate's name: a built-in gate, or a custom gate's id. */
export type GateName = GateKind | (string & Record<never, never>);

/** Whether `value` can name a gate: a built-in one, or the shape of a custom gate's id. */
export function isGateName(value: unknown): value is GateName {
  return isGateKind(value) || (typeof value === 'string' && CUSTOM_GATE_ID.test(value));
}

export interface GateDefinition {
  /** What the person is asked, in one line. */
  readonly question: string;
  /** Who an escalation names when nobody decides in time (unless configured). */
  readonly escalateTo: string;
  /** Never auto-passed by the automation ladder, whatever its level. */
  readonly humanOnly: boolean;
  /** May be switched off (`enabled: false`); the others always open on their condition. */
  readonly optional: boolean;
  /** An optional gate that is off until the config switches it on (`enabled: true`, or a `minRisk`). */
  readonly offByDefault?: boolean;
}

export const GATES: Record<GateKind, GateDefinition> = {
  architecture: { question: 'Review the proposed approach before the design is written.', escalateTo: 'architect', humanOnly: false, optional: false },
  lld: { question: 'Approve the low-level design before the spec and the implementation?', escalateTo: 'the intent owner', humanOnly: false, optional: true },
  spec: { question: 'Approve the test specification before the implementation?', escalateTo: 'the intent owner', humanOnly: false, optional: true, offByDefault: true },
  'cost-overrun': { question: 'Approaching the cost budget. Continue?', escalateTo: 'budget_owner', humanOnly: false, optional: true },
  cascade: { question: 'A stage tried to widen the task. Let the intent go on?', escalateTo: 'the intent owner', humanOnly: true, optional: false },
  anomaly: { question: 'The behaviour monitor found a HIGH anomaly. Let the intent go on?', escalateTo: 'the intent owner', humanOnly: true, optional: false },
  'blast-radius': { question: 'The change is larger than predicted. Let it go on?', escalateTo: 'the intent owner', humanOnly: false, optional: false },
  security: { question: 'Critical security finding: review it before anything merges.', escalateTo: 'security_team', humanOnly: true, optional: false },
  production: { question: 'This change targets production. Sign off before merge?', escalateTo: 'deployment_lead', humanOnly: true, optional: false },
  merge: { question: 'Merge the branch?', escalateTo: 'the intent owner', humanOnly: false, optional: false },
};
