/**
 * The anti-stub detector's Python reader: patterns over logical lines, with strings and comments
 * told apart by a small lexer (no Python parser is at hand in Node).
 */
import { isTestFile } from '../shared/glob';
import { excerptOf, markerIn, NOOP_NAME, WORK_NAME, type SourceFile, type StubFinding, type StubKind } from './stub-rules';


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

export function detectPython(file: SourceFile): StubFinding[] {
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
