import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { configJsonSchemaText } from '../../src/config/json-schema';

const BIN = path.resolve(__dirname, '../../bin/warden.js');

/** `warden ARGS` run in `cwd`, with no config named by the environment. */
function warden(cwd: string, ...args: string[]) {
  const env = { ...process.env };
  delete env.WARDEN_CONFIG;
  const result = spawnSync(process.execPath, [BIN, ...args], { cwd, env, encoding: 'utf8', timeout: 60_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** A fresh folder with `lines` as its warden.config.json. */
function withConfig(lines: readonly string[]): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'warden-config-check-'));
  writeFileSync(path.join(dir, 'warden.config.json'), lines.join('\n'));
  return dir;
}

describe('warden config check', () => {
  it('names each problem of a broken file as file:line:column: field: message, and exits 2', () => {
    const dir = withConfig([
      '{',
      '  // comments are fine',
      '  "limits": {',
      '    "budgetUsd": "five",',
      '  },',
      '  "gates": { "merge": { "timout": "2h" } },',
      '}',
    ]);
    const result = warden(dir, 'config', 'check');
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(
      'warden.config.json:4:18: limits.budgetUsd: a USD amount such as "5" or "12.50"\n' + 'warden.config.json:6:25: gates.merge: Unrecognized key: "timout"\n',
    );
  });

  it('names a syntax error by its line and column, for a file given by path', () => {
    const dir = withConfig(['{', '  "profile": "default",', '  "mode": "production",', '  "limits": { "budgetUsd": "5" ]', '}']);
    const result = warden(tmpdir(), 'config', 'check', path.join(dir, 'warden.config.json'));
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(`${path.relative(tmpdir(), path.join(dir, 'warden.config.json'))}:4:32: a comma was expected\n`);
  });

  it('with --json, prints the problems with their places', () => {
    const dir = withConfig(['{ "profile": 3 }']);
    const result = warden(dir, 'config', 'check', '--json');
    expect(result.code).toBe(2);
    expect(JSON.parse(result.stdout)).toEqual({
      source: 'warden.config.json',
      problems: [{ file: 'warden.config.json', line: 1, column: 14, text: expect.stringMatching(/^profile: Invalid option/) }],
    });
  });

  it('prints the effective configuration of a valid file, as before', () => {
    const dir = withConfig(['{', '  "$schema": "./.warden/warden.config.schema.json",', '  "profile": "conservative", // half the money', '}']);
    const result = warden(dir, 'config', 'check');
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toMatch(/warden\.config\.json is valid\. Effective configuration:\n\{\n {2}"profile": "conservative"/);
  });
});

test('warden config schema prints the JSON Schema, or writes it where it is told', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'warden-config-schema-'));
  const printed = warden(dir, 'config', 'schema');
  expect(printed).toMatchObject({ code: 0, stderr: '' });
  expect(printed.stdout).toBe(configJsonSchemaText());
  const written = warden(dir, 'config', 'schema', '--output', 'schemas/warden.json');
  expect(written).toMatchObject({ code: 0, stdout: 'wrote schemas/warden.json\n' });
  expect(readFileSync(path.join(dir, 'schemas', 'warden.json'), 'utf8')).toBe(configJsonSchemaText());
});
