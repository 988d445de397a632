import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { configJsonSchemaText } from '../../src/config/json-schema';
import { loadConfig } from '../../src/config/load';
import { findBaseBranch, findTestCommand } from '../../src/client/repo-detection';

const BIN = path.resolve(__dirname, '../../bin/warden.js');

/** `warden ARGS` run in `cwd`, as a user runs it. */
function warden(cwd: string, ...args: string[]) {
  const result = spawnSync(process.execPath, [BIN, ...args], { cwd, env: { ...process.env, USER: 'init-tester' }, encoding: 'utf8', timeout: 60_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd, encoding: 'utf8' }).trim();
}

/** A fresh folder holding `files`. */
function folder(files: Record<string, string> = {}): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'warden-init-'));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    writeFileSync(path.join(dir, name), text);
  }
  return dir;
}

/** A git repository on branch `main` holding `files`, committed. */
function repo(files: Record<string, string> = {}): string {
  const dir = folder(files);
  git(dir, 'init', '-q', '-b', 'main');
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '--allow-empty', '-m', 'init');
  return dir;
}

/** How many lines of `file` are exactly `line`. */
function linesEqual(file: string, line: string): number {
  return readFileSync(file, 'utf8').split(/\r?\n/).filter((l) => l === line).length;
}

const PACKAGE_JSON = JSON.stringify({ name: 'app', scripts: { test: 'jest' } });

describe('warden init in a repository with a package.json', () => {
  const dir = repo({ 'package.json': PACKAGE_JSON, '.gitignore': 'node_modules/' });
  const config = path.join(dir, 'warden.config.json');
  let first: ReturnType<typeof warden>;
  beforeAll(() => {
    first = warden(dir, 'init');
  });

  it('writes a config that loads, with the test command and base branch it found, and says what next', () => {
    expect(first).toMatchObject({ code: 0, stderr: '' });
    expect(first.stdout).toMatch(/^wrote warden\.config\.json\n/);
    expect(first.stdout).toContain("tests: npm test --silent (found from package.json's test script)");
    expect(first.stdout).toContain('base branch: main (the current branch)');
    expect(first.stdout).toMatch(/next:\n {2}warden doctor .*\n {2}warden run --repo \. --goal "\.\.\."/);
    const { config: loaded, source } = loadConfig(undefined, dir);
    expect(source).toBe(config);
    expect(loaded.run).toEqual({ testCommand: 'npm test --silent', baseBranch: 'main' });
    expect(loaded.profile).toBe('default');
    expect(readFileSync(config, 'utf8')).toMatch(/^ {2}\/\/ /m);
  });

  it("points $schema at a copy of the schema under .warden/, Warden not being installed in the repository's node_modules", () => {
    expect(readFileSync(config, 'utf8')).toContain('"$schema": "./.warden/warden.config.schema.json",');
    expect(readFileSync(path.join(dir, '.warden', 'warden.config.schema.json'), 'utf8')).toBe(configJsonSchemaText());
    expect(first.stdout).toContain('$schema: ./.warden/warden.config.schema.json, written now');
  });

  it('adds .warden/ to the existing .gitignore once, so git sees only the config', () => {
    expect(readFileSync(path.join(dir, '.gitignore'), 'utf8')).toMatch(/^node_modules\/\n# Warden's state.*\n\.warden\/\n$/);
    expect(first.stdout).toContain('added .warden/ to .gitignore');
    expect(git(dir, 'diff', '--name-only')).toBe('.gitignore');
    expect(git(dir, 'ls-files', '--others', '--exclude-standard')).toBe('warden.config.json');
  });

  it('refuses a second run without --force (exit 2, saying so), and leaves the file as it was', () => {
    writeFileSync(config, `${readFileSync(config, 'utf8')}// edited\n`);
    const edited = readFileSync(config, 'utf8');
    const second = warden(dir, 'init');
    expect(second.code).toBe(2);
    expect(second.stderr).toBe(`warden: ${config} already exists: warden init leaves it as it is (--force replaces it with a new warden.config.json)\n`);
    expect(readFileSync(config, 'utf8')).toBe(edited);
  });

  it('with --force replaces the config, and still ignores .warden/ once', () => {
    const forced = warden(dir, 'init', '--force', '--profile', 'conservative');
    expect(forced.code).toBe(0);
    expect(forced.stdout).toMatch(/^replaced warden\.config\.json\n/);
    expect(forced.stdout).toContain('.gitignore already ignores .warden/');
    expect(loadConfig(undefined, dir).config.profile).toBe('conservative');
    expect(linesEqual(path.join(dir, '.gitignore'), '.warden/')).toBe(1);
  });
});

test('with Warden installed in the repository, $schema points at the schema its package ships', () => {
  const dir = repo({ 'package.json': PACKAGE_JSON, 'node_modules/warden/dist/warden.config.schema.json': configJsonSchemaText() });
  const result = warden(dir, 'init');
  expect(result.code).toBe(0);
  expect(readFileSync(path.join(dir, 'warden.config.json'), 'utf8')).toContain('"$schema": "./node_modules/warden/dist/warden.config.schema.json",');
  expect(existsSync(path.join(dir, '.warden'))).toBe(false);
  expect(linesEqual(path.join(dir, '.gitignore'), '.warden/')).toBe(1);
  expect(result.stdout).toContain('created .gitignore with .warden/');
});

test('--repo sets up another repository at its top, and says to go there; without tests found, it asks for a command', () => {
  const dir = repo({ 'docs/notes.md': 'no tests here\n' });
  const elsewhere = folder();
  const result = warden(elsewhere, 'init', '--repo', path.join(dir, 'docs'));
  expect(result.code).toBe(0);
  expect(result.stdout).toContain('tests: no test command found: set run.testCommand in it');
  expect(result.stdout).toContain(`next:\n  cd ${dir}\n`);
  const text = readFileSync(path.join(dir, 'warden.config.json'), 'utf8');
  expect(text).toContain('    // "testCommand": "make test",');
  expect(loadConfig(undefined, dir).config.run).toEqual({ baseBranch: 'main' });
  expect(existsSync(path.join(elsewhere, 'warden.config.json'))).toBe(false);
});

test('a folder outside git is refused, and nothing is written', () => {
  const dir = folder({ 'package.json': PACKAGE_JSON });
  const result = warden(dir, 'init');
  expect(result.code).toBe(2);
  expect(result.stderr).toBe(`warden: not a git repository: ${dir} (warden init sets Warden up in one: run git init first)\n`);
  expect(['warden.config.json', '.gitignore', '.warden'].filter((name) => existsSync(path.join(dir, name)))).toEqual([]);
});

describe('what init finds in a repository', () => {
  it.each([
    ['package.json with a test script', { 'package.json': PACKAGE_JSON, 'go.mod': 'module x\n' }, 'npm test --silent'],
    ['pytest settings in pyproject.toml', { 'package.json': '{"scripts":{}}', 'pyproject.toml': '[project]\nname = "x"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n' }, 'pytest -q'],
    ['a conftest.py', { 'conftest.py': '' }, 'pytest -q'],
    ['a go.mod', { 'go.mod': 'module x\n' }, 'go test ./...'],
    ['a Cargo.toml', { 'Cargo.toml': '[package]\nname = "x"\n' }, 'cargo test'],
    ['a Makefile with a test target', { Makefile: 'build:\n\tcc x.c\n\ntest: build\n\t./run-tests\n' }, 'make test'],
  ])('%s', (_, files, command) => {
    expect(findTestCommand(folder(files))?.value).toBe(command);
  });

  it('nothing from a Makefile without a test target, a pyproject.toml without pytest, or nothing at all', () => {
    expect(findTestCommand(folder({ Makefile: 'build:\n\tcc x.c\n# test: later\n', 'pyproject.toml': '[project]\nname = "x"\n' }))).toBeUndefined();
    expect(findTestCommand(folder())).toBeUndefined();
  });

  it("the base branch: the current branch, else origin's HEAD when HEAD is detached, else none", () => {
    const origin = repo();
    git(origin, 'branch', '-m', 'main', 'trunk');
    const clone = folder();
    git(clone, 'clone', '-q', origin, '.');
    git(clone, 'checkout', '-q', '-b', 'feature');
    expect(findBaseBranch(clone)).toEqual({ value: 'feature', because: 'the current branch' });
    git(clone, 'checkout', '-q', '--detach');
    expect(findBaseBranch(clone)).toEqual({ value: 'trunk', because: "origin's HEAD" });
    git(origin, 'checkout', '-q', '--detach');
    expect(findBaseBranch(origin)).toBeUndefined();
  });
});

describe('warden init and the forge origin is on', () => {
  it('with origin on github.com, writes the pull-request merge commented out, and says how to turn it on', () => {
    const dir = repo({ 'package.json': PACKAGE_JSON });
    git(dir, 'remote', 'add', 'origin', 'https://github.com/acme/app.git');
    const result = warden(dir, 'init');
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toContain('merge: local; origin is on github.com: to merge through its pull requests, uncomment merge in the config (or warden init --force --forge github)');
    const text = readFileSync(path.join(dir, 'warden.config.json'), 'utf8');
    expect(text).toContain('  //   "forge": { "kind": "github", "reviewers": { "init-tester-on-the-forge": "init-tester" } },');
    const loaded = loadConfig(path.join(dir, 'warden.config.json'));
    expect(loaded.config.merge).toBeUndefined();
  });

  it('with --forge, writes it out: the config merges through pull requests on that forge', () => {
    const dir = repo({ 'package.json': PACKAGE_JSON });
    git(dir, 'remote', 'add', 'origin', 'http://127.0.0.1:3000/acme/app.git');
    const result = warden(dir, 'init', '--forge', 'gitea');
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toContain('merge: through pull requests on gitea (origin is on 127.0.0.1)');
    expect(result.stdout).toContain("warden doctor                       check that this machine can run intents, and the forge's token");
    const { config } = loadConfig(path.join(dir, 'warden.config.json'));
    expect(config.merge).toMatchObject({ via: 'pull-request', method: 'merge', forge: { kind: 'gitea', reviewers: { 'init-tester-on-the-forge': 'init-tester' }, tokenEnv: 'WARDEN_FORGE_TOKEN' } });
  });

  it('refuses --forge where there is no origin, and an unknown kind', () => {
    const dir = repo({ 'package.json': PACKAGE_JSON });
    expect(warden(dir, 'init', '--forge', 'gitea')).toMatchObject({ code: 2, stderr: expect.stringContaining('has no remote origin to push pull requests to') });
    expect(warden(dir, 'init', '--forge', 'bitbucket')).toMatchObject({ code: 2, stderr: expect.stringContaining("argument 'bitbucket' is invalid") });
    expect(existsSync(path.join(dir, 'warden.config.json'))).toBe(false);
  });
});
