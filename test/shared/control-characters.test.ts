import { forTerminal, forTerminalLine, textProblem } from '../../src/shared/control-characters';
import { IntentSchema } from '../../src/shared/intent';

describe('textProblem: the text a person gives (a goal)', () => {
  test.each(['Add retries to the upload client', 'two lines\nand\ta tab', 'café, 東京, emoji 🎉'])('%j is accepted', (text) => {
    expect(textProblem(text)).toBeUndefined();
  });
  test.each([
    ['make it \x1b[31mred', 'holds control characters (\\x1b); only newline and tab are allowed'],
    ['approved\rrejected', 'holds control characters (\\r); only newline and tab are allowed'],
    ['\u009b2J and \x07', 'holds control characters (\\x9b, \\x07); only newline and tab are allowed'],
    ['reversed \u202etxt.exe', 'holds control characters (\\u202e); only newline and tab are allowed'],
    ['fix caf\ufffd menu', 'is not valid UTF-8 text'],
    ['half a pair \ud800', 'is not valid UTF-8 text'],
  ])('%j is refused', (text, problem) => {
    expect(textProblem(text)).toBe(problem);
  });
});

describe('forTerminal and forTerminalLine: text from an intent, an agent or a repository, as printed', () => {
  test('escape sequences and other control characters are shown, never sent', () => {
    expect(forTerminal('\x1b[31mred\x1b[0m\n\tnext \u009b2J \x7f \u202e')).toBe('\\x1b[31mred\\x1b[0m\n\tnext \\x9b2J \\x7f \\u202e');
    expect(forTerminalLine('a\nb\tc\rd')).toBe('a\\nb\\tc\\rd');
    expect(forTerminal('plain text, café 🎉')).toBe('plain text, café 🎉');
  });
});

describe("the intent's schema (the worker's own check) refuses what the client does", () => {
  const intent = { id: 'x', goal: 'g', repoPath: '/r', agent: { kind: 'scripted', scriptPath: '/s.json' } } as const;
  test.each([
    [{ goal: 'a \x1b]0;title\x07 b' }, /^goal: holds control characters/],
    [{ goal: 'caf\ufffd' }, /^goal: is not valid UTF-8 text$/],
    [{ paths: ['['] }, /^paths\.0: "\[" is not a valid glob/],
    [{ paths: ['src/**', '/etc/**'] }, /^paths\.1: "\/etc\/\*\*" is an absolute path/],
    [{ paths: ['../**'] }, /^paths\.0: "\.\.\/\*\*" reaches outside the repository/],
  ])('%j', (change, problem) => {
    const parsed = IntentSchema.safeParse({ ...intent, ...change });
    expect(parsed.success).toBe(false);
    const issue = parsed.error!.issues[0]!;
    expect(`${issue.path.join('.')}: ${issue.message}`).toMatch(problem);
  });
  test('a plain goal and globs inside the repository pass', () => {
    expect(IntentSchema.safeParse({ ...intent, goal: 'two\nlines', paths: ['src/**', '!src/vendor/**'] }).success).toBe(true);
  });
});
