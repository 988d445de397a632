/** The pipeline every intent runs, in order. `merge` is the only stage without an agent. */
export const STAGES = ['triage', 'lld', 'spec', 'impl', 'review', 'merge'] as const;
export type Stage = (typeof STAGES)[number];

/** Stages whose work is done by an agent. */
export const AGENT_STAGES = ['triage', 'lld', 'spec', 'impl', 'review'] as const;
export type AgentStage = (typeof AGENT_STAGES)[number];

export function isStage(value: string): value is Stage {
  return (STAGES as readonly string[]).includes(value);
}
