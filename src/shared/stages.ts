/** The pipeline every intent runs, in order. `merge` is the only stage without an agent. */
export const STAGES = ['triage', 'lld', 'spec', 'impl', 'review', 'merge'] as const;
export type Stage = (typeof STAGES)[number];

/** Stages whose work is done by an agent. */
export const AGENT_STAGES = ['triage', 'lld', 'spec', 'impl', 'review'] as const;
export type AgentStage = (typeof AGENT_STAGES)[number];

export function isStage(value: string): value is Stage {
  return (STAGES as readonly string[]).includes(value);
}

/**
 * Working time per agent stage unless the intent says otherwise, as config durations: planning
 * (triage, lld, spec) 30 min each, implementation 60 with its test runs, review 30.
 */
export const DEFAULT_STAGE_TIME_LIMITS = { triage: '30m', lld: '30m', spec: '30m', impl: '60m', review: '30m' } as const satisfies Record<AgentStage, string>;
