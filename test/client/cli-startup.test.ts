import { spawnSync } from 'node:child_process';
import path from 'node:path';

/**
 * A command loads what it runs when it runs (src/client/cli.ts): `warden --help`, and an input
 * refused before any work, must not load the Temporal client, the database driver or the config's
 * schema. A top-level import of one of them in any command module would put them back into
 * every command's start, which nothing else would notice.
 */
const ROOT = path.resolve(__dirname, '../..');
const HEAVY = /node_modules\/(@temporalio\/|pg\/|zod\/|@grpc\/|protobufjs\/)/;

/** The modules a real `warden ARGS…` process loaded, in its own Node (not jest's registry). */
function modulesLoadedBy(args: string[]): { exitCode: number; modules: string[] } {
  const script = [
    `require(${JSON.stringify(path.join(ROOT, 'bin/checkout-loader'))});`,
    `const { main } = require(${JSON.stringify(path.join(ROOT, 'src/client/cli.ts'))});`,
    `main(['node', 'warden', ...${JSON.stringify(args)}]).then((code) => {`,
    `  require('node:fs').writeSync(3, JSON.stringify({ exitCode: code, modules: Object.keys(require.cache) }));`,
    '});',
  ].join('\n');
  const result = spawnSync(process.execPath, ['-e', script], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe', 'pipe'], timeout: 60_000 });
  const report = result.output[3];
  if (!report) throw new Error(`no report from the process (status ${result.status}): ${result.stderr}`);
  return JSON.parse(report) as { exitCode: number; modules: string[] };
}

test.each([
  ['warden --help', ['--help']],
  ['warden run --help', ['run', '--help']],
  ['warden list with a --limit that is not a count', ['list', '--limit', 'x']],
  ['warden approve without an id', ['approve']],
])('%s loads no Temporal client, database driver or schema library', (_name, args) => {
  const { exitCode, modules } = modulesLoadedBy(args);
  expect([0, 2]).toContain(exitCode);
  expect(modules.filter((file) => HEAVY.test(file))).toEqual([]);
  expect(modules.length).toBeLessThan(150);
});

test('a command that reaches its work loads it: warden config check reads the config with its schema', () => {
  const { modules } = modulesLoadedBy(['config', 'check', '--config', path.join(ROOT, 'no-such-config.json')]);
  expect(modules.some((file) => /node_modules\/zod\//.test(file))).toBe(true);
});
