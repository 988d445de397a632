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
import ts from 'typescript';
import { isTestFile } from '../shared/glob';

export type StubKind =
  | 'empty-body'
  | 'not-implemented'
  | 'trivial-return'
  | 'pass-body'
  | 'ellipsis-body'
  | 'todo-marker'
  | 'parse-failed';

export type StubSeverity = 'block' | 'warn';

export interface StubFinding {
  readonly path: string;
  /** 1-based line of the finding. */
  readonly line: number;
  readonly kind: StubKind;
  /** `warn` only for `parse-failed` (the gate proceeds); everything else blocks. */
  readonly severity: StubSeverity;
  /** The source line, trimmed, at most 160 characters. */
  readonly excerpt: string;
  /** What is wrong, in words an agent can act on. */
  readonly message: string;
}

export interface SourceFile {
  readonly path: string;
  readonly content: string;
}

/** Languages the detector reads, by extension. */
export function stubLanguage(filePath: string): 'typescript' | 'python' | undefined {
  const ext = path.extname(filePath).toLowerCase();
  if (['.ts', '.tsx', '.mts', '.cts', '.js', '.jsx', '.mjs', '.cjs'].includes(ext)) return 'typescript';
  if (ext === '.py' || ext === '.pyi') return 'python';
  return undefined;
}

/** Findings for one file, sorted by line. Pure: reads only `file.content`. */
export function detectStubs(file: SourceFile): StubFinding[] {
  const language = stubLanguage(file.path);
  const findings = language === 'typescript' ? detectTypeScript(file) : language === 'python' ? detectPython(file) : [];
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

// ---------------------------------------------------------------------------------------------
// shared heuristics

/** Messages of errors thrown as placeholders. Must start the message: "x is not implemented by the server" is a real error. */
const NOT_IMPLEMENTED_MESSAGE = /^\W*(?:(?:method|function|feature|this)\s+)?(?:is\s+)?(?:not\s+(?:yet\s+)?implemented|unimplemented|todo\b|fixme\b|tbd\b|stub\b|implement\s+me)/i;
const NOT_IMPLEMENTED_CLASS = /not_?implemented|unimplemented|^todo/i;
const MARKER = /\b(?:todo|fixme)\s*[:(]/i;
const UPPER_MARKER = /\b(?:TODO|FIXME|HACK|XXX)\b/;
/** Names of functions that are meant to do nothing (`noop`, `_sighandler_noop`, `ignoreErrors`, `defaultHandler`). */
const NOOP_NAME = /no_?op(?![a-z])|^_*nop$|do_?nothing|^_+$|^_*(?:ignore|identity|empty|dummy|placeholder|null)|^_*default_?[A-Za-z]/i;
/**
 * Names that promise work (`parseInput`, `parse_input`, `Parse`): a literal answer from one is a
 * placeholder. The verb must end the name or be followed by a capital, `_` or a digit.
 */
const WORK_NAME =
  /^_*(?:[Cc]ompute|[Cc]alc|[Cc]alculate|[Pp]arse|[Ff]etch|[Ll]oad|[Bb]uild|[Cc]reate|[Mm]ake|[Gg]enerate|[Pp]rocess|[Vv]alidate|[Vv]erify|[Ff]ind|[Ss]earch|[Ll]ookup|[Rr]esolve|[Tt]ransform|[Cc]onvert|[Rr]ender|[Hh]andle|[Ee]xecute|[Ee]xec|[Rr]un|[Aa]pply|[Mm]erge|[Rr]ead|[Ww]rite|[Ss]ave|[Ss]tore|[Ss]end|[Uu]pload|[Dd]ownload|[Qq]uery|[Aa]naly[sz]e|[Ee]xtract|[Ff]ormat|[Ss]erialize|[Dd]eserialize|[Ee]ncode|[Dd]ecode|[Ee]ncrypt|[Dd]ecrypt|[Hh]ash|[Ss]ign|[Nn]ormalize|[Ss]anitize|[Ss]lugify|[Ss]ort|[Ff]ilter|[Rr]educe|[Cc]ount|[Ss]um|[Tt]otal|[Aa]ggregate|[Ee]valuate|[Ss]core|[Rr]ank|[Cc]ompare|[Dd]iff|[Mm]atch|[Ss]plit|[Tt]ranslate|[Cc]ompile|[Aa]uthenticate|[Aa]uthorize|[Ll]ogin|[Rr]egister|[Ss]chedule|[Dd]ispatch|[Ss]ync|[Uu]pdate|[Dd]elete|[Rr]emove|[Ii]nsert|[Uu]psert|[Cc]ollect|[Ss]ummari[sz]e|[Ee]stimate|[Pp]redict|[Cc]lassify|[Dd]etect|[Ss]can|[Tt]okeni[sz]e|[Gg]et_?[Bb]y|[Ff]ind_?[Bb]y)(?=$|[A-Z_0-9])/;

function markerIn(text: string): boolean {
  return UPPER_MARKER.test(text) || MARKER.test(text);
}

function excerptOf(lines: readonly string[], line: number): string {
  return (lines[line - 1] ?? '').trim().slice(0, 160);
}

// ---------------------------------------------------------------------------------------------
// TypeScript / JavaScript

function scriptKind(filePath: string): ts.ScriptKind {
  const ext = path.extname(filePath).toLowerCase();
  if (ext === '.tsx') return ts.ScriptKind.TSX;
  if (ext === '.jsx') return ts.ScriptKind.JSX;
  if (ext === '.js' || ext === '.mjs' || ext === '.cjs') return ts.ScriptKind.JS;
  return ts.ScriptKind.TS;
}

type FnContext = 'declaration' | 'variable' | 'object-member' | 'callback' | 'other';

function detectTypeScript(file: SourceFile): StubFinding[] {
  const sf = ts.createSourceFile(file.path, file.content, ts.ScriptTarget.Latest, true, scriptKind(file.path));
  const lines = file.content.split('\n');
  const parseErrors = (sf as unknown as { parseDiagnostics?: readonly ts.Diagnostic[] }).parseDiagnostics ?? [];
  if (parseErrors.length > 0) {
    const first = parseErrors[0]!;
    let line = first.start !== undefined ? sf.getLineAndCharacterOfPosition(first.start).line + 1 : 1;
    while (line > 1 && !lines[line - 1]?.trim()) line--; // "'}' expected" at the end of the file: point at the last code
    return [
      {
        path: file.path,
        line,
        kind: 'parse-failed',
        severity: 'warn',
        excerpt: excerptOf(lines, line),
        message: `could not parse (${ts.flattenDiagnosticMessageText(first.messageText, ' ')}): not checked for stubs`,
      },
    ];
  }
  const findings: StubFinding[] = [];
  const test = isTestFile(file.path);
  const declarationFile = file.path.endsWith('.d.ts');
  const add = (node: ts.Node, kind: StubKind, message: string) => {
    const line = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
    findings.push({ path: file.path, line, kind, severity: 'block', excerpt: excerptOf(lines, line), message });
  };

  const visit = (node: ts.Node): void => {
    if (!declarationFile) {
      if (ts.isThrowStatement(node) && !test) {
        const what = notImplementedThrow(node.expression);
        if (what) add(node, 'not-implemented', `${describeEnclosing(node)} throws ${what}: implement it`);
      }
      if (isFunctionWithBody(node)) checkFunction(node);
    }
    ts.forEachChild(node, visit);
  };

  const checkFunction = (fn: FunctionWithBody): void => {
    const { name, context } = functionName(fn);
    const label = name ? `${functionKind(fn)} ${name}` : 'a function';
    if (test) {
      const testName = testCallbackName(fn);
      if (testName !== undefined && isEmptyBlock(fn.body, sf)) add(fn, 'empty-body', `test ${testName} has an empty body: it checks nothing`);
      return;
    }
    if (ts.isConstructorDeclaration(fn)) return;
    if (context === 'callback' || context === 'object-member' || context === 'other') return;
    if (name && NOOP_NAME.test(name)) return;
    const body = fn.body;
    if (ts.isBlock(body)) {
      if (isEmptyBlock(body, sf) && !explainedByTrailingComment(body, sf) && !ignoresAllInput(fn)) {
        add(fn, 'empty-body', `${label} has an empty body: implement it (if it is meant to do nothing, say so in a comment inside the body)`);
        return;
      }
      if (body.statements.length === 1 && ts.isReturnStatement(body.statements[0]!)) {
        const ret = body.statements[0] as ts.ReturnStatement;
        if (!ret.expression || isTrivialValue(ret.expression)) {
          if (worksByShape(fn, name)) add(fn, 'trivial-return', `${label} only returns ${ret.expression ? ret.expression.getText(sf) : 'nothing'}: a placeholder, not an implementation`);
        }
      }
    } else if (isTrivialValue(body) && worksByShape(fn, name)) {
      add(fn, 'trivial-return', `${label} only returns ${body.getText(sf)}: a placeholder, not an implementation`);
    }
  };

  visit(sf);
  for (const c of collectComments(sf)) {
    const text = file.content.slice(c.pos, c.end);
    if (!markerIn(text)) continue;
    const line = sf.getLineAndCharacterOfPosition(c.pos).line + 1;
    const offset = text.split('\n').findIndex((l) => markerIn(l));
    const at = line + Math.max(0, offset);
    findings.push({ path: file.path, line: at, kind: 'todo-marker', severity: 'block', excerpt: excerptOf(lines, at), message: 'a TODO/FIXME/HACK/XXX marker: finish the work and remove the marker' });
  }
  return findings;
}

type FunctionWithBody = ts.FunctionLikeDeclaration & { readonly body: ts.ConciseBody };

function isFunctionWithBody(node: ts.Node): node is FunctionWithBody {
  return (
    (ts.isFunctionDeclaration(node) ||
      ts.isMethodDeclaration(node) ||
      ts.isFunctionExpression(node) ||
      ts.isArrowFunction(node) ||
      ts.isConstructorDeclaration(node) ||
      ts.isGetAccessorDeclaration(node) ||
      ts.isSetAccessorDeclaration(node)) &&
    node.body !== undefined
  );
}

function functionKind(fn: FunctionWithBody): string {
  if (ts.isMethodDeclaration(fn)) return 'method';
  if (ts.isGetAccessorDeclaration(fn)) return 'getter';
  if (ts.isSetAccessorDeclaration(fn)) return 'setter';
  return 'function';
}

function propertyNameText(name: ts.PropertyName | ts.BindingName | undefined): string | undefined {
  if (!name) return undefined;
  if (ts.isIdentifier(name) || ts.isPrivateIdentifier(name) || ts.isStringLiteral(name) || ts.isNumericLiteral(name)) return name.text;
  return undefined;
}

/** The function's name and where it sits: declared, bound to a name, an object member, a callback. */
function functionName(fn: FunctionWithBody): { readonly name?: string; readonly context: FnContext } {
  if (ts.isFunctionDeclaration(fn)) return { name: fn.name?.text ?? 'default', context: 'declaration' };
  if (ts.isConstructorDeclaration(fn)) return { name: 'constructor', context: 'declaration' };
  if (ts.isMethodDeclaration(fn) || ts.isGetAccessorDeclaration(fn) || ts.isSetAccessorDeclaration(fn)) {
    const name = propertyNameText(fn.name);
    return { name, context: ts.isObjectLiteralExpression(fn.parent) ? 'object-member' : 'declaration' };
  }
  let parent = fn.parent;
  while (ts.isParenthesizedExpression(parent) || ts.isAsExpression(parent) || ts.isSatisfiesExpression(parent) || ts.isTypeAssertionExpression(parent)) parent = parent.parent;
  if (ts.isVariableDeclaration(parent) && parent.initializer) return { name: propertyNameText(parent.name), context: 'variable' };
  if (ts.isPropertyDeclaration(parent)) return { name: propertyNameText(parent.name), context: 'declaration' };
  if (ts.isPropertyAssignment(parent)) return { name: propertyNameText(parent.name), context: 'object-member' };
  if (ts.isExportAssignment(parent)) return { name: 'default', context: 'variable' };
  if (ts.isBinaryExpression(parent) && parent.operatorToken.kind === ts.SyntaxKind.EqualsToken && parent.right !== parent.left) {
    const left = parent.left;
    const name = ts.isIdentifier(left) ? left.text : ts.isPropertyAccessExpression(left) ? left.name.text : undefined;
    return { name, context: 'variable' };
  }
  if (ts.isCallExpression(parent) || ts.isNewExpression(parent)) return { name: fn.name?.text, context: 'callback' };
  return { name: fn.name?.text, context: 'other' };
}

function describeEnclosing(node: ts.Node): string {
  for (let n: ts.Node | undefined = node.parent; n; n = n.parent) {
    if (isFunctionWithBody(n)) {
      const { name } = functionName(n);
      return name ? `${functionKind(n)} ${name}` : 'a function';
    }
  }
  return 'the module';
}

/** `it('name', () => {})`, `test(...)`, `it.each(...)('name', fn)`: the test's name, or undefined. */
function testCallbackName(fn: FunctionWithBody): string | undefined {
  const call = fn.parent;
  if (!ts.isCallExpression(call) || !call.arguments.includes(fn as ts.Expression)) return undefined;
  let callee: ts.Expression = call.expression;
  if (ts.isCallExpression(callee)) callee = callee.expression; // it.each(table)(name, fn)
  const root = ts.isPropertyAccessExpression(callee) ? callee.expression : callee;
  const base = ts.isIdentifier(root) ? root.text : ts.isPropertyAccessExpression(root) && ts.isIdentifier(root.expression) ? root.expression.text : undefined;
  if (!base || !['it', 'test', 'specify'].includes(base)) return undefined;
  if (ts.isPropertyAccessExpression(callee) && ['todo', 'skip'].includes(callee.name.text)) return undefined; // tamper check covers these
  const first = call.arguments[0];
  return first && (ts.isStringLiteral(first) || ts.isNoSubstitutionTemplateLiteral(first)) ? `'${first.text}'` : "'(unnamed)'";
}

/** `{}` with no statements and no comment inside. */
function isEmptyBlock(body: ts.ConciseBody, sf: ts.SourceFile): boolean {
  if (!ts.isBlock(body) || body.statements.length > 0) return false;
  const inner = sf.text.slice(body.getStart(sf) + 1, body.end - 1);
  return !/\/\/|\/\*/.test(inner);
}

/** `() => {}; // no-op on purpose`: a comment after the body, on the same line. */
function explainedByTrailingComment(body: ts.Block, sf: ts.SourceFile): boolean {
  const lineEnd = sf.text.indexOf('\n', body.end);
  return /\/\/|\/\*/.test(sf.text.slice(body.end, lineEnd < 0 ? sf.text.length : lineEnd));
}

/** Every parameter named `_x`: a type-level helper such as `assertIs<T>(_arg: T): void {}`. */
function ignoresAllInput(fn: FunctionWithBody): boolean {
  const params = fn.parameters.filter((p) => !(ts.isIdentifier(p.name) && p.name.text === 'this'));
  return params.length > 0 && params.every((p) => ts.isIdentifier(p.name) && p.name.text.startsWith('_'));
}

/** null, undefined, void 0, 0, '', ``, [], {}, and Promise.resolve() of one of those. */
function isTrivialValue(expr: ts.Expression): boolean {
  while (ts.isParenthesizedExpression(expr) || ts.isAsExpression(expr) || ts.isNonNullExpression(expr) || ts.isSatisfiesExpression(expr)) expr = expr.expression;
  if (expr.kind === ts.SyntaxKind.NullKeyword) return true;
  if (ts.isIdentifier(expr)) return expr.text === 'undefined';
  if (ts.isVoidExpression(expr)) return ts.isNumericLiteral(expr.expression);
  if (ts.isNumericLiteral(expr)) return Number(expr.text) === 0;
  if (ts.isStringLiteral(expr) || ts.isNoSubstitutionTemplateLiteral(expr)) return expr.text === '';
  if (ts.isArrayLiteralExpression(expr)) return expr.elements.length === 0;
  if (ts.isObjectLiteralExpression(expr)) return expr.properties.length === 0;
  if (ts.isCallExpression(expr) && ts.isPropertyAccessExpression(expr.expression)) {
    const { expression: target, name } = expr.expression;
    if (ts.isIdentifier(target) && target.text === 'Promise' && name.text === 'resolve') {
      return expr.arguments.length === 0 || (expr.arguments.length === 1 && isTrivialValue(expr.arguments[0]!));
    }
  }
  return false;
}

/** A function that should compute something: it takes input, is async, or is named like work. */
function worksByShape(fn: FunctionWithBody, name: string | undefined): boolean {
  if (ts.isGetAccessorDeclaration(fn) || ts.isConstructorDeclaration(fn)) return false;
  // `this` is not input; `_unused` says on purpose that it is ignored
  const params = fn.parameters.filter((p) => !(ts.isIdentifier(p.name) && (p.name.text === 'this' || p.name.text.startsWith('_'))));
  const isAsync = fn.modifiers?.some((m) => m.kind === ts.SyntaxKind.AsyncKeyword) ?? false;
  return params.length > 0 || isAsync || (name !== undefined && WORK_NAME.test(name));
}

/** `new Error('not implemented')`, `new NotImplementedError()`, a to-do string: what is thrown, if a placeholder. */
function notImplementedThrow(expr: ts.Expression | undefined): string | undefined {
  if (!expr) return undefined;
  if ((ts.isStringLiteral(expr) || ts.isNoSubstitutionTemplateLiteral(expr)) && NOT_IMPLEMENTED_MESSAGE.test(expr.text)) return `'${expr.text}'`;
  if (!ts.isNewExpression(expr) && !ts.isCallExpression(expr)) return undefined;
  const callee = expr.expression;
  const cls = ts.isIdentifier(callee) ? callee.text : ts.isPropertyAccessExpression(callee) ? callee.name.text : undefined;
  if (!cls) return undefined;
  if (NOT_IMPLEMENTED_CLASS.test(cls)) return cls;
  if (!/Error$|^Error|Exception$/.test(cls)) return undefined;
  const first = expr.arguments?.[0];
  if (!first) return undefined;
  const text = ts.isStringLiteral(first) || ts.isNoSubstitutionTemplateLiteral(first) ? first.text : ts.isTemplateExpression(first) ? first.head.text : undefined;
  return text !== undefined && NOT_IMPLEMENTED_MESSAGE.test(text) ? `${cls}('${text}')` : undefined;
}

/** Every comment in the file, once: the trivia around every node and token. */
function collectComments(sf: ts.SourceFile): ts.CommentRange[] {
  const seen = new Map<number, ts.CommentRange>();
  const jsxText: [number, number][] = [];
  const text = sf.text;
  const take = (ranges: ts.CommentRange[] | undefined) => {
    for (const r of ranges ?? []) if (!seen.has(r.pos)) seen.set(r.pos, r);
  };
  const walk = (node: ts.Node) => {
    if (node.kind === ts.SyntaxKind.JsxText) {
      jsxText.push([node.pos, node.end]); // prose such as `<p>// not a comment</p>`
      return;
    }
    take(ts.getLeadingCommentRanges(text, node.pos));
    take(ts.getTrailingCommentRanges(text, node.end));
    for (const child of node.getChildren(sf)) walk(child);
  };
  walk(sf);
  return [...seen.values()].filter((r) => !jsxText.some(([from, to]) => r.pos >= from && r.pos < to));
}

// ---------------------------------------------------------------------------------------------
// Python

interface PyLine {
  /** 1-based line where the logical line starts. */
  readonly line: number;
  readonly indent: number;
  /** The code with strings replaced by `""` (empty) or `"S"`, comments removed, continuations joined. */
  readonly code: string;
}

interface PyComment {
  readonly line: number;
  readonly text: string;
}

interface PyLexed {
  readonly lines: PyLine[];
  readonly comments: PyComment[];
  readonly error?: { readonly line: number; readonly message: string };
}

/** Splits Python source into logical lines, telling code, strings and comments apart. */
function lexPython(source: string): PyLexed {
  const lines: PyLine[] = [];
  const comments: PyComment[] = [];
  let code = '';
  let depth = 0;
  let line = 1;
  let start = 1;
  let indent = 0;
  let atLineStart = true;
  let col = 0;
  const flush = () => {
    const trimmed = code.trim();
    if (trimmed) lines.push({ line: start, indent, code: trimmed });
    code = '';
  };
  for (let i = 0; i < source.length; i++) {
    const c = source[i]!;
    if (atLineStart) {
      if (c === ' ') {
        col += 1;
        continue;
      }
      if (c === '\t') {
        col = (Math.floor(col / 8) + 1) * 8;
        continue;
      }
      if (c === '\r') continue;
      atLineStart = false;
      if (!code.trim() && depth === 0) {
        start = line;
        indent = col;
      }
    }
    if (c === '#') {
      const end = source.indexOf('\n', i);
      const stop = end < 0 ? source.length : end;
      comments.push({ line, text: source.slice(i, stop) });
      i = stop - 1;
      continue;
    }
    if (c === '"' || c === "'") {
      const triple = source.startsWith(c.repeat(3), i);
      const quote = triple ? c.repeat(3) : c;
      let j = i + quote.length;
      let content = '';
      let closed = false;
      while (j < source.length) {
        const d = source[j]!;
        if (d === '\\') {
          content += source.slice(j, j + 2);
          if (source[j + 1] === '\n') line++;
          j += 2;
          continue;
        }
        if (source.startsWith(quote, j)) {
          closed = true;
          break;
        }
        if (d === '\n') {
          if (!triple) break;
          line++;
        }
        content += d;
        j++;
      }
      if (!closed) return { lines, comments, error: { line, message: 'unterminated string' } };
      code += content === '' ? '""' : '"S"';
      i = j + quote.length - 1;
      continue;
    }
    if (c === '(' || c === '[' || c === '{') depth++;
    if (c === ')' || c === ']' || c === '}') {
      depth--;
      if (depth < 0) return { lines, comments, error: { line, message: `unmatched '${c}'` } };
    }
    if (c === '\\' && source[i + 1] === '\n') {
      code += ' ';
      line++;
      i++;
      continue;
    }
    if (c === '\n') {
      line++;
      col = 0;
      atLineStart = true;
      if (depth === 0) flush();
      else code += ' ';
      continue;
    }
    code += c;
  }
  if (depth !== 0) return { lines, comments, error: { line, message: 'unclosed bracket at the end of the file' } };
  flush();
  return { lines, comments };
}

interface PyDef {
  readonly name: string;
  readonly params: string[];
  readonly isAsync: boolean;
  /** Code after the colon on the def line (a one-line body), or ''. */
  readonly inline: string;
}

/** Reads `[async] def name(params) [-> T]: [body]` with brackets matched by hand. */
function parseDef(code: string): PyDef | undefined {
  const head = /^(async\s+)?def\s+([A-Za-z_]\w*)\s*\(/.exec(code);
  if (!head) return undefined;
  let depth = 1;
  let i = head[0].length;
  for (; i < code.length && depth > 0; i++) {
    if ('([{'.includes(code[i]!)) depth++;
    else if (')]}'.includes(code[i]!)) depth--;
  }
  const params = splitTopLevel(code.slice(head[0].length, i - 1), ',')
    .map((p) => p.trim().replace(/^\*{1,2}/, '').split(/[:=]/)[0]!.trim())
    .filter((p) => p && p !== '/' && p !== '*');
  let rest = code.slice(i);
  let d = 0;
  let colon = -1;
  for (let k = 0; k < rest.length; k++) {
    const ch = rest[k]!;
    if ('([{'.includes(ch)) d++;
    else if (')]}'.includes(ch)) d--;
    else if (ch === ':' && d === 0) {
      colon = k;
      break;
    }
  }
  rest = colon >= 0 ? rest.slice(colon + 1).trim() : '';
  return { name: head[2]!, params, isAsync: Boolean(head[1]), inline: rest };
}

function splitTopLevel(text: string, sep: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of text) {
    if ('([{'.includes(ch)) depth++;
    else if (')]}'.includes(ch)) depth--;
    if (ch === sep && depth === 0) {
      out.push(current);
      current = '';
    } else current += ch;
  }
  if (current.trim()) out.push(current);
  return out;
}

const PY_TRIVIAL_RETURN = /^return(?:\s+(?:None|0|0\.0|""|\[\]|\{\}|\(\)))?$/;
const PY_NOT_IMPLEMENTED = /^raise\s+NotImplemented(?:Error)?\b/;
/** `@abstractmethod`, `@abc.abstractmethod`, `@overload`, `@t.overload`, `@typing_extensions.overload`… */
const PY_SKIP_DECORATOR = /^@(?:\w+\.)*(?:abstractmethod|abstractproperty|abstractclassmethod|abstractstaticmethod|overload)\b/;

interface PyScope {
  readonly indent: number;
  readonly kind: 'class' | 'def';
  /** Abstract, overload, or a Protocol member: placeholders are the point. */
  readonly exempt: boolean;
  readonly protocol: boolean;
}

function detectPython(file: SourceFile): StubFinding[] {
  const source = file.content;
  const rawLines = source.split('\n');
  const lexed = lexPython(source);
  if (lexed.error) {
    return [
      {
        path: file.path,
        line: lexed.error.line,
        kind: 'parse-failed',
        severity: 'warn',
        excerpt: excerptOf(rawLines, lexed.error.line),
        message: `could not parse (${lexed.error.message}): not checked for stubs`,
      },
    ];
  }
  const findings: StubFinding[] = [];
  const add = (line: number, kind: StubKind, message: string) =>
    findings.push({ path: file.path, line, kind, severity: 'block', excerpt: excerptOf(rawLines, line), message });
  const stubFile = file.path.toLowerCase().endsWith('.pyi');
  const test = isTestFile(file.path);
  const { lines } = lexed;
  const scopes: PyScope[] = [];
  let decorators: string[] = [];

  for (let i = 0; i < lines.length && !stubFile; i++) {
    const l = lines[i]!;
    while (scopes.length && scopes[scopes.length - 1]!.indent >= l.indent) scopes.pop();
    const inExempt = scopes.some((s) => s.exempt);
    if (l.code.startsWith('@')) {
      decorators.push(l.code);
      continue;
    }
    const decorated = decorators;
    decorators = [];

    const cls = /^class\s+([A-Za-z_]\w*)\s*(?:\((.*)\))?\s*:/.exec(l.code);
    if (cls) {
      const protocol = /\bProtocol\b/.test(cls[2] ?? '');
      scopes.push({ indent: l.indent, kind: 'class', exempt: protocol, protocol });
      continue;
    }
    if (PY_NOT_IMPLEMENTED.test(l.code) && !inExempt && !test) {
      add(l.line, 'not-implemented', `${describePyScope(lines, i)} raises NotImplementedError: implement it`);
      continue;
    }
    const def = parseDef(l.code);
    if (!def) continue;
    const parent = scopes[scopes.length - 1];
    const exempt = inExempt || decorated.some((d) => PY_SKIP_DECORATOR.test(d)) || (parent?.kind === 'class' && parent.protocol);
    scopes.push({ indent: l.indent, kind: 'def', exempt, protocol: false });
    if (exempt) continue;

    // the body's first-level statements
    let statements: { readonly code: string; readonly line: number }[];
    if (def.inline) {
      statements = splitTopLevel(def.inline, ';').map((s) => ({ code: s.trim(), line: l.line }));
    } else {
      statements = [];
      const bodyIndent = lines[i + 1] && lines[i + 1]!.indent > l.indent ? lines[i + 1]!.indent : undefined;
      for (let j = i + 1; bodyIndent !== undefined && j < lines.length && lines[j]!.indent > l.indent; j++) {
        if (lines[j]!.indent === bodyIndent) statements.push({ code: lines[j]!.code, line: lines[j]!.line });
      }
    }
    if (statements[0] && /^[rRbBuUfF]{0,2}"S?"$/.test(statements[0].code)) statements = statements.slice(1); // docstring
    const params = def.params.filter((p) => p !== 'self' && p !== 'cls' && !p.startsWith('_'));
    const label = `${parent?.kind === 'class' ? 'method' : 'function'} ${def.name}`;

    if (test) {
      if (/^test/.test(def.name) && (statements.length === 0 || (statements.length === 1 && /^(?:pass|\.\.\.)$/.test(statements[0]!.code)))) {
        add(l.line, 'empty-body', `test ${def.name} has an empty body: it checks nothing`);
      }
      continue;
    }
    if (NOOP_NAME.test(def.name)) continue;
    if (/^__\w+__$/.test(def.name)) continue; // __init__, __exit__ and friends do nothing legitimately
    if (statements.length === 0) {
      add(l.line, 'empty-body', `${label} has only a docstring: implement it`);
      continue;
    }
    if (statements.length !== 1) continue;
    const only = statements[0]!.code;
    if (only === 'pass') add(l.line, 'pass-body', `${label} has only \`pass\`: implement it (if it is meant to do nothing, say so in a comment)`);
    else if (only === '...') add(l.line, 'ellipsis-body', `${label} has only \`...\`: implement it`);
    else if (PY_TRIVIAL_RETURN.test(only) && (params.length > 0 || def.isAsync || WORK_NAME.test(def.name))) {
      add(l.line, 'trivial-return', `${label} only does \`${only}\`: a placeholder, not an implementation`);
    }
  }

  for (const c of lexed.comments) {
    if (markerIn(c.text)) add(c.line, 'todo-marker', 'a TODO/FIXME/HACK/XXX marker: finish the work and remove the marker');
  }
  return findings;
}

function describePyScope(lines: readonly PyLine[], index: number): string {
  const indent = lines[index]!.indent;
  for (let k = index - 1; k >= 0; k--) {
    const l = lines[k]!;
    if (l.indent >= indent) continue;
    const def = parseDef(l.code);
    if (def) return `function ${def.name}`;
    if (/^class\s/.test(l.code)) return 'a class body';
  }
  return 'the module';
}
