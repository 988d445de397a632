import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { worktreePathFor } from '../activities/worktree';
import { activeLineageDir, doneLineageDir } from '../shared/ids';

export interface PromptFile {
  readonly name: string;
  readonly path: string;
  readonly content: string;
}

/**
 * The exact prompts of every attempt of an intent, from its lineage: the worktree while it runs,
 * the repository once merged, or the lineage copy Warden keeps for intents not merged.
 */
export function findPrompts(intentId: string, repoPath: string, roots: { readonly worktreeRoot: string; readonly lineageRoot: string }): { dir?: string; prompts: PromptFile[] } {
  const candidates = [
    path.join(worktreePathFor(roots.worktreeRoot, repoPath, intentId), activeLineageDir(intentId)),
    path.join(repoPath, doneLineageDir(intentId)),
    path.join(roots.lineageRoot, intentId),
  ];
  const dir = candidates.find((d) => existsSync(d));
  if (!dir) return { prompts: [] };
  const prompts = readdirSync(dir)
    .filter((n) => n.endsWith('.prompt.md'))
    .sort()
    .map((name) => ({ name, path: path.join(dir, name), content: readFileSync(path.join(dir, name), 'utf8') }));
  return { dir, prompts };
}
