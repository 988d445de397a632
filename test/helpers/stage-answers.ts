import { demoStages } from './env';

/** Answers a model gives each stage of the sample repo's "Add slugify" intent, valid as Warden reads them. */

/** A JSON block at the end of an answer, as triage and review end theirs. */
export const fencedJson = (value: unknown): string => `\n\`\`\`json\n${JSON.stringify(value)}\n\`\`\`\n`;

export const TRIAGE_ANSWER = `Adds slugify to lib/strings.js.${fencedJson({ risk: 'LOW', confidence: 0.9, affectedPaths: ['lib/strings.js'], rationale: 'one pure function', predicted: { files: 1, lines: 12 } })}`;
export const REVIEW_ANSWER = `APPROVE${fencedJson({ verdict: 'APPROVE', summary: 'matches the design', findings: [], scores: { strategicAlignment: 5, autonomyAppropriateness: 4, outputQuality: 4, resourceEfficiency: 4, learningApplication: 4 } })}`;
/** lib/strings.js with slugify, as the demo's passing impl attempt writes it. */
export const GOOD_FILE = String((demoStages().impl![1]!.edits as Array<{ content: string }>)[0]!.content);
/** An impl answer in edit blocks that writes GOOD_FILE. */
export const IMPL_ANSWER = `slugify lower-cases, then dashes.\n\n\`\`\`file:lib/strings.js\n${GOOD_FILE}\`\`\`\n`;
