import { readFileSync } from 'node:fs';
import path from 'node:path';
import { checkLld, checkSpec } from '../../src/safety/document-checks';

const demo = JSON.parse(readFileSync(path.resolve(__dirname, '../../examples/demo-agent.json'), 'utf8')) as { stages: Record<string, Array<{ output: string }>> };
const existing = new Set(['lib/strings.js', 'test/strings.test.js', 'package.json']);
const opts = { declaredPaths: ['lib/**', 'test/**'], exists: (p: string) => existing.has(p) };

describe('LLD', () => {
  test("the demo's design passes", () => {
    expect(checkLld(demo.stages.lld![0]!.output, opts)).toEqual({ ok: true, errors: [] });
  });

  test('missing sections are named', () => {
    expect(checkLld('# Design\n\nJust do it.\n', opts).errors).toEqual([
      'missing section "Files": add a "## Files" heading',
      'missing section "Tests": add a "## Tests" heading',
    ]);
  });

  test('a phantom file, a file outside the declared paths, and a new file marked as such', () => {
    const lld = ['## Files', '- lib/strngs.js: add slugify', '- `src/server.js`: wire it in', '- lib/slug.js (new): the helper', '## Tests', 'test/strings.test.js'].join('\n');
    expect(checkLld(lld, opts).errors).toEqual([
      'lib/strngs.js does not exist: mark it "(new)" if the change creates it, or name the right file',
      'src/server.js is outside the declared paths (lib/**, test/**)',
    ]);
  });

  test('a Files section that names nothing', () => {
    expect(checkLld('## Files\nthe usual ones\n## Testing\nrun them\n', opts).errors).toEqual(['the Files section names no file: list each file to change, one per line']);
  });
});

describe('spec', () => {
  test("the demo's table passes", () => {
    expect(checkSpec(demo.stages.spec![0]!.output)).toEqual({ ok: true, errors: [] });
  });

  test('a requirement without a test case or a test file fails, naming it', () => {
    const spec = '| Requirement | Test case | File |\n|---|---|---|\n| slugify exists | `slugify is exported` | `lib/a.test.js` |\n| handles unicode | | `lib/a.test.js` |\n| trims | `slugify trims` | |\n';
    expect(checkSpec(spec).errors).toEqual(['requirement "handles unicode" is mapped to no test case', 'requirement "trims" names no test file']);
  });

  test('a table without a File column, arrow lists and prose fail', () => {
    expect(checkSpec('| Requirement | Test |\n|---|---|\n| slugify exists | `slugify is exported` |\n').errors).toEqual([
      'the requirement table has no "File" column: name the test file of each test',
    ]);
    expect(checkSpec('- slugify lower-cases → `slugify makes a slug`\n').errors).toEqual([expect.stringMatching(/^no requirement is mapped to a test/)]);
    expect(checkSpec('We will test it well.').errors).toEqual([expect.stringMatching(/^no requirement is mapped to a test/)]);
  });
});
