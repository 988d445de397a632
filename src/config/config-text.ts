import { parseTree, printParseErrorCode, type Node, type ParseError } from 'jsonc-parser';

/*
 * A config file's text: JSON with comments and trailing commas (JSONC, as in tsconfig.json and
 * VS Code's settings), read by the parser VS Code itself uses, so what the editor accepts Warden
 * accepts. Every value keeps its place in the text, so a problem found in the parsed object can
 * be reported at the line and column that caused it.
 */

/** A place in a text: 1-based line and column (UTF-16 code units, as editors count them). */
export interface TextPosition {
  readonly line: number;
  readonly column: number;
}

/** A field of a parsed document: object keys and array indices, outermost first. */
export type FieldPath = readonly PropertyKey[];

/** A JSONC text, parsed. */
export interface ParsedText {
  readonly value: unknown;
  /** Where `path` is written: its value, else the value of its nearest ancestor that is written. */
  readonly positionOf: (path: FieldPath) => TextPosition;
  /** Where the key of `path` is written (for a key that should not be there), else as `positionOf`. */
  readonly keyPositionOf: (path: FieldPath) => TextPosition;
}

/** A syntax error, where it is. */
export interface SyntaxProblem extends TextPosition {
  readonly message: string;
}

/** What each of the parser's error codes means, in words. */
const SYNTAX_MESSAGES: Readonly<Record<string, string>> = {
  InvalidSymbol: 'unexpected character',
  InvalidNumberFormat: 'not a valid number',
  PropertyNameExpected: 'a property name in double quotes was expected',
  ValueExpected: 'a value was expected',
  ColonExpected: 'a colon was expected',
  CommaExpected: 'a comma was expected',
  CloseBraceExpected: 'a closing brace } was expected',
  CloseBracketExpected: 'a closing bracket ] was expected',
  EndOfFileExpected: 'the end of the file was expected (only one value may be at the top)',
  InvalidCommentToken: 'not a valid comment',
  UnexpectedEndOfComment: 'the comment is not closed (*/)',
  UnexpectedEndOfString: 'the string is not closed (")',
  UnexpectedEndOfNumber: 'the number is cut short',
  InvalidUnicode: 'not a valid \\u escape',
  InvalidEscapeCharacter: 'not a valid escape sequence',
  InvalidCharacter: 'a control character in a string (write it as an escape, e.g. \\n)',
};

/** A text with no value in it: nothing, or only comments. */
const EMPTY_MESSAGE = 'the file holds no value (a config is an object: {} at the least)';

/**
 * Parses `text` as JSONC: the value with the places of its parts, or the first syntax error. Only
 * the first: what the parser finds after it (a brace missing after an unclosed comment) follows
 * from it, and would send a reader looking for problems that are not there.
 */
export function parseJsonc(text: string): { readonly ok: true; readonly parsed: ParsedText } | { readonly ok: false; readonly problems: readonly SyntaxProblem[] } {
  const errors: ParseError[] = [];
  const root = parseTree(text, errors, { allowTrailingComma: true, disallowComments: false, allowEmptyContent: false });
  const at = lineColumnOf(text);
  const [first] = errors;
  if (first || root === undefined) {
    const code = first ? printParseErrorCode(first.error) : 'ValueExpected';
    const message = root === undefined && code === 'ValueExpected' ? EMPTY_MESSAGE : (SYNTAX_MESSAGES[code] ?? code);
    return { ok: false, problems: [{ ...at(first?.offset ?? 0), message }] };
  }
  const written = (path: FieldPath): Node => {
    for (let length = path.length; length > 0; length--) {
      const node = nodeAt(root, path.slice(0, length));
      if (node) return node;
    }
    return root;
  };
  return {
    ok: true,
    parsed: {
      value: valueOf(root),
      positionOf: (path) => at(written(path).offset),
      keyPositionOf: (path) => {
        const node = nodeAt(root, path);
        const key = node?.parent?.type === 'property' ? node.parent.children?.[0] : undefined;
        return at((key ?? written(path)).offset);
      },
    },
  };
}

/** The node of the value at `path`, if it is written. A key written twice counts where it is last, as its value does. */
function nodeAt(root: Node, path: FieldPath): Node | undefined {
  let node: Node | undefined = root;
  for (const segment of path) {
    if (node?.type === 'object') {
      const property: Node | undefined = node.children?.filter((p) => p.children?.[0]?.value === String(segment)).at(-1);
      node = property?.children?.[1];
    } else if (node?.type === 'array' && typeof segment === 'number') {
      node = node.children?.[segment];
    } else {
      return undefined;
    }
  }
  return node;
}

/**
 * The plain value of a parsed node. Built with Object.fromEntries, which makes every key an own
 * property: a `"__proto__"` key stays a key (and is refused as unknown) instead of setting the
 * object's prototype, as assigning it would.
 */
function valueOf(node: Node): unknown {
  switch (node.type) {
    case 'object':
      return Object.fromEntries((node.children ?? []).map((property) => [property.children![0].value as string, valueOf(property.children![1])]));
    case 'array':
      return (node.children ?? []).map(valueOf);
    default:
      return node.value;
  }
}

/** Turns offsets into `text` into lines and columns; a line ends at \n, \r\n or \r. */
export function lineColumnOf(text: string): (offset: number) => TextPosition {
  const starts = [0];
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '\n' || (c === '\r' && text[i + 1] !== '\n')) starts.push(i + 1);
  }
  return (offset) => {
    let low = 0;
    let high = starts.length - 1;
    while (low < high) {
      const mid = (low + high + 1) >> 1;
      if (starts[mid] <= offset) low = mid;
      else high = mid - 1;
    }
    return { line: low + 1, column: offset - starts[low] + 1 };
  };
}
