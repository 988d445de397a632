import { lineColumnOf, parseJsonc, type ParsedText } from '../../src/config/config-text';

/** The parsed text, failing the test on a syntax error. */
function parsed(text: string): ParsedText {
  const result = parseJsonc(text);
  if (!result.ok) throw new Error(`syntax errors: ${JSON.stringify(result.problems)}`);
  return result.parsed;
}

/** Where `needle` starts in `text` (its first occurrence after `after`), as a 1-based line and column. */
function placeOf(text: string, needle: string, after = ''): { line: number; column: number } {
  const offset = text.indexOf(needle, text.indexOf(after));
  if (offset < 0) throw new Error(`${needle} is not in the text`);
  const before = text.slice(0, offset).split(/\r\n|\r|\n/);
  return { line: before.length, column: before[before.length - 1].length + 1 };
}

const TEXT = [
  '{',
  '  // a comment: "budgetUsd": "9" is not a field',
  '  "limits": {',
  '    "budgetUsd": "5", /* another */',
  '    "attempts": { "impl": 3, },',
  '  },',
  '  "notify": [',
  '    "https://example.com/a",',
  '    { "slack": "$HOOK" },',
  '  ],',
  '}',
].join('\n');

describe('a JSONC text keeps the place of every value', () => {
  const text = parsed(TEXT);

  it('reads comments and trailing commas as tsconfig.json does', () => {
    expect(text.value).toEqual({ limits: { budgetUsd: '5', attempts: { impl: 3 } }, notify: ['https://example.com/a', { slack: '$HOOK' }] });
  });

  it('places a field at its value, through objects and arrays', () => {
    expect(text.positionOf(['limits', 'budgetUsd'])).toEqual(placeOf(TEXT, '"5"'));
    expect(text.positionOf(['limits', 'attempts', 'impl'])).toEqual(placeOf(TEXT, '3,'));
    expect(text.positionOf(['notify', 1, 'slack'])).toEqual(placeOf(TEXT, '"$HOOK"'));
    expect(text.positionOf(['notify', 0])).toEqual(placeOf(TEXT, '"https://example.com/a"'));
  });

  it('places a field that is not written at its nearest written ancestor, and the top at the opening brace', () => {
    expect(text.positionOf(['limits', 'attempts', 'review'])).toEqual(placeOf(TEXT, '{ "impl"'));
    expect(text.positionOf(['limits', 'gateTimeout'])).toEqual(placeOf(TEXT, '{', '"limits"'));
    expect(text.positionOf(['notify', 7])).toEqual(placeOf(TEXT, '['));
    expect(text.positionOf(['worker', 'dayBudgetUsd'])).toEqual({ line: 1, column: 1 });
    expect(text.positionOf([])).toEqual({ line: 1, column: 1 });
  });

  it('places a key that should not be there at the key itself', () => {
    expect(text.keyPositionOf(['limits', 'budgetUsd'])).toEqual(placeOf(TEXT, '"budgetUsd": "5"'));
    // An array element has no key: its value it is.
    expect(text.keyPositionOf(['notify', 1])).toEqual(placeOf(TEXT, '{ "slack"'));
  });

  it('takes a key written twice at its last place, as JSON.parse takes its last value', () => {
    const twice = '{\n  "profile": "default",\n  "profile": 3\n}';
    const p = parsed(twice);
    expect(p.value).toEqual(JSON.parse(twice));
    expect(p.positionOf(['profile'])).toEqual({ line: 3, column: 14 });
  });

  it('keeps a "__proto__" key a key, instead of setting the prototype', () => {
    const value = parsed('{ "__proto__": { "polluted": true } }').value as Record<string, unknown>;
    expect(Object.keys(value)).toEqual(['__proto__']);
    expect((value as { polluted?: unknown }).polluted).toBeUndefined();
  });
});

describe('a syntax error is placed where the parser stopped', () => {
  it('a missing comma', () => {
    const result = parseJsonc('{\n  "profile": "default"\n  "mode": "production"\n}');
    expect(result).toEqual({ ok: false, problems: [{ line: 3, column: 3, message: 'a comma was expected' }] });
  });

  it('a comment that is never closed, an unclosed string, an empty file', () => {
    expect(parseJsonc('{\n  /* open\n}')).toMatchObject({ ok: false, problems: [{ line: 2, column: 3, message: 'the comment is not closed (*/)' }] });
    expect(parseJsonc('{ "a": "b }')).toMatchObject({ ok: false, problems: [{ line: 1, column: 8, message: 'the string is not closed (")' }] });
    expect(parseJsonc('  // nothing but a comment\n')).toMatchObject({ ok: false, problems: [{ line: 2, column: 1, message: 'the file holds no value (a config is an object: {} at the least)' }] });
  });

  it('counts lines that end in \\r\\n or \\r as one line each', () => {
    const result = parseJsonc('{\r\n  "a": 1\r\n  "b": 2\r}');
    expect(result).toMatchObject({ ok: false, problems: [{ line: 3, column: 3 }] });
  });
});

test('offsets become lines and columns at every line ending', () => {
  const at = lineColumnOf('ab\ncd\r\nef\rg');
  expect([0, 2, 3, 5, 7, 9, 10, 11].map(at)).toEqual([
    { line: 1, column: 1 },
    { line: 1, column: 3 },
    { line: 2, column: 1 },
    { line: 2, column: 3 },
    { line: 3, column: 1 },
    { line: 3, column: 3 },
    { line: 4, column: 1 },
    { line: 4, column: 2 },
  ]);
});
