import { expandBraces, matchGlob, pathAllowed } from '../../src/shared/glob';

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
  ];
  test.each(cases)('%s ~ %s → %s', (pattern, file, expected) => {
    expect(matchGlob(pattern, file)).toBe(expected);
  });

  test('brace expansion', () => {
    expect(expandBraces('a{b,c{d,e}}f')).toEqual(['abf', 'acdf', 'acef']);
    expect(expandBraces('no braces')).toEqual(['no braces']);
    expect(expandBraces('{single}')).toEqual(['\\{single}']);
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
