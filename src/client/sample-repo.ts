import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** Files of the sample library: `capitalize` exists, `slugify` is tested but missing. */
const SAMPLE_FILES: Record<string, string> = {
  'package.json': JSON.stringify({ name: 'sample-strings', version: '1.0.0', private: true, scripts: { test: 'node --test test/' } }, null, 2) + '\n',
  'README.md': '# sample-strings\n\nA tiny string library that Warden\'s demo improves.\n',
  'lib/strings.js': [
    "'use strict';",
    '',
    '/** Upper-cases the first letter. */',
    'function capitalize(text) {',
    '  return text.charAt(0).toUpperCase() + text.slice(1);',
    '}',
    '',
    'module.exports = { capitalize };',
    '',
  ].join('\n'),
  'test/strings.test.js': [
    "'use strict';",
    "const test = require('node:test');",
    "const assert = require('node:assert');",
    "const strings = require('../lib/strings');",
    '',
    "test('capitalize upper-cases the first letter', () => {",
    "  assert.strictEqual(strings.capitalize('warden'), 'Warden');",
    '});',
    '',
    "test('slugify makes a lower-case, dash-separated slug', () => {",
    "  assert.strictEqual(typeof strings.slugify, 'function', 'slugify is missing');",
    "  assert.strictEqual(strings.slugify('  Hello, Wide World! '), 'hello-wide-world');",
    '});',
    '',
  ].join('\n'),
};

/**
 * Creates the sample git repository (branch `main`, one commit) at `dir`: a tiny JavaScript
 * library with a failing test for a missing function. Used by `npm start` and the tests.
 */
export function createSampleRepo(dir: string): string {
  mkdirSync(dir, { recursive: true });
  for (const [file, content] of Object.entries(SAMPLE_FILES)) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), content);
  }
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=Sample', '-c', 'user.email=sample@localhost', ...args], { cwd: dir, stdio: 'ignore' });
  git('init', '-q', '-b', 'main');
  git('add', '-A');
  git('commit', '-q', '-m', 'sample-strings: capitalize, and a test for slugify');
  return dir;
}
