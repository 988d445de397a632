import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { findProgram, programOf } from '../../src/client/command-program';

describe('programOf: the program a shell command runs first', () => {
  test.each([
    ['claude -p', 'claude'],
    ['  /usr/local/bin/aider --yes', '/usr/local/bin/aider'],
    ["'my agent' --flag", 'my agent'],
    ['"./bin/agent" {prompt}', './bin/agent'],
    ['FOO=1 BAR="x y" codex exec', 'codex'],
    ['no-such-agent-binary -p', 'no-such-agent-binary'],
    ['agent|tee log', 'agent'],
  ])('%s → %s', (command, program) => {
    expect(programOf(command)).toBe(program);
  });

  test.each([
    ['a shell keyword', 'if true; then claude -p; fi'],
    ['a builtin', 'cd sub && claude -p'],
    ['a variable', '$AGENT -p'],
    ['a command substitution', '"$(which claude)" -p'],
    ['a subshell', '(cd sub; claude -p)'],
    ['an assignment alone, then more lines', 'prompt=$(cat)\nclaude -p "$prompt"'],
    ['a glob', './agent* -p'],
    ['an unclosed quote', "'claude -p"],
  ])('%s is left to the shell', (_name, command) => {
    expect(programOf(command)).toBeUndefined();
  });
});

describe('findProgram', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'warden-prog-'));
  mkdirSync(path.join(dir, 'bin'));
  const tool = path.join(dir, 'bin', 'tool');
  writeFileSync(tool, '#!/bin/sh\n');
  chmodSync(tool, 0o755);
  const plain = path.join(dir, 'bin', 'plain');
  writeFileSync(plain, 'not executable');

  test('a name on PATH', () => {
    expect(findProgram('tool', '/', `/nonexistent${path.delimiter}${path.join(dir, 'bin')}`)).toBe(tool);
    expect(findProgram('tool', '/', '/usr/bin')).toBeUndefined();
  });

  test('a path, relative to the folder given', () => {
    expect(findProgram('./bin/tool', dir, '')).toBe(tool);
    expect(findProgram(tool, '/', '')).toBe(tool);
    expect(findProgram('./bin/missing', dir, '')).toBeUndefined();
  });

  test('a file that is not executable, or a folder, is not a program', () => {
    expect(findProgram(plain, '/', '')).toBeUndefined();
    expect(findProgram('bin', dir, dir)).toBeUndefined();
  });
});
