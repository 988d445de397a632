/**
 * Anti-stub detector, behind the completeness gate: finds code that looks implemented but does
 * nothing, since a stub passes weak tests and reads as done — empty bodies, `throw new
 * Error('not implemented')`, `raise NotImplementedError`, `pass`/`...` bodies, trivial returns
 * (`return null`, `return None`, `return 0`, `return ''`)
 * from functions that should compute something, and to-do markers in comments (T-O-D-O, F-I-X-M-E,
 * H-A-C-K, X-X-X, spelled out here so this file does not flag itself).
 *
 * NOT workflow-safe: it uses the TypeScript compiler API (and {@link detectStubsInFiles} reads
 * files). Run it in activities or the CLI only.
 *
 * Languages: TypeScript and JavaScript through the TypeScript AST (`.ts .tsx .mts .cts .js .jsx
 * .mjs .cjs`); Python by patterns over its logical lines, strings and comments told apart
 * (`.py`; `.pyi` stub files only for markers). Other files give no findings.
 *
 * Fail-open, so that a syntax the parser does not know never blocks a change: a file that does
 * not parse gives one `parse-failed` finding of severity `warn`, and nothing else. Every other
 * finding has severity `block`.
 *
 * Not flagged, on purpose: bodies with a comment in them or after them on the same line
 * (`() => { /* nothing to do *\/ }`, `() => {} // no-op`); `catch {}` blocks (never looked at);
 * overloads, abstract, `declare` and interface members (no body); `@abstractmethod` and
 * `@overload` functions and `Protocol` classes; constructors and Python dunder methods;
 * functions named like no-ops (`noop`, `ignore…`, `identity`…); functions whose parameters are
 * all named `_x` (ignored on purpose); callbacks passed as arguments and object-literal members
 * (mocks, defaults); trivial returns from functions that take nothing and are not named like
 * work (`isEnabled() { return null }` is fine, `parse(text) { return null }` is not). In test
 * files, where fakes do nothing or throw on purpose, only markers and empty test bodies
 * (`it('x', () => {})`, `def test_x(): pass`) are flagged.
 */
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { detectPython } from './stub-python';
import type { SourceFile, StubFinding } from './stub-rules';
import type * as StubTypeScript from './stub-typescript';

export type { SourceFile, StubFinding, StubKind, StubSeverity } from './stub-rules';

/** Languages the detector reads, by extension. */
export function stubLanguage(filePath: string): 'typescript' | 'python' | undefined {
  const ext = path.extname(filePath).toLowerCase();
  if (['.ts', '.tsx', '.mts', '.cts', '.js', '.jsx', '.mjs', '.cjs'].includes(ext)) return 'typescript';
  if (ext === '.py' || ext === '.pyi') return 'python';
  return undefined;
}

/**
 * The TypeScript and JavaScript reader, loaded when a file of those languages is first checked:
 * it loads the TypeScript compiler (about 50 MB of a process's memory, for good), which a
 * process that checks no such file (a worker whose intents have not reached the check yet, or
 * change only Python) does without.
 */
function typeScriptReader(): typeof StubTypeScript.detectTypeScript {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on first use, see above
  return (require('./stub-typescript') as typeof StubTypeScript).detectTypeScript;
}

/** Findings for one file, sorted by line. Pure: reads only `file.content`. */
export function detectStubs(file: SourceFile): StubFinding[] {
  const language = stubLanguage(file.path);
  const findings = language === 'typescript' ? typeScriptReader()(file) : language === 'python' ? detectPython(file) : [];
  return findings.sort((a, b) => a.line - b.line);
}

/**
 * Findings in `after` that `before` (the same file before the change) did not have, compared by
 * kind and excerpt: an agent is answerable for the stubs it added, not for old TODOs in a file
 * it touched. With no `before` (a new file) every finding is new.
 */
export function detectNewStubs(file: { readonly path: string; readonly before?: string; readonly after: string }): StubFinding[] {
  const current = detectStubs({ path: file.path, content: file.after });
  if (file.before === undefined) return current;
  const old = new Map<string, number>();
  for (const f of detectStubs({ path: file.path, content: file.before })) {
    const key = `${f.kind}\0${f.excerpt}`;
    old.set(key, (old.get(key) ?? 0) + 1);
  }
  return current.filter((f) => {
    const key = `${f.kind}\0${f.excerpt}`;
    const left = old.get(key) ?? 0;
    if (left > 0) {
      old.set(key, left - 1);
      return false;
    }
    return true;
  });
}

/** Largest file read by {@link detectStubsInFiles}; bigger ones (generated, minified) are skipped. */
export const MAX_STUB_SCAN_BYTES = 1024 * 1024;

/**
 * Reads and scans files under `root` (paths relative to it). Missing files, files of other
 * languages and files over {@link MAX_STUB_SCAN_BYTES} are skipped. Finding paths are the
 * relative paths given.
 */
export async function detectStubsInFiles(root: string, relPaths: readonly string[]): Promise<StubFinding[]> {
  const out: StubFinding[] = [];
  for (const rel of relPaths) {
    if (!stubLanguage(rel)) continue;
    const abs = path.join(root, rel);
    const info = await stat(abs).catch(() => undefined);
    if (!info?.isFile() || info.size > MAX_STUB_SCAN_BYTES) continue;
    out.push(...detectStubs({ path: rel, content: await readFile(abs, 'utf8') }));
  }
  return out;
}

/** Findings as lines for people and for the next impl prompt: `path:line: kind: message`. */
export function formatStubFindings(findings: readonly StubFinding[]): string {
  return findings.map((f) => `${f.path}:${f.line}: ${f.kind}${f.severity === 'warn' ? ' (warning)' : ''}: ${f.message}\n    ${f.excerpt}`).join('\n');
}
