import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { checkForge, missingScopes } from '../../src/client/forge-check';
import type { MergeSettings } from '../../src/shared/merge-settings';
import { useGitea } from '../helpers/gitea';

/**
 * `warden doctor`'s forge check, against a real Gitea: the token is set, accepted, and the remote names a repository there.
 *
 * @runs-last: it waits for the Gitea build .ci/run starts in the background (test/setup/sequencer.js).
 */

const forge = useGitea();

function repoWithRemote(url: string | undefined): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'warden-forge-check-'));
  execFileSync('git', ['init', '-q', dir]);
  if (url) execFileSync('git', ['remote', 'add', 'origin', url], { cwd: dir });
  return dir;
}

const merge = (tokenEnv = 'WARDEN_FORGE_TOKEN'): MergeSettings => ({
  via: 'pull-request',
  method: 'merge',
  forge: { kind: 'gitea', remote: 'origin', tokenEnv, reviewers: {}, changesCommand: '/warden changes', pollEvery: '30s', labels: ['warden'], webhookSecretEnv: 'WARDEN_FORGE_WEBHOOK_SECRET' },
});

test('a token the forge accepts: ok, with the repository and the login', async () => {
  const f = forge();
  const result = await checkForge(merge(), { env: { WARDEN_FORGE_TOKEN: f.author.token }, repoPath: repoWithRemote(`${f.webUrl}/${f.repository.path}.git`) });
  expect(result).toEqual({ status: 'ok', detail: expect.stringContaining(`gitea ${f.webUrl}/${f.repository.path} as ${f.author.login}`) });
});

test('a missing or refused token fails with the fix; a folder without the remote warns; no forge, no check', async () => {
  const f = forge();
  const repoPath = repoWithRemote(`${f.webUrl}/${f.repository.path}.git`);
  expect(await checkForge(merge(), { env: {}, repoPath })).toMatchObject({ status: 'fail', detail: expect.stringContaining('WARDEN_FORGE_TOKEN is not set') });
  const refused = await checkForge(merge(), { env: { WARDEN_FORGE_TOKEN: 'f'.repeat(40) }, repoPath });
  expect(refused).toMatchObject({ status: 'fail', fix: expect.stringContaining('the forge refuses the token in WARDEN_FORGE_TOKEN') });
  expect(JSON.stringify(refused)).not.toContain('f'.repeat(40));
  expect(await checkForge(merge(), { env: { WARDEN_FORGE_TOKEN: f.author.token }, repoPath: repoWithRemote(undefined) })).toMatchObject({ status: 'warn', detail: expect.stringContaining('has no remote origin') });
  expect(await checkForge({ via: 'local', method: 'merge' }, { env: {}, repoPath })).toBeUndefined();
});

test('scopes a pull request needs, per forge, where the forge lists them', () => {
  expect(missingScopes('github', ['repo', 'read:org'])).toEqual([]);
  expect(missingScopes('github', ['read:org'])).toEqual(['repo']);
  expect(missingScopes('gitlab', ['read_api'])).toEqual(['api']);
  expect(missingScopes('gitea', ['write:repository'])).toEqual(['write:issue']);
  expect(missingScopes('gitea', ['write:repository', 'write:issue'])).toEqual([]);
  expect(missingScopes('gitea', undefined)).toEqual([]);
});
