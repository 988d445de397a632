/** The anti-stub detector's TypeScript and JavaScript reader, over the TypeScript compiler's AST. */
import path from 'node:path';
import ts from 'typescript';
import { isTestFile } from '../shared/glob';
import { excerptOf, markerIn, NOOP_NAME, NOT_IMPLEMENTED_CLASS, NOT_IMPLEMENTED_MESSAGE, WORK_NAME, type SourceFile, type StubFinding, type StubKind } from './stub-rules';


function scriptKind(filePath: string): ts.ScriptKind {
  const ext = path.extname(filePath).toLowerCase();
  if (ext === '.tsx') return ts.ScriptKind.TSX;
  if (ext === '.jsx') return ts.ScriptKind.JSX;
  if (ext === '.js' || ext === '.mjs' || ext === '.cjs') return ts.ScriptKind.JS;
  return ts.ScriptKind.TS;
}

type FnContext = 'declaration' | 'variable' | 'object-member' | 'callback' | 'other';

export function detectTypeScript(file: SourceFile): StubFinding[] {
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

