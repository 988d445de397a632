import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { intentFromFlags } from '../../src/client/intent-input';
import { ConfigFileError, formatPlacedProblem, loadConfig, resolveConfig } from '../../src/config/load';

/** Writes `lines` as warden.config.json in a fresh folder; returns the folder. */
function folderWith(lines: readonly string[]): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'warden-config-file-'));
  writeFileSync(path.join(dir, 'warden.config.json'), lines.join('\n'));
  return dir;
}

/** The lines a bad config file is refused with. */
function refusal(dir: string): string[] {
  try {
    loadConfig(undefined, dir);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigFileError);
    const e = error as ConfigFileError;
    expect(e.message).toBe([`${e.file} is invalid:`, ...e.problems.map(formatPlacedProblem)].join('\n'));
    return e.problems.map(formatPlacedProblem);
  }
  throw new Error('accepted');
}

test('a config file may have comments, trailing commas and a $schema, which is ignored', () => {
  const dir = folderWith([
    '{',
    '  "$schema": "./.warden/warden.config.schema.json",',
    '  // half the default budget',
    '  "limits": { "budgetUsd": "2.50", },',
    '  /* the repository */',
    '  "run": { "testCommand": "make test", "baseBranch": "trunk", "paths": ["src/**"], },',
    '}',
  ]);
  const { config, source } = loadConfig(undefined, dir);
  expect(source).toBe(path.join(dir, 'warden.config.json'));
  expect(config.limits.budgetUsd).toBe('2.50');
  expect(config.run).toEqual({ testCommand: 'make test', baseBranch: 'trunk', paths: ['src/**'] });
  expect(config).not.toHaveProperty('$schema');
});

test('each problem is named at its line and column: a wrong value at the value, an unknown key at the key', () => {
  const dir = folderWith([
    '{',
    '  "limits": {',
    '    "budgetUsd": 5,',
    '    "attempts": { "impl": 2, "implementation": 3 }',
    '  },',
    '  "profile": "careful"',
    '}',
  ]);
  expect(refusal(dir)).toEqual([
    'warden.config.json:3:18: limits.budgetUsd: Invalid input: expected string, received number',
    'warden.config.json:4:30: limits.attempts: Unrecognized key: "implementation"',
    expect.stringMatching(/^warden\.config\.json:6:14: profile: Invalid option: expected one of "conservative"\|"default"/),
  ]);
});

test('problems found once the file is merged with its profile are placed at the fields the file wrote', () => {
  const dir = folderWith([
    '{',
    '  "worker": {',
    '    "errorRate": { "warning": 0.3 },',
    '    "maxCachedWorkflows": 2000',
    '  },',
    '  "routing": { "impl": "nobody" }',
    '}',
  ]);
  expect(refusal(dir)).toEqual([
    // The critical rate (0.25) is the profile's: the warning rate is the field the file wrote.
    'warden.config.json:3:31: worker.errorRate.warning: the warning rate (0.3) must be below the critical rate (0.25)',
  ]);
  const heap = folderWith(['{', '  "worker": {', '    "maxCachedWorkflows": 2000', '  },', '  "routing": { "impl": "nobody" }', '}']);
  // workflowHeapMb is the profile's: the problem is placed at the nearest field the file wrote.
  expect(refusal(heap)).toEqual([
    expect.stringMatching(/^warden\.config\.json:2:13: worker\.workflowHeapMb: 256 MB is too small for worker\.maxCachedWorkflows \(2000\)/),
    'warden.config.json:5:24: routing.impl: names agent "nobody", which is not in agents',
  ]);
});

test('a syntax error is named at its line and column; a file elsewhere by its full path', () => {
  const dir = folderWith(['{', '  "profile": "default",', '  "mode" "production"', '}']);
  expect(refusal(dir)).toEqual(['warden.config.json:3:10: a colon was expected']);
  const elsewhere = path.join(dir, 'warden.config.json');
  expect(() => loadConfig(elsewhere, mkdtempSync(path.join(tmpdir(), 'warden-cwd-')))).toThrow(`${elsewhere} is invalid:\n${elsewhere}:3:10: a colon was expected`);
});

test("warden run takes the config's run settings where its flags do not say, and its flags over them", () => {
  // A repository with nothing that tells its test command, and two branches.
  const repo = mkdtempSync(path.join(tmpdir(), 'warden-run-defaults-'));
  const git = (...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd: repo, stdio: 'ignore' });
  git('init', '-q', '-b', 'main');
  git('commit', '-q', '--allow-empty', '-m', 'init');
  git('branch', 'trunk');
  const flags = { repo, goal: 'Add slugify', agent: 'command', cmd: 'true' };
  expect(() => intentFromFlags(flags, repo, resolveConfig({}))).toThrow(/no test command for .*or set run\.testCommand in the config/);
  const config = resolveConfig({ run: { testCommand: 'make check', baseBranch: 'trunk', paths: ['src/**'] } });
  expect(intentFromFlags(flags, repo, config)).toMatchObject({ testCommand: 'make check', baseBranch: 'trunk', paths: ['src/**'] });
  expect(intentFromFlags({ ...flags, testCmd: 'true', base: 'main', paths: ['lib/**'] }, repo, config)).toMatchObject({ testCommand: 'true', baseBranch: 'main', paths: ['lib/**'] });
  // The config's test command is kept in the intent's history as a flag's would be: no secrets.
  const secret = resolveConfig({ run: { testCommand: 'API_TOKEN=abcdefgh12345678 npm test' } });
  expect(() => intentFromFlags(flags, repo, secret)).toThrow(/^the config's run\.testCommand holds what looks like a secret/);
});

test("warden run records the config's placement: the remote's URL, a path made absolute; a repository without that remote is refused", () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'warden-placement-'));
  const repo = path.join(dir, 'checkout');
  const git = (...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd: dir, stdio: 'ignore' });
  git('init', '-q', '-b', 'main', repo);
  git('-C', repo, 'commit', '-q', '--allow-empty', '-m', 'init');
  const flags = { repo, goal: 'Add slugify', agent: 'command', cmd: 'true', testCmd: 'true' };
  const config = resolveConfig({ placement: { moveAfter: '2m' } });
  expect(config.placement).toEqual({ remote: 'origin', moveAfter: '2m' });
  expect(() => intentFromFlags(flags, repo, config)).toThrow("the config's placement works from the remote origin, which");
  git('-C', repo, 'remote', 'add', 'origin', '../origin.git');
  expect(intentFromFlags(flags, repo, config).placement).toEqual({ remote: 'origin', remoteUrl: path.join(dir, 'origin.git'), moveAfter: '2m' });
  git('-C', repo, 'remote', 'set-url', 'origin', 'git@forge.example:team/app.git');
  expect(intentFromFlags(flags, repo, config).placement?.remoteUrl).toBe('git@forge.example:team/app.git');
  expect(intentFromFlags(flags, repo, resolveConfig({})).placement).toBeUndefined();
  expect(() => resolveConfig({ placement: { moveAfter: '0s' } })).toThrow(/placement\.moveAfter/);
});
