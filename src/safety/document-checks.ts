import { pathAllowed } from '../shared/glob';

/**
 * Mechanical checks of the design documents, before anything is built on them:
 * - the LLD has its required sections, and every path it names exists or is marked new, and
 *   lies within the intent's declared paths (no phantom files, nothing out of bounds);
 * - the spec maps every requirement to at least one test case.
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
 * The spec's requirements and their tests: rows of a table whose header has a "Requirement"
 * column and a "Test" column, or list lines "requirement → test". Each requirement needs at
 * least one test case.
 */
export function checkSpec(markdown: string): DocumentCheck {
  const errors: string[] = [];
  let requirements = 0;
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const header = splitRow(lines[i]!);
    if (!header) continue;
    const req = header.findIndex((c) => /^requirements?\b/i.test(c));
    const test = header.findIndex((c) => /^tests?\b|^test cases?\b/i.test(c));
    if (req < 0 || test < 0) continue;
    for (let j = i + 1; j < lines.length; j++) {
      const row = splitRow(lines[j]!);
      if (!row) break;
      if (row.every((c) => /^:?-{2,}:?$/.test(c))) continue; // the |---|---| line
      requirements += 1;
      const name = row[req] ?? '';
      if (!name) errors.push(`row ${requirements} of the requirement table names no requirement`);
      else if (!(row[test] ?? '').trim()) errors.push(`requirement "${name}" is mapped to no test case`);
      i = j;
    }
  }
  for (const line of lines) {
    const arrow = /^\s*[-*+]\s+(.+?)\s*(?:→|->|=>)\s*(.*)$/.exec(line);
    if (!arrow) continue;
    requirements += 1;
    if (!arrow[2]!.trim()) errors.push(`requirement "${arrow[1]}" is mapped to no test case`);
  }
  if (requirements === 0) {
    errors.push('no requirement is mapped to a test: add a table with "Requirement" and "Test" columns (or lines "- requirement → test")');
  }
  return { ok: errors.length === 0, errors };
}

function splitRow(line: string): string[] | undefined {
  const trimmed = line.trim();
  if (!trimmed.startsWith('|')) return undefined;
  return trimmed
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split('|')
    .map((c) => c.trim());
}
