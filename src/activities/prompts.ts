import type { Intent } from '../shared/intent';
import type { AgentStage } from '../shared/stages';

/** An earlier stage's artifact, carried into later prompts so every step works from facts. */
export interface PriorArtifact {
  readonly name: string;
  readonly content: string;
}

const ASK: Record<AgentStage, string> = {
  triage: [
    'Triage this intent: say what it changes, how risky it is, and which files it will touch.',
    'End your answer with one JSON object (in a ```json block) of this shape:',
    '{"risk": "LOW" | "MEDIUM" | "HIGH" | "PROHIBITED", "confidence": 0.0-1.0, "affectedPaths": ["…"], "rationale": "…", "predicted": {"files": N, "lines": N}}',
    'PROHIBITED is for security controls and credentials: such an intent is not carried out.',
  ].join('\n'),
  lld: 'Write the low-level design: the files to change, the functions to add or alter, and how each is tested.',
  spec: 'Write the test specification: each requirement mapped to at least one test case.',
  impl: 'Implement the design in the working tree. Change only the declared paths. Make the tests pass.',
  review: [
    'Review the change on this branch against the goal, the design and the tests. Answer APPROVE or BLOCK with findings.',
    'End your answer with one JSON object (in a ```json block) of this shape:',
    '{"verdict": "APPROVE" | "BLOCK", "summary": "…", "findings": [{"severity": "critical" | "high" | "medium" | "low", "category": "security" | "correctness" | "tests" | "style" | "…", "message": "…", "path": "…"}],',
    ' "scores": {"strategicAlignment": 1-5, "autonomyAppropriateness": 1-5, "outputQuality": 1-5, "resourceEfficiency": 1-5, "learningApplication": 1-5}}',
  ].join('\n'),
};

/** Longest slice of one earlier artifact that goes into a prompt. */
const MAX_ARTIFACT_CHARS = 20_000;

/** Renders the prompt for one attempt of one stage. Pure: everything it uses is passed in. */
export function buildPrompt(input: {
  readonly intent: Intent;
  readonly stage: AgentStage;
  readonly attempt: number;
  readonly priorArtifacts: readonly PriorArtifact[];
  readonly feedback?: string;
  readonly conditions?: readonly string[];
}): string {
  const { intent, stage, attempt } = input;
  const parts = [
    `# Warden: ${stage} (attempt ${attempt})`,
    `## Goal\n${intent.goal}`,
    `## Declared paths (the only files you may change)\n${intent.paths.map((p) => `- ${p}`).join('\n')}`,
    `## Task\n${ASK[stage]}`,
  ];
  for (const artifact of input.priorArtifacts) {
    parts.push(`## Earlier artifact: ${artifact.name}\n${artifact.content.slice(0, MAX_ARTIFACT_CHARS)}`);
  }
  if (input.conditions?.length) {
    parts.push(`## Conditions set by the approver (you must respect them)\n${input.conditions.map((c) => `- ${c}`).join('\n')}`);
  }
  if (input.feedback) parts.push(`## Result of the previous attempt\n${input.feedback}`);
  return parts.join('\n\n') + '\n';
}
