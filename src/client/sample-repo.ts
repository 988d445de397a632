import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** Files of the sample library: `capitalize` exists, `slugify` is tested but missing. */
const SAMPLE_FILES: Record<string, string> = {
  'package.json': JSON.stringify({ name: 'sample-strings', version: '1.0.0', private: true, scripts: { test: 'node --test' } }, null, 2) + '\n',
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

/** A design for the sample repo that passes the LLD checks (for command agents in tests and benches). */
export const SAMPLE_LLD = ['# Low-level design', '', '## Files', '- lib/strings.js: add `slugify(text)`', '', '## Tests', '- test/strings.test.js already covers slugify', ''].join('\n');

/** A test specification for the sample repo that passes the spec checks. */
export const SAMPLE_SPEC = [
  '# Test specification',
  '',
  '| Requirement | Test | File |',
  '|---|---|---|',
  '| slugify makes a lower-case slug | `slugify makes a lower-case, dash-separated slug` | `test/strings.test.js` (existing) |',
  '',
].join('\n');

/**
 * Wraps a command agent's shell command so the lld and spec stages answer with SAMPLE_LLD and
 * SAMPLE_SPEC; every other stage's prompt is piped on to `command` unchanged.
 */
export function answeringDesignStages(command: string): string {
  const b64 = (text: string): string => Buffer.from(text).toString('base64');
  return [
    'warden_prompt=$(cat)',
    'case "$warden_prompt" in',
    `  "# Warden: lld"*) printf %s ${b64(SAMPLE_LLD)} | base64 -d; exit 0 ;;`,
    `  "# Warden: spec"*) printf %s ${b64(SAMPLE_SPEC)} | base64 -d; exit 0 ;;`,
    'esac',
    `printf '%s\\n' "$warden_prompt" | { ${command}
}`,
  ].join('\n');
}
