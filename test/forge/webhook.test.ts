import { readFileSync } from 'node:fs';
import path from 'node:path';
import { readSignedDelivery, readWebhookDelivery, signBody } from '../../src/forge/webhook';

const SECRET = 'hook-secret';

function delivery(event: Record<string, string>, payload: unknown, options: { secret?: string; tamper?: (body: string) => string } = {}) {
  const body = JSON.stringify(payload);
  const signature = signBody(body, options.secret ?? SECRET);
  return { headers: { ...event, 'X-Hub-Signature-256': signature }, body: options.tamper ? options.tamper(body) : body };
}

const giteaPullRequest = { action: 'opened', number: 7, pull_request: { number: 7, head: { ref: 'warden/intent-1', sha: 'a'.repeat(40) } } };

describe('readSignedDelivery', () => {
  it('accepts a Gitea delivery signed with the secret and reads its pull request', () => {
    const reading = readSignedDelivery(delivery({ 'X-Gitea-Event': 'pull_request', 'X-GitHub-Event': 'pull_request' }, giteaPullRequest), SECRET);
    expect(reading).toEqual({ accepted: true, forge: 'gitea', event: 'pull_request', action: 'opened', pullRequest: 7, headBranch: 'warden/intent-1', headSha: 'a'.repeat(40) });
  });

  it('takes the body as bytes too, and headers in any case', () => {
    const signed = delivery({ 'x-github-event': 'pull_request_review' }, { action: 'submitted', pull_request: { number: 3, head: { ref: 'f', sha: 'b'.repeat(40) } } });
    expect(readSignedDelivery({ headers: signed.headers, body: Buffer.from(signed.body) }, SECRET)).toMatchObject({ accepted: true, forge: 'github', event: 'pull_request_review', pullRequest: 3, headBranch: 'f' });
  });

  it('refuses a changed body, a wrong secret, a missing or malformed signature, and an empty secret', () => {
    const event = { 'X-Gitea-Event': 'pull_request' };
    expect(readSignedDelivery(delivery(event, giteaPullRequest, { tamper: (b) => b.replace('"number":7', '"number":8') }), SECRET)).toMatchObject({ accepted: false, reason: expect.stringMatching(/does not match the body/) });
    expect(readSignedDelivery(delivery(event, giteaPullRequest, { secret: 'other' }), SECRET)).toMatchObject({ accepted: false, reason: expect.stringMatching(/does not match/) });
    expect(readSignedDelivery({ headers: event, body: JSON.stringify(giteaPullRequest) }, SECRET)).toMatchObject({ accepted: false, reason: expect.stringMatching(/no x-hub-signature-256/) });
    expect(readSignedDelivery({ headers: { ...event, 'X-Hub-Signature-256': 'sha256=abc' }, body: '{}' }, SECRET)).toMatchObject({ accepted: false, reason: expect.stringMatching(/does not match/) });
    expect(readSignedDelivery({ headers: { ...event, 'X-Hub-Signature-256': 'sha1=abc' }, body: '{}' }, SECRET)).toMatchObject({ accepted: false, reason: expect.stringMatching(/sha256=<hex>/) });
    expect(readSignedDelivery(delivery(event, giteaPullRequest, { secret: '' }), '')).toMatchObject({ accepted: false, reason: expect.stringMatching(/no webhook secret/) });
  });

  it('refuses a delivery that names no event, or whose signed body is not a JSON object', () => {
    expect(readSignedDelivery(delivery({}, giteaPullRequest), SECRET)).toMatchObject({ accepted: false, reason: expect.stringMatching(/not a Gitea or GitHub delivery/) });
    const notJson = 'payload=%7B%7D';
    expect(readSignedDelivery({ headers: { 'X-Gitea-Event': 'push', 'X-Hub-Signature-256': signBody(notJson, SECRET) }, body: notJson }, SECRET)).toMatchObject({ accepted: false, reason: expect.stringMatching(/not JSON/) });
  });

  it('reads the pull request of a comment, a check run and a status', () => {
    expect(readSignedDelivery(delivery({ 'X-GitHub-Event': 'issue_comment' }, { action: 'created', issue: { number: 4, pull_request: { url: 'x' } } }), SECRET)).toMatchObject({ accepted: true, pullRequest: 4 });
    expect(readSignedDelivery(delivery({ 'X-GitHub-Event': 'issue_comment' }, { action: 'created', issue: { number: 5 } }), SECRET)).not.toHaveProperty('pullRequest');
    expect(
      readSignedDelivery(delivery({ 'X-GitHub-Event': 'check_run' }, { action: 'completed', check_run: { head_sha: 'c'.repeat(40), check_suite: { head_branch: 'feat', head_sha: 'c'.repeat(40) }, pull_requests: [{ number: 9 }] } }), SECRET),
    ).toMatchObject({ accepted: true, pullRequest: 9, headBranch: 'feat', headSha: 'c'.repeat(40) });
    expect(readSignedDelivery(delivery({ 'X-Gitea-Event': 'status' }, { sha: 'd'.repeat(40), context: 'ci/test', state: 'success' }), SECRET)).toEqual({ accepted: true, forge: 'gitea', event: 'status', headSha: 'd'.repeat(40) });
    expect(readSignedDelivery(delivery({ 'X-GitHub-Event': 'status' }, { sha: 'e'.repeat(40), branches: [{ name: 'feat' }] }), SECRET)).toMatchObject({ headSha: 'e'.repeat(40), headBranch: 'feat' });
  });
});

describe('readWebhookDelivery', () => {
  it('routes GitLab deliveries to their token check, not the signature check', () => {
    const body = readFileSync(path.join(__dirname, '..', 'fixtures', 'forge', 'gitlab', 'hooks', 'merge-request.json'), 'utf8');
    expect(readWebhookDelivery({ headers: { 'X-Gitlab-Event': 'Merge Request Hook', 'X-Gitlab-Token': SECRET }, body }, SECRET)).toMatchObject({ accepted: true, forge: 'gitlab', event: 'merge_request', pullRequest: 12 });
    expect(readWebhookDelivery({ headers: { 'X-Gitlab-Event': 'Merge Request Hook', 'X-Gitlab-Token': 'wrong', 'X-Hub-Signature-256': signBody(body, SECRET) }, body }, SECRET)).toMatchObject({ accepted: false });
  });

  it('checks Gitea and GitHub deliveries by their signature', () => {
    expect(readWebhookDelivery(delivery({ 'X-Gitea-Event': 'pull_request' }, giteaPullRequest), SECRET)).toMatchObject({ accepted: true, pullRequest: 7 });
  });
});
