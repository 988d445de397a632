import { globProblem, isTestFile, matchGlob, pathAllowed } from '../../src/shared/glob';

describe('matchGlob', () => {
  const cases: [string, string, boolean][] = [
    ['**', 'a/b/c.ts', true],
    ['**', '.github/workflows/ci.yml', true],
    ['src/**', 'src', true],
    ['src/**', 'src/a.ts', true],
    ['src/**', 'src/deep/er/a.ts', true],
    ['src/**', 'srcx/a.ts', false],
    ['src/**', 'lib/src/a.ts', false],
    ['src/*.ts', 'src/a.ts', true],
    ['src/*.ts', 'src/sub/a.ts', false],
    ['src/**/*.ts', 'src/a.ts', true],
    ['src/**/*.ts', 'src/x/y/a.ts', true],
    ['src/**/*.ts', 'src/x/y/a.js', false],
    ['**/*.test.ts', 'a.test.ts', true],
    ['**/*.test.ts', 'x/y/a.test.ts', true],
    ['**/*.test.ts', 'x/y/a.test.tsx', false],
    ['lib/?.js', 'lib/a.js', true],
    ['lib/?.js', 'lib/ab.js', false],
    ['lib/?.js', 'lib//.js', false],
    ['src/**/**/x', 'src/x', true],
    ['src/**/**/x', 'src/a/b/x', true],
    ['src/*.{ts,tsx}', 'src/a.tsx', true],
    ['src/*.{ts,tsx}', 'src/a.js', false],
    ['{src,lib/{a,b}}/**', 'lib/b/c.js', true],
    ['{src,lib/{a,b}}/**', 'lib/c/c.js', false],
    ['file[0-9].txt', 'file3.txt', true],
    ['file[0-9].txt', 'filex.txt', false],
    ['file[!0-9].txt', 'filex.txt', true],
    ['file[!0-9].txt', 'file3.txt', false],
    ['docs', 'docs/a.md', true],
    ['docs', 'docs', true],
    ['docs', 'docsx/a.md', false],
    ['docs/', 'docs/a/b.md', true],
    ['./src/a.ts', 'src/a.ts', true],
    ['/src/**', 'src/a.ts', true],
    ['README.md', 'README.md', true],
    ['README.md', 'sub/README.md', false],
    ['a.b', 'axb', false], // dots are literal
    ['a+(b)', 'a+(b)', true], // regex characters are literal
    ['*', 'top.txt', true],
    ['*', 'dir/top.txt', false],
    ['app/(auth)/*', 'app/(auth)/page.tsx', true], // parentheses are literal, not a group
    ['app/(auth)/*', 'app/auth/page.tsx', false],
    ['a|b', 'a|b', true],
    ['a|b', 'a', false],
    ['a@(b)', 'a@(b)', true],
    ['a@(b)', 'ab', false],
    ['!x', '!x', true], // negation belongs to pathAllowed
    ['src/', 'src', true],
    ['/', 'any/thing', true],
    ['file[^0-9].txt', 'filex.txt', true],
    ['file[!a-z]', 'file/', false], // a set never matches the separator
  ];
  test.each(cases)('%s ~ %s → %s', (pattern, file, expected) => {
    expect(matchGlob(pattern, file)).toBe(expected);
  });

  test('nested brace alternatives: exactly their expansions', () => {
    for (const file of ['abf', 'acdf', 'acef']) expect(matchGlob('a{b,c{d,e}}f', file)).toBe(true);
    for (const file of ['af', 'acf', 'acdef', 'a{b,c{d,e}}f']) expect(matchGlob('a{b,c{d,e}}f', file)).toBe(false);
    expect(matchGlob('no braces', 'no braces')).toBe(true);
    // A brace with no comma is literal.
    expect(matchGlob('{single}', '{single}')).toBe(true);
    expect(matchGlob('{single}', 'single')).toBe(false);
  });
});

describe('pathAllowed', () => {
  test('any positive pattern, no negative one', () => {
    const patterns = ['src/**', 'test/**', '!src/generated/**'];
    expect(pathAllowed(patterns, 'src/a.ts')).toBe(true);
    expect(pathAllowed(patterns, 'test/a.test.ts')).toBe(true);
    expect(pathAllowed(patterns, 'src/generated/x.ts')).toBe(false);
    expect(pathAllowed(patterns, 'README.md')).toBe(false);
  });
  test('only negatives: everything else', () => {
    expect(pathAllowed(['!secrets/**'], 'src/a.ts')).toBe(true);
    expect(pathAllowed(['!secrets/**'], 'secrets/key')).toBe(false);
  });
});

describe('isTestFile', () => {
  test.each([
    ['src/a.test.ts', true],
    ['pkg/x_test.go', true],
    ['tests/test_api.py', true],
    ['test/unit/a.ts', true],
    ['src/__tests__/a.js', true],
    ['.github/spec/a.rb', true],
    ['src/testing.ts', false],
    ['src/contest/a.ts', false],
  ])('%s → %s', (file, expected) => {
    expect(isTestFile(file)).toBe(expected);
  });
});

describe('globProblem: what an intent may declare as its paths', () => {
  test.each(['**', 'src/**', './src', '!docs/**', 'app/(auth)/page.tsx', 'app/[id]/page.tsx', '**/*.{ts,js}', '[!a]*', 'a..b/c'])('%s is accepted', (glob) => {
    expect(globProblem(glob)).toBeUndefined();
  });
  test.each([
    ['[', /^is not a valid glob \(Missing closing: "\]"\)$/],
    ['src/{a,b', /^is not a valid glob \(Missing closing: "\}"\)$/],
    ['/etc/**', /^is an absolute path/],
    ['!/etc/passwd', /^is an absolute path/],
    ['~/.ssh/**', /^is an absolute path/],
    ['../**', /^reaches outside the repository/],
    ['src/../../x', /^reaches outside the repository/],
    ['src\\..\\..\\x', /^reaches outside the repository/],
    ['!', /^is empty$/],
  ])('%s is refused', (glob, problem) => {
    expect(globProblem(glob)).toMatch(problem);
  });
});
