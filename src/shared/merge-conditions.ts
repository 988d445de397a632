/**
 * Conditions set at the gates right before merge (security, production, merge) have no agent
 * stage after them to honour them: they are checks Warden runs before it merges, and a condition
 * it cannot check is refused when it is given. Pure: the workflow's gate keeper parses them too.
 *
 * - `run: COMMAND`: the command passes (exit 0) in the intent's worktree, confined like the tests;
 * - `max-files: N`, `max-lines: N`: the change against the base branch stays within N;
 * - `only-paths: GLOB, GLOB…`: every changed file matches one of the globs.
 */
export type MergeCondition =
  | { readonly kind: 'run'; readonly command: string }
  | { readonly kind: 'max-files' | 'max-lines'; readonly limit: number }
  | { readonly kind: 'only-paths'; readonly globs: readonly string[] };

export const MERGE_CONDITION_FORMS = 'run: COMMAND, max-files: N, max-lines: N or only-paths: GLOB, GLOB…';

/** The check `text` names, or undefined when it is none of the forms. */
export function parseMergeCondition(text: string): MergeCondition | undefined {
  const match = /^\s*(run|max-files|max-lines|only-paths)\s*:\s*(.+?)\s*$/s.exec(text);
  if (!match) return undefined;
  const [, kind, value] = match as unknown as [string, string, string];
  if (kind === 'run') return { kind, command: value };
  if (kind === 'only-paths') {
    const globs = value.split(',').map((g) => g.trim()).filter(Boolean);
    return globs.length > 0 ? { kind, globs } : undefined;
  }
  const limit = Number(value);
  return Number.isInteger(limit) && limit >= 0 ? { kind: kind as 'max-files' | 'max-lines', limit } : undefined;
}

/** The gates whose conditions are checked before merge rather than carried into a prompt. */
export const MERGE_CHECK_GATES: readonly string[] = ['security', 'production', 'merge'];
