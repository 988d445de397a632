import { findFreePort } from '../../src/shared/ports';
import { ForgeError } from '../../src/forge/forge-client';
import { GITLAB_PIPELINE_CHECK, GitLabClient, gitlabCheckState } from '../../src/forge/gitlab';
import { loadPairs, startReplay, type RecordedPair, type Replay } from '../helpers/forge-replay';

/**
 * The GitLab adapter against recorded request/response pairs (test/fixtures/forge/gitlab), written
 * from GitLab's documented REST API v4: GitLab itself is not reachable from the tests. The project
 * sits in a subgroup, so its id in paths is `acme%2Fplatform%2Fwidgets`.
 */

const TOKEN = 'glpat-test000000000000000';
const HEAD = '5d1f0e2c3b4a59687766554433221100ffeeddcc';
const REBASED = 'a1b2c3d4e5f60718293a4b5c6d7e8f9012345678';
const MERGE = 'c0ffee1234567890abcdef1234567890abcdef12';
const SQUASH = '5a5a5a5a6b6b6b6b7c7c7c7c8d8d8d8d9e9e9e9e';
const MESSAGE = { title: 'Add retry budget to the widget fetcher (!12)', message: 'Intent 7f3a, approved by alice.' };

let replay: Replay | undefined;

afterEach(async () => {
  const done = replay;
  replay = undefined;
  if (done === undefined) return;
  await done.close();
  done.assertDone();
});

async function clientFor(pairs: RecordedPair[] | string): Promise<GitLabClient> {
  replay = await startReplay(typeof pairs === 'string' ? loadPairs(`gitlab/${pairs}`) : pairs, { prefix: '/api/v4', headers: { Authorization: `Bearer ${TOKEN}` } });
  return new GitLabClient({ kind: 'gitlab', webUrl: replay.url, path: 'acme/platform/widgets' }, TOKEN);
}

async function failure(call: Promise<unknown>): Promise<ForgeError> {
  const error = await call.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(ForgeError);
  return error as ForgeError;
}

describe('GitLabClient', () => {
  it('refuses a project path without a group', () => {
    expect(() => new GitLabClient({ kind: 'gitlab', webUrl: 'https://gitlab.com', path: 'widgets' }, TOKEN)).toThrow(/group\/name/);
  });

  it('whoami: the username, and the access token’s scopes', async () => {
    const client = await clientFor('whoami');
    await expect(client.whoami()).resolves.toEqual({ login: 'warden-bot', scopes: ['api', 'read_user'] });
  });

  it('whoami: no scopes where GitLab will not describe the token (OAuth)', async () => {
    const client = await clientFor('whoami-oauth');
    await expect(client.whoami()).resolves.toEqual({ login: 'warden-bot' });
  });

  it('finds the open merge request from the source into the target branch', async () => {
    const client = await clientFor('find-open');
    await expect(client.findOpenPullRequest('warden/intent-7f3a', 'main')).resolves.toEqual({
      number: 12,
      url: 'https://gitlab.acme.example/acme/platform/widgets/-/merge_requests/12',
      state: 'open',
      headBranch: 'warden/intent-7f3a',
      baseBranch: 'main',
      headSha: HEAD,
      mergeable: true,
    });
  });

  it('finds none when the list is empty', async () => {
    const client = await clientFor('find-none');
    await expect(client.findOpenPullRequest('warden/intent-7f3a', 'main')).resolves.toBeUndefined();
  });

  it('opens a merge request with its labels in the same call', async () => {
    const client = await clientFor('open');
    const opened = await client.openPullRequest({ head: 'warden/intent-7f3a', base: 'main', title: 'Add retry budget to the widget fetcher', body: 'Intent 7f3a: add a retry budget.\n\nOpened by Warden.', labels: ['warden', 'needs-review'] });
    expect(opened).toMatchObject({ number: 12, state: 'open', headSha: HEAD });
    // GitLab is still checking: no answer yet.
    expect(opened.mergeable).toBeUndefined();
  });

  it('refuses a label with a comma (GitLab takes labels as one comma-separated list)', async () => {
    const client = new GitLabClient({ kind: 'gitlab', webUrl: 'http://127.0.0.1:1', path: 'acme/widgets' }, TOKEN);
    await expect(client.openPullRequest({ head: 'h', base: 'main', title: 't', body: 'b', labels: ['a,b'] })).rejects.toMatchObject({ kind: 'invalid' });
  });

  it('reads an open merge request', async () => {
    const client = await clientFor('pull-open');
    await expect(client.pullRequest(12)).resolves.toMatchObject({ number: 12, state: 'open', mergeable: true, headSha: HEAD });
  });

  it('reads a conflicting merge request as not mergeable', async () => {
    const client = await clientFor('pull-conflict');
    await expect(client.pullRequest(12)).resolves.toMatchObject({ state: 'open', mergeable: false });
  });

  it('reads a merged merge request: its merge commit and who merged it', async () => {
    const client = await clientFor('pull-merged');
    await expect(client.pullRequest(12)).resolves.toMatchObject({ state: 'merged', mergeCommit: MERGE, closedBy: 'alice' });
  });

  it('reads a fast-forwarded merge request: the head is what landed', async () => {
    const client = await clientFor('pull-fast-forwarded');
    await expect(client.pullRequest(12)).resolves.toMatchObject({ state: 'merged', mergeCommit: HEAD });
  });

  it('reads a closed merge request and who closed it', async () => {
    const client = await clientFor('pull-closed');
    const closed = await client.pullRequest(12);
    expect(closed).toMatchObject({ state: 'closed', closedBy: 'bob' });
    expect(closed.mergeCommit).toBeUndefined();
  });

  it('replaces the description', async () => {
    const client = await clientFor('update-body');
    await client.updateBody(12, 'Intent 7f3a: add a retry budget.\n\nReview: approved by alice.');
  });

  it('reads approvals as approved reviews, and reviewers who requested changes', async () => {
    const client = await clientFor('reviews');
    await expect(client.reviews(12)).resolves.toEqual([
      { id: 'approval-11', login: 'alice', state: 'approved', body: '' },
      { id: 'changes-12', login: 'bob', state: 'changes-requested', body: '' },
    ]);
  });

  it('reads approvals alone on a GitLab without the reviewers list', async () => {
    const client = await clientFor('reviews-old-gitlab');
    await expect(client.reviews(12)).resolves.toEqual([{ id: 'approval-11', login: 'alice', state: 'approved', body: '' }]);
  });

  it('reads notes across pages, without system notes', async () => {
    const client = await clientFor('comments');
    const comments = await client.comments(12);
    expect(comments).toEqual([
      { id: '6002', login: 'alice', body: '/warden approve', createdAt: '2026-11-20T12:00:00.000Z', url: `${replay?.url}/acme/platform/widgets/-/merge_requests/12#note_6002` },
      { id: '6003', login: 'warden-bot', body: 'Warden: approval recorded.', createdAt: '2026-11-20T12:00:05.000Z', url: `${replay?.url}/acme/platform/widgets/-/merge_requests/12#note_6003` },
    ]);
  });

  it('comments', async () => {
    const client = await clientFor('comment');
    await client.comment(12, 'Warden: checks passed; waiting for a review.');
  });

  it('closes', async () => {
    const client = await clientFor('close');
    await client.close(12);
  });

  it('reads commit statuses, the latest per name, and the latest pipeline as a check', async () => {
    const client = await clientFor('checks');
    const checks = await client.checks(HEAD);
    expect(Object.fromEntries(checks.map((check) => [check.context, check.state]))).toEqual({
      // Job 7005 re-ran job 7001.
      test: 'success',
      build: 'pending',
      lint: 'error',
      'ci/sonar': 'success',
      'manual-deploy': 'pending',
      [GITLAB_PIPELINE_CHECK]: 'pending',
    });
    expect(checks.find((check) => check.context === 'ci/sonar')).toEqual({ context: 'ci/sonar', state: 'success', description: 'Quality gate passed', url: 'https://sonar.acme.example/dashboard?id=widgets' });
    expect(checks.find((check) => check.context === GITLAB_PIPELINE_CHECK)?.url).toBe('https://gitlab.acme.example/acme/platform/widgets/-/pipelines/99001');
  });

  it('reads no checks for a commit without statuses or pipeline', async () => {
    const client = await clientFor('checks-no-pipeline');
    await expect(client.checks(HEAD)).resolves.toEqual([]);
  });

  it('maps GitLab job and pipeline states', () => {
    expect(gitlabCheckState('success')).toBe('success');
    expect(gitlabCheckState('failed')).toBe('failure');
    expect(gitlabCheckState('canceled')).toBe('error');
    expect(gitlabCheckState('skipped')).toBe('error');
    expect(gitlabCheckState('running')).toBe('pending');
    expect(gitlabCheckState('waiting_for_resource')).toBe('pending');
  });

  it('reads branch rules: protection, the pipeline when it must succeed, and the approval rules for the branch', async () => {
    const client = await clientFor('branch-rules');
    // Rules 1 (all branches), 2 (main) and 4 (every protected branch) apply; rule 3 (release/*) does not.
    await expect(client.branchRules('main')).resolves.toEqual({ protected: true, requiredChecks: [GITLAB_PIPELINE_CHECK], requiredApprovals: 2 });
  });

  it('matches approval rules on wildcard protected branches', async () => {
    const client = await clientFor('branch-rules-wildcard');
    await expect(client.branchRules('release/4.2')).resolves.toEqual({ protected: true, requiredChecks: [], requiredApprovals: 3 });
  });

  it('applies no rule for protected branches to an unprotected one', async () => {
    const client = await clientFor('branch-rules-unprotected');
    await expect(client.branchRules('feature/spike')).resolves.toEqual({ protected: false, requiredChecks: [], requiredApprovals: 0 });
  });

  it('counts no approval rules where GitLab will not show them (Free edition)', async () => {
    const client = await clientFor('branch-rules-free');
    await expect(client.branchRules('main')).resolves.toEqual({ protected: false, requiredChecks: [], requiredApprovals: 0 });
  });

  it('merges with a merge commit, only while the head is the reviewed one', async () => {
    const client = await clientFor('merge-merge');
    await expect(client.merge(12, { method: 'merge', headSha: HEAD, ...MESSAGE })).resolves.toEqual({ mergeCommit: MERGE });
  });

  it('merges squashed, and answers the squash commit', async () => {
    const client = await clientFor('merge-squash');
    await expect(client.merge(12, { method: 'squash', headSha: HEAD, ...MESSAGE })).resolves.toEqual({ mergeCommit: SQUASH });
  });

  it('rebases first, waits for the rebase, then merges the rebased head', async () => {
    const client = await clientFor('merge-rebase');
    await expect(client.merge(12, { method: 'rebase', headSha: HEAD, ...MESSAGE })).resolves.toEqual({ mergeCommit: REBASED });
  });

  it('does not rebase a head that moved', async () => {
    const client = await clientFor('merge-rebase-moved');
    const error = await failure(client.merge(12, { method: 'rebase', headSha: HEAD, ...MESSAGE }));
    expect(error.kind).toBe('conflict');
  });

  it('answers conflict when the rebase fails', async () => {
    const client = await clientFor('merge-rebase-failed');
    const error = await failure(client.merge(12, { method: 'rebase', headSha: HEAD, ...MESSAGE }));
    expect(error.kind).toBe('conflict');
    expect(error.message).toContain('Rebase failed');
  });
});

describe('GitLab errors as ForgeErrors', () => {
  const errors = loadPairs('gitlab/errors');
  const merge = (client: GitLabClient): Promise<unknown> => client.merge(12, { method: 'merge', headSha: HEAD, title: 't', message: 'm' });
  const open = (client: GitLabClient): Promise<unknown> => client.openPullRequest({ head: 'warden/intent-7f3a', base: 'main', title: 't', body: 'b', labels: [] });
  const cases: Array<[number, string, (client: GitLabClient) => Promise<unknown>, string]> = [
    [0, 'unauthorized', (client) => client.whoami(), '401 Unauthorized'],
    [1, 'forbidden', (client) => client.comment(12, 'hello'), '403 Forbidden'],
    [2, 'not-found', (client) => client.pullRequest(99), '404 Not found'],
    [3, 'not-mergeable', merge, '405 Method Not Allowed'],
    [4, 'conflict', merge, 'SHA does not match HEAD'],
    [5, 'not-mergeable', merge, 'Branch cannot be merged'],
    [6, 'conflict', open, 'Another open merge request already exists'],
    [7, 'invalid', open, "can't be blank"],
    [8, 'invalid', open, 'title is empty'],
    [9, 'server', (client) => client.whoami(), '500 Internal Server Error'],
  ];

  it.each(cases)('pair %i answers a %s ForgeError', async (index, kind, call, words) => {
    const pair = errors[index] as RecordedPair;
    const client = await clientFor([pair]);
    const error = await failure(call(client));
    expect(error.kind).toBe(kind);
    expect(error.status).toBe(pair.response.status);
    expect(error.message).toContain(words);
    expect(error.message).not.toContain(TOKEN);
  });

  it('every recorded error is one of the cases', () => {
    expect(cases.map(([index]) => index)).toEqual(errors.map((_, index) => index));
  });

  it('answers unreachable when nothing listens', async () => {
    const port = await findFreePort();
    const client = new GitLabClient({ kind: 'gitlab', webUrl: `http://127.0.0.1:${port}`, path: 'acme/widgets' }, TOKEN);
    const error = await failure(client.whoami());
    expect(error.kind).toBe('unreachable');
    expect(error.message).toContain('ECONNREFUSED');
  });
});
