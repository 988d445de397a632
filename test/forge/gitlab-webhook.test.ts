import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readGitLabWebhook } from '../../src/forge/gitlab-webhook';

/** GitLab webhook deliveries (bodies in test/fixtures/forge/gitlab/hooks, written from GitLab's documented payloads). */

const SECRET = 'hook-secret-4f1c9a';

function body(name: string): string {
  return readFileSync(join(__dirname, '..', 'fixtures', 'forge', 'gitlab', 'hooks', `${name}.json`), 'utf8');
}

function headers(event: string, token: string | null = SECRET): Record<string, string> {
  return { 'content-type': 'application/json', 'x-gitlab-event': event, 'x-gitlab-instance': 'https://gitlab.acme.example', 'x-gitlab-event-uuid': '1b7d1f3e-2f6c-4a3b-9d2e-6c1f0a9b8e7d', ...(token === null ? {} : { 'x-gitlab-token': token }) };
}

describe('readGitLabWebhook', () => {
  it('reads a merge request event: the iid and the source branch', () => {
    expect(readGitLabWebhook(headers('Merge Request Hook'), body('merge-request'), SECRET)).toEqual({ event: 'merge_request', pullRequest: 12, headBranch: 'warden/intent-7f3a' });
  });

  it('reads a note on a merge request from its merge_request', () => {
    expect(readGitLabWebhook(headers('Note Hook'), Buffer.from(body('note')), SECRET)).toEqual({ event: 'note', pullRequest: 12, headBranch: 'warden/intent-7f3a' });
  });

  it('reads a note on an issue as about no merge request', () => {
    expect(readGitLabWebhook(headers('Note Hook'), body('note-on-issue'), SECRET)).toEqual({ event: 'note' });
  });

  it('reads a merge request pipeline from its merge_request, a branch pipeline from its ref, a tag pipeline as neither', () => {
    expect(readGitLabWebhook(headers('Pipeline Hook'), body('pipeline-merge-request'), SECRET)).toEqual({ event: 'pipeline', pullRequest: 12, headBranch: 'warden/intent-7f3a' });
    expect(readGitLabWebhook(headers('Pipeline Hook'), body('pipeline-branch'), SECRET)).toEqual({ event: 'pipeline', headBranch: 'warden/intent-7f3a' });
    expect(readGitLabWebhook(headers('Pipeline Hook'), body('pipeline-tag'), SECRET)).toEqual({ event: 'pipeline' });
  });

  it('takes header names in any case', () => {
    expect(readGitLabWebhook({ 'X-Gitlab-Event': 'Merge Request Hook', 'X-Gitlab-Token': SECRET }, body('merge-request'), SECRET)).toMatchObject({ pullRequest: 12 });
  });

  it('refuses a delivery without the token, with a wrong one, or with a longer one', () => {
    expect(readGitLabWebhook(headers('Merge Request Hook', null), body('merge-request'), SECRET)).toEqual({ refused: 'no X-Gitlab-Token header' });
    expect(readGitLabWebhook(headers('Merge Request Hook', 'hook-secret-4f1c9b'), body('merge-request'), SECRET)).toEqual({ refused: 'X-Gitlab-Token does not match the secret' });
    expect(readGitLabWebhook(headers('Merge Request Hook', `${SECRET}x`), body('merge-request'), SECRET)).toHaveProperty('refused');
    expect(readGitLabWebhook(headers('Merge Request Hook', ''), body('merge-request'), SECRET)).toHaveProperty('refused');
  });

  it('refuses every delivery while no secret is configured, even one with an empty token', () => {
    expect(readGitLabWebhook(headers('Merge Request Hook', ''), body('merge-request'), '')).toEqual({ refused: 'no webhook secret is configured' });
  });

  it('refuses a token sent twice', () => {
    expect(readGitLabWebhook({ 'x-gitlab-event': 'Merge Request Hook', 'x-gitlab-token': [SECRET, 'other'] }, body('merge-request'), SECRET)).toHaveProperty('refused');
  });

  it('refuses events it does not read, and bodies that are not JSON objects', () => {
    expect(readGitLabWebhook(headers('Push Hook'), '{"object_kind":"push"}', SECRET)).toEqual({ refused: 'not an event Warden reads ("Push Hook")' });
    expect(readGitLabWebhook({ 'x-gitlab-token': SECRET }, '{}', SECRET)).toEqual({ refused: 'not an event Warden reads (no X-Gitlab-Event header)' });
    expect(readGitLabWebhook(headers('Merge Request Hook'), 'not json', SECRET)).toEqual({ refused: 'the body is not JSON' });
    expect(readGitLabWebhook(headers('Merge Request Hook'), '[1]', SECRET)).toEqual({ refused: 'the body is not a JSON object' });
  });

  it('leaves out an iid or branch that is not what GitLab sends', () => {
    const odd = JSON.stringify({ object_kind: 'merge_request', object_attributes: { iid: '12', source_branch: 42 } });
    expect(readGitLabWebhook(headers('Merge Request Hook'), odd, SECRET)).toEqual({ event: 'merge_request' });
  });
});
