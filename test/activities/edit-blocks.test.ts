import { mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { applyEdits, parseEdits } from '../../src/activities/agents/edit-blocks';

function worktree(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'warden-edits-'));
  mkdirSync(path.join(dir, 'lib'));
  writeFileSync(path.join(dir, 'lib/strings.js'), "'use strict';\nfunction capitalize(t) {\n  return t;\n}\nmodule.exports = { capitalize };\n");
  writeFileSync(path.join(dir, 'package.json'), '{}\n');
  return dir;
}

const answer = [
  'Here is the change.',
  '',
  'lib/strings.js',
  '<<<<<<< SEARCH',
  'module.exports = { capitalize };',
  '=======',
  "function slugify(t) {\n  return t.toLowerCase();\n}\nmodule.exports = { capitalize, slugify };",
  '>>>>>>> REPLACE',
  '',
  '```file:lib/slug/README.md',
  '# slug',
  '```',
].join('\n');

test('parses search/replace and whole-file blocks in order, and applies them', async () => {
  const edits = parseEdits(answer);
  expect(edits.map((e) => `${e.kind}:${e.path}`)).toEqual(['replace:lib/strings.js', 'file:lib/slug/README.md']);
  const dir = worktree();
  expect(await applyEdits(dir, ['lib/**'], edits)).toEqual(['lib/strings.js', 'lib/slug/README.md']);
  expect(readFileSync(path.join(dir, 'lib/strings.js'), 'utf8')).toContain('module.exports = { capitalize, slugify };');
  expect(readFileSync(path.join(dir, 'lib/slug/README.md'), 'utf8')).toBe('# slug\n');
});

test.each([
  ['outside the declared paths', ['lib/**'], '```file:package.json\n{"scripts":{}}\n```', /package.json is outside the declared paths \(lib\/\*\*\)/],
  ['a parent path', ['lib/**'], '```file:lib/../../escape.js\nx\n```', /is not a path inside the worktree/],
  ['an absolute path', ['lib/**'], '```file:/etc/passwd\nx\n```', /is not a path inside the worktree/],
  ['git state, even when declared', ['lib/**', '.git/**'], '```file:.git/config\nx\n```', /git's own state/],
])('refuses %s before writing anything', async (_name, declared, bad, message) => {
  const dir = worktree();
  const before = readFileSync(path.join(dir, 'lib/strings.js'), 'utf8');
  const err = await applyEdits(dir, declared, parseEdits(`${answer}\n${bad}`)).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ApplicationFailure);
  expect(err).toMatchObject({ type: 'PATH_OUTSIDE_WORKTREE', nonRetryable: true });
  expect((err as Error).message).toMatch(message);
  expect(readFileSync(path.join(dir, 'lib/strings.js'), 'utf8')).toBe(before);
  expect(existsSync(path.join(dir, 'lib/slug'))).toBe(false);
});

test('a symlink leading out of the worktree is refused', async () => {
  const dir = worktree();
  symlinkSync(tmpdir(), path.join(dir, 'lib/out'));
  const err = await applyEdits(dir, ['lib/**'], parseEdits('```file:lib/out/x.js\nx\n```')).catch((e: unknown) => e);
  expect((err as Error).message).toMatch(/leads out of the worktree/);
});

test('a SEARCH that is missing (or ambiguous) changes nothing; no block at all is an error', async () => {
  const dir = worktree();
  const missing = 'lib/strings.js\n<<<<<<< SEARCH\nnot there\n=======\nx\n>>>>>>> REPLACE\n';
  await expect(applyEdits(dir, ['lib/**'], parseEdits(`\`\`\`file:lib/new.js\nx\n\`\`\`\n${missing}`))).rejects.toThrow(/SEARCH text for lib\/strings.js is not in the file: nothing was changed/);
  expect(existsSync(path.join(dir, 'lib/new.js'))).toBe(false);
  await expect(applyEdits(dir, ['lib/**'], parseEdits('I changed it.'))).rejects.toThrow(/holds no edit block/);
});
