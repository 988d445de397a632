/**
 * Test tampering check: Warden trusts a change because the repo's tests pass, and an agent that
 * cannot make the tests pass can make them pass by weakening them. Compared to where the intent
 * branch left the base branch, this finds test files deleted, tests skipped, focused (`.only`
 * silently skips the rest) or marked as expected failures, and test cases or assertions removed.
 *
 * Not workflow code (git, file system). Patterns cover JavaScript/TypeScript (jest, mocha,
 * vitest, node:test), Python (pytest, unittest) and Go; comments are stripped before counting,
 * so commenting a test out counts as removing it.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../shared/errors';
import { isTestFile, matchGlob } from '../shared/glob';
import { mergeBaseOf } from './change-inspection';
import { gitRaw, parseNameStatus, readBlobs, type NameStatus } from './git';

export type TamperKind = 'test-deleted' | 'test-skipped' | 'test-focused' | 'tests-removed' | 'assertions-removed';

export interface TamperFinding {
  readonly kind: TamperKind;
  /** Relative to the worktree root. */
  readonly path: string;
  /** 1-based line in the current file, when the finding points at one. */
  readonly line?: number;
  readonly detail: string;
}

/** Counts of one test file's content. */
export interface TestFileProfile {
  readonly tests: number;
  readonly assertions: number;
  /** Lines (trimmed) that skip or disable tests, with their line numbers. */
  readonly skips: readonly { readonly line: number; readonly text: string }[];
  readonly focused: readonly { readonly line: number; readonly text: string }[];
}

/** Warden's own records are not tests, whatever their names. */
const IGNORED = ['docs/lineage/**'];

/**
 * Compares the worktree (commits, uncommitted edits and untracked files) with the merge base of
 * HEAD and `baseBranchRef` (e.g. `refs/heads/main`), so tests added to the base branch by others
 * since the intent started are not mistaken for deletions. Renamed test files are compared with
 * their old selves. Returns findings in path order; an empty list means no tampering seen.
 * `knownMergeBase`: that merge base, `knownUntracked`: the untracked files, and `knownDiff`: the
 * worktree's diff from the merge base with renames found (`git diff --name-status -M`), when the
 * caller found them already in the same activity call with nothing run in the worktree since.
 */
export async function detectTestTampering(
  worktreePath: string,
  baseBranchRef: string,
  knownMergeBase?: string,
  knownUntracked?: readonly string[],
  knownDiff?: readonly NameStatus[],
): Promise<TamperFinding[]> {
  const base = knownMergeBase ?? (await mergeBaseOf({ worktreePath, baseRef: baseBranchRef }));
  const changes = await changedTestFiles(worktreePath, base, knownUntracked, knownDiff);
  const findings: TamperFinding[] = [];
  const currents = new Map<TestChange, string>();
  for (const change of changes) {
    if (change.status === 'D') continue;
    const current = await readFile(path.join(worktreePath, change.path), 'utf8').catch(() => undefined);
    if (current !== undefined) currents.set(change, current);
  }
  // Every test file's version at the base, from one git process.
  const atBase = await readBlobs(worktreePath, [...currents.keys()].filter((change) => change.oldPath).map((change) => `${base}:${change.oldPath}`));
  for (const change of changes) {
    if (change.status === 'D') {
      findings.push({ kind: 'test-deleted', path: change.oldPath, detail: `test file ${change.oldPath} was deleted` });
      continue;
    }
    const current = currents.get(change);
    if (current === undefined) continue;
    const before = change.oldPath ? atBase.get(`${base}:${change.oldPath}`) : undefined;
    findings.push(...compareTestFile(change.path, before, current));
  }
  return findings;
}

/**
 * Findings for one test file: `before` is its content at the base (undefined for a new file).
 * Pure; exported for callers that already hold both versions.
 */
export function compareTestFile(filePath: string, before: string | undefined, after: string): TamperFinding[] {
  const language = testLanguage(filePath);
  const now = profileTestFile(after, language);
  const old = before === undefined ? { tests: 0, assertions: 0, skips: [], focused: [] } : profileTestFile(before, language);
  const out: TamperFinding[] = [];
  for (const s of newLines(old.skips, now.skips)) {
    out.push({ kind: 'test-skipped', path: filePath, line: s.line, detail: `a test was skipped or disabled: ${s.text.slice(0, 120)}` });
  }
  for (const f of newLines(old.focused, now.focused)) {
    out.push({ kind: 'test-focused', path: filePath, line: f.line, detail: `a test was focused, so the others do not run: ${f.text.slice(0, 120)}` });
  }
  if (now.tests < old.tests) {
    out.push({ kind: 'tests-removed', path: filePath, detail: `test cases went from ${old.tests} to ${now.tests}` });
  }
  if (now.assertions < old.assertions) {
    out.push({ kind: 'assertions-removed', path: filePath, detail: `assertions went from ${old.assertions} to ${now.assertions}` });
  }
  return out;
}

export type TestLanguage = 'js' | 'python' | 'go' | 'other';

function testLanguage(filePath: string): TestLanguage {
  const ext = path.extname(filePath).toLowerCase();
  if (['.ts', '.tsx', '.mts', '.cts', '.js', '.jsx', '.mjs', '.cjs'].includes(ext)) return 'js';
  if (ext === '.py') return 'python';
  if (ext === '.go') return 'go';
  return 'other';
}

const PATTERNS: Record<TestLanguage, { tests: RegExp; assertions: RegExp; skips: RegExp; focused?: RegExp }> = {
  js: {
    // `it(`, `test.skip(`, `it.each(table)(`, `xit(`; not `regex.test(`
    tests: /(?<![.\w$])(?:x?it|x?test|x?specify|fit)(?:\.(?:skip|only|todo|concurrent|failing))?(?:\.each\s*(?:\([^)]*\)|`[^`]*`))?\s*\(/g,
    assertions: /(?<![.\w$])expect\s*\(|(?<![.\w$])expect\.assertions\s*\(|\bassert(?:\.\w+)?\s*\(|\bt\.(?:is|not|deepEqual|notDeepEqual|true|false|truthy|falsy|throws|throwsAsync|equal|ok|same|match|regex)\s*\(|\.should\b/g,
    skips: /\b(?:it|test|describe|context|suite|specify)\.(?:skip|todo)\b|\b(?:xit|xtest|xdescribe|xcontext|xspecify)\s*\(|\bthis\.skip\s*\(|\bt\.skip\s*\(|\bpending\s*\(|\{\s*skip\s*:\s*true/,
    focused: /\b(?:it|test|describe|context|suite|specify)\.only\b|\b(?:fit|fdescribe)\s*\(/,
  },
  python: {
    tests: /^\s*(?:async\s+)?def\s+test\w*\s*\(/gm,
    assertions: /^\s*assert\b|\bself\.assert\w*\s*\(|\bpytest\.(?:raises|warns|approx)\s*\(|\bself\.fail\s*\(/gm,
    skips: /@pytest\.mark\.(?:skip|skipif|xfail)\b|@unittest\.(?:skip|skipIf|skipUnless|expectedFailure)\b|\bpytest\.(?:skip|xfail)\s*\(|\bself\.skipTest\s*\(|\braise\s+unittest\.SkipTest\b|\braise\s+SkipTest\b/,
  },
  go: {
    tests: /^func\s+Test\w*\s*\(/gm,
    assertions: /\bt\.(?:Error|Errorf|Fatal|Fatalf|Fail|FailNow)\s*\(|\b(?:assert|require)\.\w+\s*\(/g,
    skips: /\bt\.(?:Skip|Skipf|SkipNow)\s*\(/,
  },
  other: { tests: /$^/g, assertions: /$^/g, skips: /$^/ },
};

/** Counts tests and assertions and lists skip/focus lines, comments excluded. */
export function profileTestFile(content: string, language: TestLanguage = 'js'): TestFileProfile {
  const code = stripComments(content, language, { blankStrings: true });
  const p = PATTERNS[language];
  const original = content.split('\n');
  const skips: { line: number; text: string }[] = [];
  const focused: { line: number; text: string }[] = [];
  code.split('\n').forEach((text, i) => {
    const line = { line: i + 1, text: (original[i] ?? text).trim() };
    if (p.skips.test(text)) skips.push(line);
    if (p.focused?.test(text)) focused.push(line);
  });
  return { tests: count(code, p.tests), assertions: count(code, p.assertions), skips, focused };
}

function count(text: string, re: RegExp): number {
  return [...text.matchAll(re)].length;
}

/** Entries of `now` whose text is not in `before` (as many times): new skips, not old ones that moved. */
function newLines<T extends { readonly text: string }>(before: readonly T[], now: readonly T[]): T[] {
  const left = new Map<string, number>();
  for (const b of before) left.set(b.text, (left.get(b.text) ?? 0) + 1);
  return now.filter((n) => {
    const k = left.get(n.text) ?? 0;
    if (k > 0) {
      left.set(n.text, k - 1);
      return false;
    }
    return true;
  });
}

/**
 * Blanks comments (keeping line breaks, so line numbers hold). Strings are kept, or with
 * `blankStrings` emptied to their quotes (line breaks kept), so `'// not a comment'` is no
 * comment and `"assert x"` no assertion. Approximate for JS regex literals, enough here.
 */
export function stripComments(content: string, language: TestLanguage, options: { readonly blankStrings?: boolean } = {}): string {
  let out = '';
  const hash = language === 'python';
  const slashes = language === 'js' || language === 'go';
  for (let i = 0; i < content.length; i++) {
    const c = content[i]!;
    if (c === '"' || c === "'" || (c === '`' && language !== 'python')) {
      const triple = hash && content.startsWith(c.repeat(3), i);
      const quote = triple ? c.repeat(3) : c;
      let j = i + quote.length;
      while (j < content.length && !content.startsWith(quote, j)) {
        if (content[j] === '\\') j++;
        else if (content[j] === '\n' && !triple && c !== '`') break;
        j++;
      }
      const end = Math.min(content.length, content.startsWith(quote, j) ? j + quote.length : j);
      const literal = content.slice(i, end);
      out += options.blankStrings ? quote + literal.slice(quote.length, Math.max(quote.length, literal.length - quote.length)).replace(/[^\n]/g, '') + (end > i + quote.length ? quote : '') : literal;
      i = end - 1;
      continue;
    }
    if ((hash && c === '#') || (slashes && c === '/' && content[i + 1] === '/')) {
      const end = content.indexOf('\n', i);
      i = (end < 0 ? content.length : end) - 1;
      continue;
    }
    if (slashes && c === '/' && content[i + 1] === '*') {
      const end = content.indexOf('*/', i + 2);
      const stop = end < 0 ? content.length : end + 2;
      out += content.slice(i, stop).replace(/[^\n]/g, '');
      i = stop - 1;
      continue;
    }
    out += c;
  }
  return out;
}

interface TestChange {
  /** A = added, M = modified, D = deleted, R = renamed, U = untracked. */
  readonly status: 'A' | 'M' | 'D' | 'R' | 'U';
  /** Current path (for D: the old one). */
  readonly path: string;
  /** Path at the base, if the file existed there. */
  readonly oldPath: string;
}

async function changedTestFiles(worktreePath: string, base: string, knownUntracked?: readonly string[], knownDiff?: readonly NameStatus[]): Promise<TestChange[]> {
  let entries = knownDiff;
  if (!entries) {
    const diff = await gitRaw(worktreePath, ['diff', '--name-status', '-z', '-M', '--no-ext-diff', base]);
    if (diff.code !== 0) {
      throw ApplicationFailure.create({ type: FailureType.GitFailed, message: `git diff ${base} failed in ${worktreePath}: ${diff.stderr.trim()}` });
    }
    entries = parseNameStatus(diff.stdout);
  }
  const out: TestChange[] = [];
  for (const { code, path: file, from } of entries) {
    if (from !== undefined) {
      if (code.startsWith('C')) {
        if (relevant(file)) out.push({ status: 'A', path: file, oldPath: '' });
      } else if (relevant(from) && !relevant(file)) out.push({ status: 'D', path: from, oldPath: from });
      else if (relevant(file)) out.push({ status: 'R', path: file, oldPath: relevant(from) ? from : '' });
      continue;
    }
    if (!relevant(file)) continue;
    const status = code.startsWith('D') ? 'D' : code.startsWith('A') ? 'A' : 'M';
    out.push({ status, path: file, oldPath: status === 'A' ? '' : file });
  }
  const untracked = knownUntracked ?? (await gitRaw(worktreePath, ['ls-files', '-z', '--others', '--exclude-standard'])).stdout.split('\0').filter(Boolean);
  for (const file of untracked) {
    if (relevant(file) && !out.some((c) => c.path === file)) out.push({ status: 'U', path: file, oldPath: '' });
  }
  return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** Source files: a deleted test data file (`test/fixtures/x.json`) is not a deleted test. */
const CODE_EXTENSIONS = new Set(['.ts', '.tsx', '.mts', '.cts', '.js', '.jsx', '.mjs', '.cjs', '.py', '.go', '.rb', '.java', '.kt', '.rs', '.cs', '.php', '.swift', '.scala', '.ex', '.exs']);

function relevant(file: string): boolean {
  return isTestFile(file) && !IGNORED.some((p) => matchGlob(p, file)) && CODE_EXTENSIONS.has(path.extname(file).toLowerCase());
}
