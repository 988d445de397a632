import { findFreePort } from '../../src/shared/ports';
import { ForgeError } from '../../src/forge/forge-client';
import { GitHubClient, checkRunState, githubApiBase } from '../../src/forge/github';
import { loadPairs, startReplay, type RecordedPair, type Replay } from '../helpers/forge-replay';

/**
 * The GitHub adapter against recorded request/response pairs (test/fixtures/forge/github), written
 * from GitHub's documented REST API: GitHub itself is not reachable from the tests. The client is
 * pointed at the replay server as a GitHub Enterprise Server, whose API lives under /api/v3.
 */

const TOKEN = 'ghp_test0000000000000000000000000000000';
const HEAD = '9c1e5b4f2d8a7e6b3c0f1a2d4e5b6c7d8e9f0a1b';
const MERGE = 'e3f1c2a4b5d6978812a3b4c5d6e7f8091a2b3c4d';

let replay: Replay | undefined;

afterEach(async () => {
  const done = replay;
  replay = undefined;
  if (done === undefined) return;
  await done.close();
  done.assertDone();
});

async function clientFor(pairs: RecordedPair[] | string): Promise<GitHubClient> {
  replay = await startReplay(typeof pairs === 'string' ? loadPairs(`github/${pairs}`) : pairs, { prefix: '/api/v3', headers: { Authorization: `Bearer ${TOKEN}` } });
  return new GitHubClient({ kind: 'github', webUrl: replay.url, path: 'acme/widgets' }, TOKEN);
}

describe('the GitHub API address', () => {
  it('is api.github.com for github.com, and /api/v3 on an Enterprise Server', () => {
    expect(githubApiBase('https://github.com')).toBe('https://api.github.com');
    expect(githubApiBase('https://git.acme.example')).toBe('https://git.acme.example/api/v3');
    expect(githubApiBase('https://git.acme.example/')).toBe('https://git.acme.example/api/v3');
  });

  it('refuses a repository path that is not owner/name', () => {
    expect(() => new GitHubClient({ kind: 'github', webUrl: 'https://github.com', path: 'acme' }, TOKEN)).toThrow(ForgeError);
    expect(() => new GitHubClient({ kind: 'github', webUrl: 'https://github.com', path: 'acme/widgets/extra' }, TOKEN)).toThrow(/owner\/name/);
  });
});

describe('GitHubClient', () => {
  it('whoami: the login, and a classic token’s scopes from X-OAuth-Scopes', async () => {
    const client = await clientFor('whoami');
    await expect(client.whoami()).resolves.toEqual({ login: 'warden-bot', scopes: ['repo', 'read:org', 'workflow'] });
  });

  it('whoami: no scopes for a fine-grained token (GitHub sends none)', async () => {
    const client = await clientFor('whoami-fine-grained');
    await expect(client.whoami()).resolves.toEqual({ login: 'warden-bot' });
  });

  it('finds the open pull request from owner:head into base', async () => {
    const client = await clientFor('find-open');
    await expect(client.findOpenPullRequest('warden/intent-7f3a', 'main')).resolves.toEqual({
      number: 7,
      url: 'https://github.com/acme/widgets/pull/7',
      state: 'open',
      headBranch: 'warden/intent-7f3a',
      baseBranch: 'main',
      headSha: HEAD,
    });
  });

  it('finds none when the list is empty', async () => {
    const client = await clientFor('find-none');
    await expect(client.findOpenPullRequest('warden/intent-7f3a', 'main')).resolves.toBeUndefined();
  });

  it('opens a pull request, then adds its labels', async () => {
    const client = await clientFor('open');
    const opened = await client.openPullRequest({ head: 'warden/intent-7f3a', base: 'main', title: 'Add retry budget to the widget fetcher', body: 'Intent 7f3a: add a retry budget.\n\nOpened by Warden.', labels: ['warden', 'needs-review'] });
    expect(opened).toMatchObject({ number: 7, state: 'open', headSha: HEAD });
    // GitHub's test merge commit is no merge.
    expect(opened.mergeCommit).toBeUndefined();
  });

  it('opens a pull request without a labels call when there are none', async () => {
    const client = await clientFor('open-no-labels');
    await expect(client.openPullRequest({ head: 'warden/intent-7f3a', base: 'main', title: 'Add retry budget to the widget fetcher', body: 'Intent 7f3a: add a retry budget.\n\nOpened by Warden.', labels: [] })).resolves.toMatchObject({ number: 7 });
  });

  it('reads an open pull request with GitHub’s mergeable answer', async () => {
    const client = await clientFor('pull-open');
    await expect(client.pullRequest(7)).resolves.toMatchObject({ state: 'open', mergeable: true });
  });

  it('reads a merged pull request: merged, its merge commit and who merged it', async () => {
    const client = await clientFor('pull-merged');
    const merged = await client.pullRequest(7);
    expect(merged).toMatchObject({ state: 'merged', mergeCommit: MERGE, closedBy: 'alice' });
    expect(merged.mergeable).toBeUndefined();
  });

  it('reads a closed pull request as closed, with no merge commit', async () => {
    const client = await clientFor('pull-closed');
    const closed = await client.pullRequest(7);
    expect(closed.state).toBe('closed');
    expect(closed.mergeCommit).toBeUndefined();
  });

  it('replaces the description', async () => {
    const client = await clientFor('update-body');
    await client.updateBody(7, 'Intent 7f3a: add a retry budget.\n\nReview: approved by alice.');
  });

  it('reads every review across pages, each state mapped', async () => {
    const client = await clientFor('reviews');
    const reviews = await client.reviews(7);
    expect(reviews.map((review) => [review.id, review.login, review.state])).toEqual([
      ['80001', 'alice', 'changes-requested'],
      ['80002', 'bob', 'commented'],
      ['80003', 'alice', 'approved'],
      ['80004', 'carol', 'pending'],
      ['80005', 'bob', 'dismissed'],
    ]);
    expect(reviews[0]).toMatchObject({ body: 'The budget must reset per call.', commitId: '4b825dc642cb6eb9a060e54bf8d69288fbee4904', url: 'https://github.com/acme/widgets/pull/7#pullrequestreview-80001' });
    expect(reviews[3]?.submittedAt).toBeUndefined();
  });

  it('does not follow a next-page link to another host (the token would go with it)', async () => {
    const client = await clientFor('reviews-elsewhere');
    await expect(client.reviews(7)).rejects.toMatchObject({ kind: 'server', message: expect.stringContaining('another host') });
  });

  it('reads the conversation’s comments', async () => {
    const client = await clientFor('comments');
    await expect(client.comments(7)).resolves.toEqual([
      { id: '1900001', login: 'alice', body: '/warden approve', createdAt: '2026-11-20T12:00:00Z', url: 'https://github.com/acme/widgets/pull/7#issuecomment-1900001' },
      { id: '1900002', login: 'warden-bot', body: 'Warden: approval recorded.', createdAt: '2026-11-20T12:00:05Z', url: 'https://github.com/acme/widgets/pull/7#issuecomment-1900002' },
    ]);
  });

  it('comments', async () => {
    const client = await clientFor('comment');
    await client.comment(7, 'Warden: checks passed; waiting for a review.');
  });

  it('closes', async () => {
    const client = await clientFor('close');
    await client.close(7);
  });

  it('reads commit statuses and check runs (all pages), the newest run per name', async () => {
    const client = await clientFor('checks');
    const checks = await client.checks(HEAD);
    const byContext = Object.fromEntries(checks.map((check) => [check.context, check.state]));
    expect(byContext).toEqual({
      'ci/jenkins': 'success',
      'security/scan': 'failure',
      // The status says success, the check run of that name needs action: the worse stands.
      lint: 'failure',
      // Run 4005 re-ran run 4001.
      test: 'success',
      build: 'pending',
      docs: 'success',
      'deploy-preview': 'error',
    });
    expect(checks.find((check) => check.context === 'ci/jenkins')).toMatchObject({ description: 'Build #88 passed', url: 'https://ci.acme.example/job/88' });
    expect(checks.find((check) => check.context === 'test')).toMatchObject({ description: 'All tests passed', url: 'https://github.com/acme/widgets/runs/4005' });
  });

  it('maps check run status and conclusion', () => {
    expect(checkRunState('queued', undefined)).toBe('pending');
    expect(checkRunState('in_progress', undefined)).toBe('pending');
    expect(checkRunState('completed', 'success')).toBe('success');
    expect(checkRunState('completed', 'neutral')).toBe('success');
    expect(checkRunState('completed', 'failure')).toBe('failure');
    expect(checkRunState('completed', 'cancelled')).toBe('error');
    expect(checkRunState('completed', 'stale')).toBe('error');
    expect(checkRunState('completed', 'something-new')).toBe('error');
  });

  it('reads branch protection: required checks from contexts and checks, required approvals', async () => {
    const client = await clientFor('branch-rules');
    await expect(client.branchRules('main')).resolves.toEqual({ protected: true, requiredChecks: ['ci/jenkins', 'test'], requiredApprovals: 2 });
  });

  it('reads rulesets where the classic protection says "Branch not protected"', async () => {
    const client = await clientFor('branch-rules-rulesets');
    await expect(client.branchRules('main')).resolves.toEqual({ protected: true, requiredChecks: ['build'], requiredApprovals: 1 });
  });

  it('reads an unprotected branch as no rules', async () => {
    const client = await clientFor('branch-unprotected');
    await expect(client.branchRules('main')).resolves.toEqual({ protected: false, requiredChecks: [], requiredApprovals: 0 });
  });

  it('does not take a protection it cannot read for none', async () => {
    const client = await clientFor('branch-rules-unreadable');
    await expect(client.branchRules('main')).rejects.toMatchObject({ kind: 'not-found', status: 404 });
  });

  it.each(['merge', 'squash', 'rebase'] as const)('merges with merge_method %s while the head is the reviewed one', async (method) => {
    const client = await clientFor(`merge-${method}`);
    await expect(client.merge(7, { method, headSha: HEAD, title: 'Add retry budget to the widget fetcher (#7)', message: 'Intent 7f3a, approved by alice.' })).resolves.toEqual({ mergeCommit: MERGE });
  });
});

describe('GitHub errors as ForgeErrors', () => {
  const errors = loadPairs('github/errors');
  const merge = (client: GitHubClient): Promise<unknown> => client.merge(7, { method: 'squash', headSha: HEAD, title: 't', message: 'm' });
  const cases: Array<[number, string, (client: GitHubClient) => Promise<unknown>, string]> = [
    [0, 'unauthorized', (client) => client.whoami(), 'Bad credentials'],
    [1, 'forbidden', (client) => client.comment(7, 'hello'), 'Resource not accessible'],
    [2, 'not-found', (client) => client.pullRequest(99), 'Not Found'],
    [3, 'not-mergeable', merge, 'not mergeable'],
    [4, 'conflict', merge, 'Head branch was modified'],
    [5, 'not-mergeable', merge, 'status check "test" is failing'],
    [6, 'invalid', (client) => client.openPullRequest({ head: 'warden/intent-7f3a', base: 'main', title: 't', body: 'b', labels: [] }), 'Validation Failed'],
    [7, 'server', (client) => client.whoami(), 'Server Error'],
  ];

  it.each(cases)('pair %i answers a %s ForgeError', async (index, kind, call, words) => {
    const pair = errors[index] as RecordedPair;
    const client = await clientFor([pair]);
    const error = await call(client).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(ForgeError);
    expect(error).toMatchObject({ kind, status: pair.response.status, message: expect.stringContaining(words) });
    expect((error as Error).message).not.toContain(TOKEN);
  });

  it('every recorded error is one of the cases', () => {
    expect(cases.map(([index]) => index)).toEqual(errors.map((_, index) => index));
  });

  it('answers unreachable when nothing listens', async () => {
    const port = await findFreePort();
    const client = new GitHubClient({ kind: 'github', webUrl: `http://127.0.0.1:${port}`, path: 'acme/widgets' }, TOKEN);
    const error = await client.whoami().then(
      () => undefined,
      (thrown: unknown) => thrown as ForgeError,
    );
    expect(error).toBeInstanceOf(ForgeError);
    expect(error?.kind).toBe('unreachable');
    expect(error?.transient).toBe(true);
    expect(error?.message).toContain('ECONNREFUSED');
  });

  it('answers server for an answer in a shape it cannot read', async () => {
    const client = await clientFor([{ request: { method: 'GET', path: '/repos/acme/widgets/pulls/7' }, response: { status: 200, body: { number: 'seven' } } }]);
    await expect(client.pullRequest(7)).rejects.toMatchObject({ kind: 'server', message: expect.stringContaining('unexpected shape') });
  });
});

describe('the forge replay itself', () => {
  it('fails a test on a request that is not the recorded one, and on a pair never requested', async () => {
    const pairs = loadPairs('github/close');
    const server = await startReplay([...pairs, ...pairs], { prefix: '/api/v3', headers: { Authorization: `Bearer ${TOKEN}` } });
    try {
      const client = new GitHubClient({ kind: 'github', webUrl: server.url, path: 'acme/widgets' }, TOKEN);
      // A different body than recorded: answered 599, noted.
      await expect(client.updateBody(7, 'closed')).rejects.toMatchObject({ kind: 'server', status: 599 });
      await client.close(7);
      expect(() => server.assertDone()).toThrow(/expected the body field state = "closed"[\s\S]*never requested: PATCH \/repos\/acme\/widgets\/pulls\/7/);
    } finally {
      await server.close();
    }
  });

  it('checks the token header on every request', async () => {
    const server = await startReplay(loadPairs('github/close'), { prefix: '/api/v3', headers: { Authorization: `Bearer ${TOKEN}` } });
    try {
      await new GitHubClient({ kind: 'github', webUrl: server.url, path: 'acme/widgets' }, 'another-token').close(7).catch(() => undefined);
      expect(() => server.assertDone()).toThrow(/expected the header Authorization/);
    } finally {
      await server.close();
    }
  });
});
