import { existsSync } from 'node:fs';
import { cp, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { activeLineageDir, doneLineageDir } from '../shared/ids';
import { STAGES, type AgentStage } from '../shared/stages';
import type { PriorArtifact } from './prompts';

/**
 * File name of a stage's artifact in the lineage folder, ordered by stage:
 * `02-lld.md`, `04-impl-attempt-2.md`. `suffix` names companions (`.prompt.md`, `-tests.log`).
 */
export function artifactName(stage: AgentStage, attempt: number, suffix = '.md'): string {
  const order = String(STAGES.indexOf(stage) + 1).padStart(2, '0');
  const withAttempt = stage === 'impl' || attempt > 1 ? `-attempt-${attempt}` : '';
  return `${order}-${stage}${withAttempt}${suffix}`;
}

/** Writes a lineage file; returns its path relative to the worktree. */
export async function writeLineageFile(worktreePath: string, intentId: string, name: string, content: string): Promise<string> {
  const relative = path.join(activeLineageDir(intentId), name);
  await mkdir(path.join(worktreePath, activeLineageDir(intentId)), { recursive: true });
  await writeFile(path.join(worktreePath, relative), content);
  return relative;
}

/** Earlier stages' artifacts (not prompts or logs), oldest first, for the next prompt. */
export async function readPriorArtifacts(worktreePath: string, intentId: string, before: AgentStage): Promise<PriorArtifact[]> {
  const dir = path.join(worktreePath, activeLineageDir(intentId));
  if (!existsSync(dir)) return [];
  const limit = STAGES.indexOf(before) + 1;
  const names = (await readdir(dir))
    .filter((name) => /^\d\d-[a-z]+(-attempt-\d+)?\.md$/.test(name) && Number(name.slice(0, 2)) < limit)
    .sort();
  return Promise.all(names.map(async (name) => ({ name, content: await readFile(path.join(dir, name), 'utf8') })));
}

/** One artifact of the intent's active lineage, by file name (a design document under review). */
export async function readLineageArtifact(worktreePath: string, intentId: string, name: string): Promise<PriorArtifact> {
  return { name, content: await readFile(path.join(worktreePath, activeLineageDir(intentId), name), 'utf8') };
}

/** Moves lineage from active/ to done/ (idempotent); returns the done folder, relative. */
export async function archiveLineageFolder(worktreePath: string, intentId: string): Promise<string> {
  const active = path.join(worktreePath, activeLineageDir(intentId));
  const done = path.join(worktreePath, doneLineageDir(intentId));
  if (existsSync(active)) {
    await mkdir(path.dirname(done), { recursive: true });
    await rename(active, done);
  }
  return doneLineageDir(intentId);
}

/**
 * Copies the lineage folder `from` to `to` (the worker's copy, `<lineage root>/<id>`), replacing
 * an older copy; returns `to`, or undefined when there is nothing to copy or kept.
 */
export async function copyLineageFolder(from: string, to: string): Promise<string | undefined> {
  if (!existsSync(from)) return existsSync(to) ? to : undefined;
  await rm(to, { recursive: true, force: true });
  await mkdir(path.dirname(to), { recursive: true });
  await cp(from, to, { recursive: true });
  return to;
}

/** The latest attempt's artifact of `stage` in the lineage folder (relative to the worktree), if any. */
export async function latestArtifact(worktreePath: string, intentId: string, stage: AgentStage): Promise<string | undefined> {
  const dir = path.join(worktreePath, activeLineageDir(intentId));
  if (!existsSync(dir)) return undefined;
  const first = artifactName(stage, 1).replace(/\.md$/, '');
  const attemptOf = (name: string): number => Number(/-attempt-(\d+)\.md$/.exec(name)?.[1] ?? 1);
  const names = (await readdir(dir)).filter((name) => name === `${first}.md` || new RegExp(`^${first.replace(/-attempt-\d+$/, '')}-attempt-\\d+\\.md$`).test(name));
  const latest = names.sort((a, b) => attemptOf(a) - attemptOf(b)).at(-1);
  return latest ? path.join(activeLineageDir(intentId), latest) : undefined;
}
