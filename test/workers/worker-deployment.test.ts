import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
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
