/**
 * Glob matching for repository-relative paths (`src/api/upload.ts`), used by the declared path
 * check and the test-file patterns. Matching itself is picomatch's; this module fixes the
 * options and adds the two rules that are Warden's own:
 * - a pattern with no glob character also matches everything under it as a folder (`docs`
 *   matches `docs/a.md`), and so does one ending in `/`;
 * - a leading `./` or `/` is ignored, and a leading `!` negates in {@link pathAllowed} only.
 *
 * Syntax (picomatch): `*` and `?` stay inside one segment; `**` as a whole segment is any number
 * of segments, zero included; `[abc]`, `[a-z]`, `[!abc]`; `{a,b}` alternatives, nestable.
 * Dot files are matched like any other (`**` matches `.github/workflows/ci.yml`): these globs
 * say what an agent may touch, and `**` means everything.
 *
 * Parentheses, `|`, `+` and `@` are literal path characters here (Next.js route groups such as
 * `app/(auth)/page.tsx` are real paths), while picomatch reads them as regex groups and extglobs
 * even with `noextglob`; so they are escaped before picomatch compiles the pattern.
 *
 * NOT workflow-safe: picomatch is a Node package. Nothing under src/workflows imports this module.
 */
import picomatch from 'picomatch';

const OPTIONS: picomatch.PicomatchOptions = {
  dot: true,
  // `[!a]` is a negated set, as in the shell (picomatch reads it so only with `posix`).
  posix: true,
  noextglob: true,
  // Negation is pathAllowed's job, per pattern list.
  nonegate: true,
};

const cache = new Map<string, readonly RegExp[]>();

/** True if `filePath` (relative, `/`-separated) matches `pattern`. */
export function matchGlob(pattern: string, filePath: string): boolean {
  const normalized = normalizeRelative(filePath);
  return compiled(pattern).some((re) => re.test(normalized));
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

/**
 * Why `pattern` cannot be one of an intent's path globs (undefined when it can): it must name
 * paths inside the repository, relative to its root, and compile. picomatch reads an unclosed
 * `[` or `{` as literal text by default, so a typo would match nothing and fail the intent only
 * at its first stage; here it is refused.
 */
export function globProblem(pattern: string): string | undefined {
  const body = pattern.startsWith('!') ? pattern.slice(1) : pattern;
  if (body.trim() === '') return 'is empty';
  const normalized = body.replace(/\\/g, '/');
  if (normalized.startsWith('/') || /^[A-Za-z]:\//.test(normalized) || normalized.startsWith('~')) return 'is an absolute path: paths are relative to the repository root';
  if (normalized.split('/').includes('..')) return 'reaches outside the repository (..)';
  try {
    for (const p of picomatchPatterns(body)) picomatch.makeRe(p, { ...OPTIONS, strictBrackets: true });
  } catch (error) {
    return `is not a valid glob (${(error as Error).message.replace(/\s*-\s*use .*$/, '')})`;
  }
  return undefined;
}

/**
 * Compiled with `makeRe`, not `picomatch()`: its matcher also accepts a path equal to the pattern
 * text, so `src/*.ts` would allow a file literally named `src/*.ts`.
 */
function compiled(pattern: string): readonly RegExp[] {
  let regexps = cache.get(pattern);
  if (!regexps) {
    regexps = picomatchPatterns(pattern).map((p) => picomatch.makeRe(p, OPTIONS));
    if (cache.size > 1000) cache.clear();
    cache.set(pattern, regexps);
  }
  return regexps;
}

/** The pattern as picomatch should see it, plus `<folder>/**` when it names a folder. */
function picomatchPatterns(pattern: string): string[] {
  const normalized = normalizeRelative(pattern).replace(/^\/+/, '');
  const folder = normalized.endsWith('/');
  const body = escapeLiteralCharacters(folder ? normalized.slice(0, -1) : normalized);
  if (body === '') return ['**']; // "/" or "" alone: everything
  const literal = !/[*?[]/.test(body.replace(/\\./g, ''));
  return literal || folder ? [body, `${body}/**`] : [body];
}

/** Escapes `( ) | + @` unless already escaped; see the module comment. */
function escapeLiteralCharacters(pattern: string): string {
  return pattern.replace(/\\.|[()|+@]/g, (m) => (m.length === 2 ? m : `\\${m}`));
}

function normalizeRelative(p: string): string {
  let out = p.replace(/\\/g, '/');
  while (out.startsWith('./')) out = out.slice(2);
  return out.replace(/\/{2,}/g, '/');
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
