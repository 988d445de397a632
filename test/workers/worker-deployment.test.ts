import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConfigFileError, formatPlacedProblem, loadConfig, resolveConfig } from '../../src/config/load';
import { deploymentVersionOf } from '../../src/workers/worker-deployment';

/** Worker versioning's settings: off unless set, and the build id a worker polls as. */

function loadFile(content: unknown): ReturnType<typeof loadConfig> {
  const dir = mkdtempSync(path.join(tmpdir(), 'warden-deployment-'));
  writeFileSync(path.join(dir, 'warden.config.json'), JSON.stringify(content));
  return loadConfig(undefined, dir);
}

test('versioning is off unless the config names a deployment', () => {
  expect(resolveConfig({}).worker.deployment).toBeUndefined();
  expect(loadFile({ worker: { deployment: { name: 'warden', buildId: '2.0.0' } } }).config.worker.deployment).toEqual({ name: 'warden', buildId: '2.0.0' });
  expect(loadFile({ worker: { deployment: { name: 'warden' } } }).config.worker.deployment).toEqual({ name: 'warden' });
});

test('a deployment name with a dot, a build id with a space or an unknown key is refused', () => {
  for (const [deployment, problem] of [
    [{ name: 'warden.prod' }, /worker\.deployment\.name: a deployment name has no dots or white space/],
    [{ name: 'warden', buildId: '2 0' }, /worker\.deployment\.buildId: a build id has no white space/],
    [{ name: 'warden', build: '2' }, /worker\.deployment/],
  ] as const) {
    try {
      loadFile({ worker: { deployment } });
      throw new Error(`accepted ${JSON.stringify(deployment)}`);
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigFileError);
      expect((error as ConfigFileError).problems.map(formatPlacedProblem).join('\n')).toMatch(problem);
    }
  }
});

test('the default build id is the package version and a hash of the workflow code: the same code, the same id', () => {
  const { version } = JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string };
  const a = deploymentVersionOf({ name: 'warden' }, 'workflow code');
  expect(a).toEqual({ deploymentName: 'warden', buildId: expect.stringMatching(new RegExp(`^${version.replaceAll('.', '\\.')}-[0-9a-f]{12}$`)) });
  expect(deploymentVersionOf({ name: 'warden' }, 'workflow code')).toEqual(a);
  expect(deploymentVersionOf({ name: 'warden' }, 'changed workflow code').buildId).not.toBe(a.buildId);
  expect(deploymentVersionOf({ name: 'warden', buildId: 'release-7' }, 'workflow code').buildId).toBe('release-7');
});

const BIN = path.resolve(__dirname, '../../bin/warden.js');

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** `warden ARGS` in `cwd`, whose embedded Temporal server would be on `port`, with no other server named. */
function warden(cwd: string, port: number, ...args: string[]) {
  const env: NodeJS.ProcessEnv = { ...process.env, WARDEN_HOME: mkdtempSync(path.join(tmpdir(), 'warden-deployment-home-')), WARDEN_TEMPORAL_PORT: String(port) };
  delete env.WARDEN_CONFIG;
  delete env.TEMPORAL_ADDRESS;
  const result = spawnSync(process.execPath, [BIN, ...args], { cwd, env, encoding: 'utf8', timeout: 60_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

test('warden workers and promote say in one line that versioning is off, or that no server runs, and start none', async () => {
  const port = await closedPort();
  const plain = mkdtempSync(path.join(tmpdir(), 'warden-deployment-cwd-'));
  const off = 'warden: worker versioning is off: set worker.deployment.name in the config (docs/configuration.md), or give --deployment NAME\n';
  expect(warden(plain, port, 'workers')).toEqual({ code: 2, stdout: '', stderr: off });
  expect(warden(plain, port, 'workers', 'promote', 'B')).toEqual({ code: 2, stdout: '', stderr: off });
  const configured = mkdtempSync(path.join(tmpdir(), 'warden-deployment-cwd-'));
  writeFileSync(path.join(configured, 'warden.config.json'), JSON.stringify({ worker: { deployment: { name: 'warden' } } }));
  const down = 'warden: the Temporal server is not running: start it with `warden dev` (or set TEMPORAL_ADDRESS); the versions are those of the workers polling it\n';
  expect(warden(configured, port, 'workers')).toEqual({ code: 1, stdout: '', stderr: down });
  expect(warden(plain, port, 'workers', 'promote', 'B', '--deployment', 'warden')).toEqual({ code: 1, stdout: '', stderr: down });
});
