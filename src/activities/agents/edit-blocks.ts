import { existsSync, lstatSync, realpathSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../../shared/errors';
import { pathAllowed } from '../../shared/glob';

/**
 * Edits an HTTP model proposes for impl, applied by Warden itself:
 *
 * - whole file:    ```file:lib/strings.js            (the fence holds the new content)
 * - search/replace: a line with the path, then
 *                  <<<<<<< SEARCH / old lines / ======= / new lines / >>>>>>> REPLACE
 *
 * Every path is checked before anything is written: inside the worktree (no `..`, no absolute
 * path, no symlink out, nothing under .git) and inside the intent's declared paths. One bad path
 * refuses the whole answer, and a SEARCH text that is not found exactly once refuses it too.
 */
export type Edit = { readonly kind: 'file'; readonly path: string; readonly content: string } | { readonly kind: 'replace'; readonly path: string; readonly search: string; readonly replace: string };

const FILE_BLOCK = /^```file:([^\n`]+)\n([\s\S]*?)^```[ \t]*$/gm;
const REPLACE_BLOCK = /^([^\n<>=`]+?)[ \t]*\n<{7} SEARCH\n([\s\S]*?)^={7}\n([\s\S]*?)^>{7} REPLACE[ \t]*$/gm;

export function parseEdits(answer: string): Edit[] {
  const edits: Array<Edit & { at: number }> = [];
  for (const m of answer.matchAll(FILE_BLOCK)) edits.push({ kind: 'file', path: m[1]!.trim(), content: m[2]!, at: m.index ?? 0 });
  for (const m of answer.matchAll(REPLACE_BLOCK)) {
    edits.push({ kind: 'replace', path: m[1]!.trim().replace(/^`|`$/g, ''), search: m[2]!, replace: m[3]!, at: m.index ?? 0 });
  }
  return edits.sort((a, b) => a.at - b.at).map(({ at: _at, ...edit }) => edit);
}

/** Why `file` may not be written, or undefined when it may. */
export function refusePath(worktreePath: string, declaredPaths: readonly string[], file: string): string | undefined {
  if (path.isAbsolute(file) || file.split(/[\\/]/).includes('..')) return `${file} is not a path inside the worktree`;
  const normalized = path.posix.normalize(file.replace(/\\/g, '/'));
  if (normalized === '.git' || normalized.startsWith('.git/')) return `${file} is git's own state`;
  if (!pathAllowed(declaredPaths, normalized)) return `${file} is outside the declared paths (${declaredPaths.join(', ')})`;
  // A symlink on the way (or the file itself) must not lead out of the worktree.
  const root = realpathSync(worktreePath);
  let probe = path.join(worktreePath, normalized);
  while (!existsSync(probe) && probe !== worktreePath) probe = path.dirname(probe);
  const real = realpathSync(probe);
  if (real !== root && !real.startsWith(root + path.sep)) return `${file} leads out of the worktree`;
  const target = path.join(worktreePath, normalized);
  if (existsSync(target) && lstatSync(target).isSymbolicLink()) return `${file} is a symlink`;
  return undefined;
}

/** Checks every edit, then applies them in order; returns the files written. */
export async function applyEdits(worktreePath: string, declaredPaths: readonly string[], edits: readonly Edit[]): Promise<string[]> {
  if (edits.length === 0) {
    throw ApplicationFailure.create({ type: FailureType.AgentFailed, message: 'the answer holds no edit block (```file:PATH or SEARCH/REPLACE): nothing was changed' });
  }
  const refusals = [...new Set(edits.map((e) => refusePath(worktreePath, declaredPaths, e.path)).filter((r): r is string => r !== undefined))];
  if (refusals.length > 0) {
    throw ApplicationFailure.create({ type: FailureType.PathOutsideWorktree, message: `edits refused before anything was written: ${refusals.join('; ')}`, nonRetryable: true });
  }
  // Work out every new content first, so a SEARCH that fails leaves all files untouched.
  const contents = new Map<string, string>();
  for (const edit of edits) {
    const file = path.join(worktreePath, edit.path);
    if (edit.kind === 'file') {
      contents.set(file, edit.content);
      continue;
    }
    const current = contents.get(file) ?? (existsSync(file) ? await readFile(file, 'utf8') : '');
    const first = current.indexOf(edit.search);
    if (first < 0 || current.indexOf(edit.search, first + 1) >= 0) {
      throw ApplicationFailure.create({
        type: FailureType.AgentFailed,
        message: `the SEARCH text for ${edit.path} is ${first < 0 ? 'not in the file' : 'in the file more than once'}: nothing was changed`,
      });
    }
    contents.set(file, current.slice(0, first) + edit.replace + current.slice(first + edit.search.length));
  }
  for (const [file, content] of contents) {
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, content);
  }
  return [...contents.keys()].map((f) => path.relative(worktreePath, f));
}
