/**
 * A small glob matcher for repository-relative paths (`src/api/upload.ts`), used by the declared
 * path check and the test-file patterns. Workflow-safe: pure, no Node built-ins.
 *
 * Syntax:
 * - `*` any characters except `/`; `?` one character except `/`;
 * - `**` as a whole segment: any number of segments, zero included (`src/**` matches `src` and
 *   everything under it; `**\/x.ts` matches `x.ts` at any depth);
 * - `[abc]`, `[a-z]`, `[!abc]` one character of (not of) a set;
 * - `{a,b}` alternatives, nestable (`src/**\/*.{ts,tsx}`);
 * - a pattern with no glob character also matches everything under it as a folder (`docs`
 *   matches `docs/a.md`), and so does one ending in `/`;
 * - a leading `./` is ignored; a leading `!` negates (see {@link pathAllowed}).
 *
 * Dot files are matched like any other (`**` matches `.github/workflows/ci.yml`): these globs
 * say what an agent may touch, and `**` means everything.
 */

const cache = new Map<string, RegExp>();

/** True if `filePath` (relative, `/`-separated) matches `pattern`. */
export function matchGlob(pattern: string, filePath: string): boolean {
  return globToRegExp(pattern).test(normalizeRelative(filePath));
}

/**
 * True if `filePath` matches at least one positive pattern and no negative (`!`-prefixed) one.
 * With only negative patterns, everything they do not exclude is allowed.
 */
export function pathAllowed(patterns: readonly string[], filePath: string): boolean {
  const positive = patterns.filter((p) => !p.startsWith('!'));
  const negative = patterns.filter((p) => p.startsWith('!')).map((p) => p.slice(1));
  const included = positive.length === 0 ? true : positive.some((p) => matchGlob(p, filePath));
  return included && !negative.some((p) => matchGlob(p, filePath));
}

/** The compiled form of a pattern (anchored at both ends). Cached. */
export function globToRegExp(pattern: string): RegExp {
  let re = cache.get(pattern);
  if (!re) {
    const alternatives = expandBraces(normalizeRelative(pattern));
    re = new RegExp(`^(?:${alternatives.map(compileOne).join('|')})$`);
    if (cache.size > 1000) cache.clear();
    cache.set(pattern, re);
  }
  return re;
}

function normalizeRelative(p: string): string {
  let out = p.replace(/\\/g, '/');
  while (out.startsWith('./')) out = out.slice(2);
  return out.replace(/\/{2,}/g, '/');
}

/** `a{b,c{d,e}}f` → `abf`, `acdf`, `acef`. Unbalanced braces are literal. */
export function expandBraces(pattern: string): string[] {
  const open = findBraceOpen(pattern);
  if (open < 0) return [pattern];
  let depth = 0;
  const commas: number[] = [];
  let close = -1;
  for (let i = open; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\') {
      i++;
      continue;
    }
    if (c === '{') depth++;
    else if (c === '}') {
      depth--;
      if (depth === 0) {
        close = i;
        break;
      }
    } else if (c === ',' && depth === 1) commas.push(i);
  }
  if (close < 0 || commas.length === 0) {
    // not an alternation: keep the brace literally and expand what follows
    const head = pattern.slice(0, open + 1);
    return expandBraces(pattern.slice(open + 1)).map((rest) => `${head.slice(0, -1)}\\{${rest}`);
  }
  const before = pattern.slice(0, open);
  const after = pattern.slice(close + 1);
  const bounds = [open, ...commas, close];
  const out: string[] = [];
  for (let k = 0; k < bounds.length - 1; k++) {
    for (const inner of expandBraces(pattern.slice(bounds[k]! + 1, bounds[k + 1]))) {
      for (const rest of expandBraces(after)) out.push(before + inner + rest);
    }
  }
  return out;
}

function findBraceOpen(pattern: string): number {
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] === '\\') i++;
    else if (pattern[i] === '{') return i;
  }
  return -1;
}

const SPECIAL = /[*?[]/;

function compileOne(pattern: string): string {
  const folder = pattern.endsWith('/');
  const body = folder ? pattern.slice(0, -1) : pattern;
  if (body === '') return '.*'; // "/" or "" alone: everything
  const literal = !SPECIAL.test(body.replace(/\\./g, ''));
  const segments = body
    .replace(/^\/+/, '')
    .split('/')
    .filter((seg, i, all) => !(seg === '**' && all[i - 1] === '**'));
  let out = '';
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i]!;
    const last = i === segments.length - 1;
    if (seg === '**') {
      if (last) out += i === 0 ? '.*' : '(?:/.*)?';
      else out += i === 0 ? '(?:.*/)?' : '(?:/.*)?/';
      continue;
    }
    if (i > 0 && segments[i - 1] !== '**') out += '/';
    out += compileSegment(seg);
  }
  // a folder name (or `dir/`) covers what is under it
  if (literal || folder) out += '(?:/.*)?';
  return out;
}

function compileSegment(seg: string): string {
  let out = '';
  for (let i = 0; i < seg.length; i++) {
    const c = seg[i]!;
    if (c === '\\' && i + 1 < seg.length) {
      out += escapeRe(seg[++i]!);
    } else if (c === '*') {
      while (seg[i + 1] === '*') i++; // `**` inside a segment is `*`
      out += '[^/]*';
    } else if (c === '?') {
      out += '[^/]';
    } else if (c === '[') {
      const end = seg.indexOf(']', i + 2);
      if (end < 0) {
        out += '\\[';
        continue;
      }
      let set = seg.slice(i + 1, end);
      const negated = set.startsWith('!') || set.startsWith('^');
      if (negated) set = set.slice(1);
      out += `[${negated ? '^/' : ''}${set.replace(/[\\\]^]/g, (m) => `\\${m}`)}]`;
      i = end;
    } else {
      out += escapeRe(c);
    }
  }
  return out;
}

function escapeRe(c: string): string {
  return c.replace(/[.*+?^${}()|[\]\\/]/g, (m) => `\\${m}`);
}

/**
 * Where test files live, by the usual conventions of JavaScript/TypeScript (jest, mocha, node),
 * Python (pytest, unittest) and Go. Used by the anti-stub and test-tampering checks.
 */
export const TEST_FILE_PATTERNS: readonly string[] = [
  '**/*.test.*',
  '**/*.spec.*',
  '**/*_test.*',
  '**/test_*.py',
  '**/test/**',
  '**/tests/**',
  '**/__tests__/**',
  '**/spec/**',
];

/** True if `filePath` (relative, `/`-separated) looks like a test file. */
export function isTestFile(filePath: string): boolean {
  return TEST_FILE_PATTERNS.some((p) => matchGlob(p, filePath));
}
