import { pathAllowed } from '../shared/glob';
import { requirementTables } from './test-plan';

/**
 * Mechanical checks of the design documents, before anything is built on them:
 * - the LLD has its required sections, and every path it names exists or is marked new, and
 *   lies within the intent's declared paths (no phantom files, nothing out of bounds);
 * - the spec maps every requirement to a named test in a named file (its test plan).
 * Pure: the caller says which paths exist.
 */

export interface DocumentCheck {
  readonly ok: boolean;
  /** One line per problem, written for the agent's next attempt. */
  readonly errors: readonly string[];
}

/** Required LLD sections, each with the headings that count for it. */
export const LLD_SECTIONS: ReadonlyArray<{ readonly name: string; readonly headings: RegExp }> = [
  { name: 'Files', headings: /^(files?|files to change|changes|changed files|file changes)\b/i },
  { name: 'Tests', headings: /^(tests?|testing|test plan|verification)\b/i },
];

interface Section {
  readonly heading: string;
  readonly body: string[];
}

function sections(markdown: string): Section[] {
  const found: Section[] = [];
  for (const line of markdown.split('\n')) {
    const heading = /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line);
    if (heading) found.push({ heading: heading[1]!, body: [] });
    else found.at(-1)?.body.push(line);
  }
  return found;
}

/** A path-like token: in backticks, or a bare token with a slash or an extension. */
function pathsIn(line: string): string[] {
  const ticked = [...line.matchAll(/`([^`\s]+)`/g)].map((m) => m[1]!);
  const leading = /^\s*[-*+]\s+\**([^\s:,(*`]+)/.exec(line)?.[1];
  const candidates = leading ? [leading, ...ticked] : ticked;
  return candidates
    .map((p) => p.replace(/^\.\//, '').replace(/[.,;:]+$/, ''))
    .filter((p) => /^[\w.@-]+(\/[\w.@-]+)*$/.test(p) && (p.includes('/') || /\.[A-Za-z0-9]+$/.test(p)) && !/\(\)$/.test(p));
}

/** Whether a line marks its file as new: "(new)", "new file", "create". */
const NEW_MARK = /\(new\)|\bnew file\b|\bcreates?\b|\badd(s|ed)? (a )?new\b/i;

export function checkLld(markdown: string, opts: { readonly declaredPaths: readonly string[]; readonly exists: (path: string) => boolean }): DocumentCheck {
  const errors: string[] = [];
  const all = sections(markdown);
  for (const required of LLD_SECTIONS) {
    if (!all.some((s) => required.headings.test(s.heading.trim()))) {
      errors.push(`missing section "${required.name}": add a "## ${required.name}" heading`);
    }
  }
  const files = all.find((s) => LLD_SECTIONS[0]!.headings.test(s.heading.trim()));
  if (files) {
    const named = new Set<string>();
    for (const line of files.body) {
      for (const file of pathsIn(line)) {
        if (named.has(file)) continue;
        named.add(file);
        if (!pathAllowed(opts.declaredPaths, file)) {
          errors.push(`${file} is outside the declared paths (${opts.declaredPaths.join(', ')})`);
        } else if (!opts.exists(file) && !NEW_MARK.test(line)) {
          errors.push(`${file} does not exist: mark it "(new)" if the change creates it, or name the right file`);
        }
      }
    }
    if (named.size === 0) errors.push('the Files section names no file: list each file to change, one per line');
  }
  return { ok: errors.length === 0, errors };
}

/**
 * The spec's requirements and their tests: its test plan (see test-plan.ts), rows of a table
 * whose header has a "Requirement", a "Test" and a "File" column. Each requirement needs a test,
 * named in backticks as the runner prints it, and the file that holds it.
 */
export function checkSpec(markdown: string): DocumentCheck {
  const errors: string[] = [];
  let requirements = 0;
  for (const { columns, rows } of requirementTables(markdown)) {
    if (columns.file < 0) errors.push('the requirement table has no "File" column: name the test file of each test');
    for (const row of rows) {
      requirements += 1;
      const name = row[columns.requirement] ?? '';
      if (!name) errors.push(`row ${requirements} of the requirement table names no requirement`);
      else if (!(row[columns.test] ?? '').trim()) errors.push(`requirement "${name}" is mapped to no test case`);
      else if (columns.file >= 0 && !(row[columns.file] ?? '').trim()) errors.push(`requirement "${name}" names no test file`);
    }
  }
  if (requirements === 0) {
    errors.push('no requirement is mapped to a test: add a table with "Requirement", "Test" and "File" columns, one row per requirement');
  }
  return { ok: errors.length === 0, errors };
}
