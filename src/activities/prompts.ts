import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Intent } from '../shared/intent';
import type { AgentStage } from '../shared/stages';

/** An earlier stage's artifact, carried into later prompts so every step works from facts. */
export interface PriorArtifact {
  readonly name: string;
  readonly content: string;
}

/** Folder of the per-stage task texts (`triage.md` … `review.md`): edit them to change what agents are asked. */
export const PROMPTS_DIR = path.join(__dirname, 'prompts');

const tasks = new Map<string, string>();
/** The task text of `stage` (or of `design-review`, the review of an lld or spec), read once from PROMPTS_DIR. */
export function stageTask(stage: AgentStage | 'design-review'): string {
  let task = tasks.get(stage);
  if (task === undefined) {
    task = readFileSync(path.join(PROMPTS_DIR, `${stage}.md`), 'utf8').trim();
    tasks.set(stage, task);
  }
  return task;
}

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
  /** The prompt asks to review the document this attempt of `stage` wrote (design-review.md). */
  readonly designReview?: boolean;
}): string {
  const { intent, stage, attempt } = input;
  const parts = [
    input.designReview ? `# Warden: design review of ${stage} (attempt ${attempt})` : `# Warden: ${stage} (attempt ${attempt})`,
    `## Goal\n${intent.goal}`,
    `## Declared paths (the only files you may change)\n${intent.paths.map((p) => `- ${p}`).join('\n')}`,
    `## Task\n${stageTask(input.designReview ? 'design-review' : stage)}`,
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

/**
 * The part of an impl prompt that tells an agent able to run commands how to run the tests
 * (`run-tests.md`, with the repository's test command in it); `cli-runs` is for a CLI that runs
 * them after each edit on its own (aider), which the text then says instead.
 */
export function testsSection(command: string, how: 'agent-runs' | 'cli-runs'): string {
  const text = readFileSync(path.join(PROMPTS_DIR, how === 'agent-runs' ? 'run-tests.md' : 'tests-run-for-you.md'), 'utf8').trim();
  return `## The tests\n${text.split('{testCommand}').join(`\`${command}\``)}\n`;
}
