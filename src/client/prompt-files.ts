import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { lineageRefFiles, readLineageRefFile } from '../activities/lineage-ref';
import { worktreePathFor } from '../activities/worktree';
import { activeLineageDir, doneLineageDir, lineageRefFor } from '../shared/ids';

export interface PromptFile {
  readonly name: string;
  readonly path: string;
  readonly content: string;
}

const isPrompt = (name: string): boolean => name.endsWith('.prompt.md');

/**
 * The exact prompts of every attempt of an intent, from its lineage: the worktree while it runs;
 * once it has ended, the repository's done/ folder (`lineage.location: tree`), the repository's
 * lineage ref, or the lineage copy Warden keeps. `dir` says which.
 */
export async function findPrompts(intentId: string, repoPath: string, roots: { readonly worktreeRoot: string; readonly lineageRoot: string }): Promise<{ dir?: string; prompts: PromptFile[] }> {
  const running = path.join(worktreePathFor(roots.worktreeRoot, repoPath, intentId), activeLineageDir(intentId));
  const inTree = path.join(repoPath, doneLineageDir(intentId));
  for (const dir of [running, inTree]) if (existsSync(dir)) return { dir, prompts: promptsIn(dir) };
  const inRef = (await lineageRefFiles(repoPath, intentId))?.filter(isPrompt).sort();
  if (inRef) {
    const ref = lineageRefFor(intentId);
    const prompts = await Promise.all(inRef.map(async (name) => ({ name, path: `${ref}:${name}`, content: await readLineageRefFile(repoPath, intentId, name) })));
    return { dir: `${ref} in ${repoPath}`, prompts };
  }
  const copy = path.join(roots.lineageRoot, intentId);
  return existsSync(copy) ? { dir: copy, prompts: promptsIn(copy) } : { prompts: [] };
}

function promptsIn(dir: string): PromptFile[] {
  return readdirSync(dir)
    .filter(isPrompt)
    .sort()
    .map((name) => ({ name, path: path.join(dir, name), content: readFileSync(path.join(dir, name), 'utf8') }));
}
