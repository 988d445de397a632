import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { makeSampleRepo } from '../helpers/env';

/**
 * `warden run --agent claude` on a Warden home that has no Claude Code: the pinned version is
 * installed under the home's tools folder first (from the npm registry), once.
 */
jest.setTimeout(10 * 60_000);

const BIN = path.resolve(__dirname, '../../bin/warden.js');

function run(home: string, changes: NodeJS.ProcessEnv, ...args: string[]) {
  // A PATH with node and the system's programs only: no claude on it.
  const env = { ...process.env, WARDEN_HOME: home, PATH: `${path.dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`, ...changes };
  const result = spawnSync(process.execPath, [BIN, 'run', ...args], { env, encoding: 'utf8', timeout: 9 * 60_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

// --budget is refused after the CLI is found: the run stops there, before any server is needed.
const ARGS = ['--goal', 'Add slugify', '--agent', 'claude', '--model', 'claude-sonnet-4-5', '--budget', 'lots'];

test('the first run with --agent claude installs it under the Warden home; WARDEN_INSTALL=0 installs nothing', () => {
  const repo = makeSampleRepo();
  const home = mkdtempSync(path.join(tmpdir(), 'warden-cli-install-'));
  const claude = path.join(home, 'tools', 'npm', 'node_modules', '.bin', 'claude');

  const refused = run(home, { WARDEN_INSTALL: '0' }, '--repo', repo, ...ARGS.slice(0, -2));
  expect(refused.code).toBe(2);
  expect(refused.stderr).toMatch(/claude is not installed/);
  expect(existsSync(claude)).toBe(false);

  const first = run(home, {}, '--repo', repo, ...ARGS);
  expect(first.stdout).toContain(`claude is not installed: installing its pinned version under ${path.join(home, 'tools')}`);
  expect(first.stderr).toMatch(/--budget must be a USD amount/);
  expect(existsSync(claude)).toBe(true);
  expect(spawnSync(claude, ['--version'], { encoding: 'utf8' }).stdout).toMatch(/Claude Code/);

  const again = run(home, {}, '--repo', repo, ...ARGS);
  expect(again.stdout).not.toMatch(/installing/);
  expect(again.stderr).toMatch(/--budget must be a USD amount/);
});
