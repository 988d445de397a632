/**
 * The Gitea adapter against a real Gitea (test/helpers/gitea.ts): every ForgeClient method, the
 * errors it maps, and a real webhook delivery checked by its signature.
 *
 * @runs-last: it waits for the Gitea build .ci/run starts in the background (test/setup/sequencer.js).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ForgeError, type ForgeErrorKind } from '../../src/forge/forge-client';
import { GiteaClient } from '../../src/forge/gitea';
import { GitHubClient } from '../../src/forge/github';
import { forgeClient } from '../../src/forge';
import { readWebhookDelivery } from '../../src/forge/webhook';
import { MERGE_METHODS, type MergeMethod } from '../../src/shared/forge';
import { findFreePort } from '../../src/shared/ports';
import { waitFor } from '../helpers/env';
import { GITEA_BASE_BRANCH, GITEA_REQUIRED_APPROVALS, GITEA_REQUIRED_CHECK, useGitea, type GiteaUser } from '../helpers/gitea';
import { startReceiver } from '../helpers/webhook-receiver';

const forge = useGitea();
let client: GiteaClient;
beforeAll(() => {
  client = new GiteaClient(forge().repository, forge().author.token);
});

const repoApi = (): string => `/repos/${forge().repository.path}`;

async function expectForgeError(promise: Promise<unknown>, kind: ForgeErrorKind): Promise<ForgeError> {
  const error = await promise.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(ForgeError);
  expect((error as ForgeError).kind).toBe(kind);
  return error as ForgeError;
}

async function review(number: number, user: GiteaUser, event: string, body: string, commitId: string): Promise<{ id: number }> {
  return forge().api<{ id: number }>('POST', `${repoApi()}/pulls/${number}/reviews`, { user, body: { event, body, commit_id: commitId } });
}

async function setStatus(sha: string, context: string, state: string): Promise<void> {
  await forge().api('POST', `${repoApi()}/statuses/${sha}`, { body: { context, state, description: `${context} is ${state}`, target_url: `http://ci.example.com/${context}` } });
}

/** Gitea checks whether a pull request merges after each push, in the background. */
async function untilMergeable(number: number): Promise<void> {
  await waitFor(async () => ((await client.pullRequest(number)).mergeable === true ? true : undefined), 120_000, `#${number} to be mergeable`);
}

/** A branch with one new file, and its pull request into the base. */
async function openOn(branch: string, labels: readonly string[] = []): Promise<{ number: number; sha: string }> {
  const sha = await forge().commitFiles(branch, { [`${branch.replaceAll('/', '-')}.txt`]: `made on ${branch}\n` });
  const pr = await client.openPullRequest({ head: branch, base: GITEA_BASE_BRANCH, title: `Change on ${branch}`, body: 'Opened by the test.', labels });
  return { number: pr.number, sha };
}

describe('GiteaClient on a real Gitea', () => {
  let first: { number: number; sha: string };

  it('says who the token belongs to', async () => {
    await expect(client.whoami()).resolves.toEqual({ login: forge().author.login });
  });

  it('opens a pull request with its labels, creating the missing ones', async () => {
    await forge().api('POST', `${repoApi()}/labels`, { body: { name: 'warden', color: '#00aa00' } });
    const sha = await forge().commitFiles('warden/first', { 'first.txt': 'one\n' });
    const opened = await client.openPullRequest({ head: 'warden/first', base: GITEA_BASE_BRANCH, title: 'First change', body: 'The first body.', labels: ['warden', 'risk:low'] });
    expect(opened).toMatchObject({ state: 'open', headBranch: 'warden/first', baseBranch: GITEA_BASE_BRANCH, headSha: sha });
    expect(opened.url).toBe(`${forge().webUrl}/${forge().repository.path}/pulls/${opened.number}`);
    first = { number: opened.number, sha };

    const labels = await forge().api<{ name: string }[]>('GET', `${repoApi()}/issues/${opened.number}/labels`);
    expect(labels.map((l) => l.name).sort()).toEqual(['risk:low', 'warden']);
    const all = await forge().api<{ name: string }[]>('GET', `${repoApi()}/labels`);
    expect(all.filter((l) => l.name === 'warden')).toHaveLength(1);
  });

  it('finds the open pull request by its head and base, and nothing for another head', async () => {
    await expect(client.findOpenPullRequest('warden/first', GITEA_BASE_BRANCH)).resolves.toMatchObject({ number: first.number, state: 'open' });
    await expect(client.findOpenPullRequest('warden/none', GITEA_BASE_BRANCH)).resolves.toBeUndefined();
  });

  it('finds a newer open pull request on a head whose earlier one was closed', async () => {
    const old = await openOn('warden/reopened');
    await client.close(old.number);
    await expect(client.findOpenPullRequest('warden/reopened', GITEA_BASE_BRANCH)).resolves.toBeUndefined();
    const again = await client.openPullRequest({ head: 'warden/reopened', base: GITEA_BASE_BRANCH, title: 'Again', body: '', labels: [] });
    expect(again.number).not.toBe(old.number);
    await expect(client.findOpenPullRequest('warden/reopened', GITEA_BASE_BRANCH)).resolves.toMatchObject({ number: again.number, state: 'open' });
  });

  it('replaces the body and reads the pull request back', async () => {
    await client.updateBody(first.number, 'The new body.\n\n- with a list');
    const raw = await forge().api<{ body: string }>('GET', `${repoApi()}/pulls/${first.number}`);
    expect(raw.body).toBe('The new body.\n\n- with a list');
    await expect(client.pullRequest(first.number)).resolves.toMatchObject({ number: first.number, state: 'open', headSha: first.sha, headBranch: 'warden/first' });
  });

  it('reads reviews by two users with their states, and one dismissed on the forge', async () => {
    const { reviewer, bystander, author } = forge();
    await review(first.number, reviewer, 'APPROVED', 'Looks right.', first.sha);
    const changes = await review(first.number, bystander, 'REQUEST_CHANGES', 'Rename it.', first.sha);
    await review(first.number, bystander, 'COMMENT', 'Just a note.', first.sha);
    await review(first.number, reviewer, 'PENDING', 'Still reading.', first.sha);

    const states = async (): Promise<Record<string, unknown>> => Object.fromEntries((await client.reviews(first.number)).map((r) => [r.body, { login: r.login, state: r.state }]));
    await expect(states()).resolves.toEqual({
      'Looks right.': { login: reviewer.login, state: 'approved' },
      'Rename it.': { login: bystander.login, state: 'changes-requested' },
      'Just a note.': { login: bystander.login, state: 'commented' },
      'Still reading.': { login: reviewer.login, state: 'pending' },
    });
    const approval = (await client.reviews(first.number)).find((r) => r.body === 'Looks right.');
    expect(approval).toMatchObject({ commitId: first.sha, submittedAt: expect.any(String), url: expect.stringContaining(`/pulls/${first.number}`) });

    await forge().api('POST', `${repoApi()}/pulls/${first.number}/reviews/${changes.id}/dismissals`, { user: author, body: { message: 'not relevant' } });
    await expect(states()).resolves.toMatchObject({ 'Rename it.': { login: bystander.login, state: 'dismissed' }, 'Looks right.': { state: 'approved' } });
  });

  it('is refused a review of its own pull request by the forge (the author cannot approve)', async () => {
    await expect(review(first.number, forge().author, 'APPROVED', 'Mine is fine.', first.sha)).rejects.toThrow(/: 422 /);
    expect((await client.reviews(first.number)).some((r) => r.login === forge().author.login)).toBe(false);
  });

  it('comments and reads the comments back', async () => {
    await client.comment(first.number, 'Warden: waiting for review.');
    const comments = await client.comments(first.number);
    expect(comments).toEqual([expect.objectContaining({ login: forge().author.login, body: 'Warden: waiting for review.' })]);
    expect(comments[0]!.url).toContain(`/pulls/${first.number}`);
  });

  it('reads the latest status per context as it goes from pending to success', async () => {
    await setStatus(first.sha, GITEA_REQUIRED_CHECK, 'pending');
    await setStatus(first.sha, 'lint', 'warning');
    let checks = await client.checks(first.sha);
    expect(checks.find((c) => c.context === GITEA_REQUIRED_CHECK)).toEqual({ context: GITEA_REQUIRED_CHECK, state: 'pending', description: `${GITEA_REQUIRED_CHECK} is pending`, url: `http://ci.example.com/${GITEA_REQUIRED_CHECK}` });
    // Gitea blocks a merge on a warning as on a failure.
    expect(checks.find((c) => c.context === 'lint')?.state).toBe('failure');

    await setStatus(first.sha, GITEA_REQUIRED_CHECK, 'success');
    await setStatus(first.sha, 'lint', 'skipped');
    checks = await client.checks(first.sha);
    expect(checks).toHaveLength(2);
    expect(Object.fromEntries(checks.map((c) => [c.context, c.state]))).toEqual({ [GITEA_REQUIRED_CHECK]: 'success', lint: 'success' });
    // Gitea answers 404 for a commit it does not have.
    await expectForgeError(client.checks('0'.repeat(40)), 'not-found');
  });

  it("reads the base branch's protection, and none on an unprotected branch", async () => {
    await expect(client.branchRules(GITEA_BASE_BRANCH)).resolves.toEqual({ protected: true, requiredChecks: [GITEA_REQUIRED_CHECK], requiredApprovals: GITEA_REQUIRED_APPROVALS });
    await expect(client.branchRules('warden/first')).resolves.toEqual({ protected: false, requiredChecks: [], requiredApprovals: 0 });
    // With read access only: the branch carries its protection, so no admin token is needed.
    await expect(new GiteaClient(forge().repository, forge().bystander.token).branchRules(GITEA_BASE_BRANCH)).resolves.toMatchObject({ requiredChecks: [GITEA_REQUIRED_CHECK] });
    await expectForgeError(client.branchRules('no/such/branch'), 'not-found');
  });

  it('is refused the merge while the required check is pending, and when the head moved on', async () => {
    const pr = await openOn('warden/pending-check');
    await review(pr.number, forge().reviewer, 'APPROVED', 'Fine.', pr.sha);
    await setStatus(pr.sha, GITEA_REQUIRED_CHECK, 'pending');
    await untilMergeable(pr.number);
    const refused = await expectForgeError(client.merge(pr.number, { method: 'merge', headSha: pr.sha, title: 'Merge', message: '' }), 'not-mergeable');
    expect(refused.status).toBe(405);

    await setStatus(pr.sha, GITEA_REQUIRED_CHECK, 'success');
    const stale = await expectForgeError(client.merge(pr.number, { method: 'merge', headSha: first.sha, title: 'Merge', message: '' }), 'conflict');
    expect(stale.status).toBe(409);
    await expect(client.pullRequest(pr.number)).resolves.toMatchObject({ state: 'open' });
    await client.close(pr.number);
  });

  describe('merging with each method', () => {
    // All three branch off the same base, so each merge lands on a base the earlier ones moved.
    const opened = new Map<MergeMethod, { number: number; sha: string }>();
    beforeAll(async () => {
      for (const method of MERGE_METHODS) {
        const pr = await openOn(`warden/by-${method}`);
        await review(pr.number, forge().reviewer, 'APPROVED', 'Ship it.', pr.sha);
        await setStatus(pr.sha, GITEA_REQUIRED_CHECK, 'success');
        opened.set(method, pr);
      }
    });

    it.each<[MergeMethod, number]>([
      ['merge', 2],
      ['squash', 1],
      ['rebase', 1],
    ])('merges with %s and returns the commit now at the head of the base', async (method, parents) => {
      const pr = opened.get(method)!;
      await untilMergeable(pr.number);
      const { mergeCommit } = await client.merge(pr.number, { method, headSha: pr.sha, title: `Land ${method} (#${pr.number})`, message: `Merged by the test with ${method}.` });
      expect(mergeCommit).toMatch(/^[0-9a-f]{40}$/);
      const base = await forge().api<{ commit: { id: string } }>('GET', `${repoApi()}/branches/${GITEA_BASE_BRANCH}`);
      expect(base.commit.id).toBe(mergeCommit);
      const commit = await forge().api<{ parents: unknown[]; commit: { message: string } }>('GET', `${repoApi()}/git/commits/${mergeCommit}`);
      expect(commit.parents).toHaveLength(parents);
      if (method === 'rebase') {
        // The branch's commit, replayed onto the moved base: a new commit with its message.
        expect(mergeCommit).not.toBe(pr.sha);
        expect(commit.commit.message).toContain('Change warden-by-rebase.txt');
      } else {
        expect(commit.commit.message).toContain(`Land ${method} (#${pr.number})`);
      }
      await expect(client.pullRequest(pr.number)).resolves.toMatchObject({ state: 'merged', mergeCommit, closedBy: forge().author.login });
    });
  });

  it('closes a pull request', async () => {
    await client.close(first.number);
    await expect(client.pullRequest(first.number)).resolves.toMatchObject({ state: 'closed' });
    await expect(client.findOpenPullRequest('warden/first', GITEA_BASE_BRANCH)).resolves.toBeUndefined();
  });

  it('maps a wrong token to unauthorized, a token without the scope to forbidden, and a missing pull request to not-found', async () => {
    await expectForgeError(new GiteaClient(forge().repository, '0'.repeat(40)).whoami(), 'unauthorized');
    const userOnly = await forge().createToken(forge().author, ['read:user']);
    const scoped = new GiteaClient(forge().repository, userOnly);
    await expect(scoped.whoami()).resolves.toEqual({ login: forge().author.login });
    await expectForgeError(scoped.pullRequest(first.number), 'forbidden');
    await expectForgeError(client.pullRequest(9999), 'not-found');
  });

  it('maps a forge that does not answer to unreachable, which a retry may help', async () => {
    const nobody = new GiteaClient({ kind: 'gitea', webUrl: `http://127.0.0.1:${await findFreePort()}`, path: forge().repository.path }, forge().author.token);
    const error = await expectForgeError(nobody.whoami(), 'unreachable');
    expect(error.transient).toBe(true);
  });

  it('takes a push over http with a user\'s token, and the pushed branch is found by its pull request', async () => {
    const clone = mkdtempSync(path.join(tmpdir(), 'warden-gitea-clone-'));
    try {
      const git = (...args: string[]): string => execFileSync('git', ['-C', clone, ...args], { encoding: 'utf8', env: { ...process.env, GIT_TERMINAL_PROMPT: '0' } });
      execFileSync('git', ['clone', '--quiet', forge().cloneUrl(), clone], { env: { ...process.env, GIT_TERMINAL_PROMPT: '0' } });
      git('checkout', '--quiet', '-b', 'warden/pushed');
      writeFileSync(path.join(clone, 'pushed.txt'), 'pushed with git\n');
      git('add', 'pushed.txt');
      git('-c', 'user.name=Warden', '-c', 'user.email=warden@example.com', 'commit', '--quiet', '-m', 'Pushed over http');
      git('push', '--quiet', 'origin', 'warden/pushed');
      const head = git('rev-parse', 'HEAD').trim();
      const pr = await client.openPullRequest({ head: 'warden/pushed', base: GITEA_BASE_BRANCH, title: 'Pushed', body: '', labels: [] });
      expect(pr.headSha).toBe(head);
      await expect(client.findOpenPullRequest('warden/pushed', GITEA_BASE_BRANCH)).resolves.toMatchObject({ number: pr.number, headSha: head });
    } finally {
      rmSync(clone, { recursive: true, force: true });
    }
  });

  it('is what forgeClient makes for a Gitea repository', async () => {
    const made = forgeClient(forge().repository, forge().author.token);
    expect(made).toBeInstanceOf(GiteaClient);
    expect(forgeClient({ kind: 'github', webUrl: 'https://github.com', path: 'o/r' }, 't')).toBeInstanceOf(GitHubClient);
  });
});

describe('webhook deliveries from a real Gitea', () => {
  it("passes a real delivery's signature, reads its pull request, and refuses it with a changed body", async () => {
    const receiver = await startReceiver();
    try {
      const secret = 'the-hook-secret';
      await forge().addWebhook(receiver.url('/hook'), secret, ['pull_request', 'pull_request_review']);
      const pr = await openOn('warden/hooked');
      const opened = await waitFor(() => receiver.on('/hook').find((d) => d.headers['x-gitea-event'] === 'pull_request' && d.json.action === 'opened'), 120_000, 'the opened delivery');

      const reading = readWebhookDelivery({ headers: opened.headers, body: opened.body }, secret);
      expect(reading).toMatchObject({ accepted: true, forge: 'gitea', event: 'pull_request', action: 'opened', pullRequest: pr.number, headBranch: 'warden/hooked', headSha: pr.sha });
      const tampered = opened.body.replaceAll('warden/hooked', 'warden/hacked');
      expect(tampered).not.toBe(opened.body);
      expect(readWebhookDelivery({ headers: opened.headers, body: tampered }, secret)).toMatchObject({ accepted: false, reason: expect.stringMatching(/does not match/) });
      expect(readWebhookDelivery({ headers: opened.headers, body: opened.body }, 'another-secret')).toMatchObject({ accepted: false });

      await review(pr.number, forge().reviewer, 'APPROVED', 'Approved for the hook.', pr.sha);
      const approved = await waitFor(() => receiver.on('/hook').find((d) => d.headers['x-gitea-event'] === 'pull_request_approved'), 120_000, 'the approval delivery');
      expect(readWebhookDelivery({ headers: approved.headers, body: approved.body }, secret)).toMatchObject({ accepted: true, event: 'pull_request_approved', pullRequest: pr.number, headBranch: 'warden/hooked' });
    } finally {
      await receiver.close();
    }
  });
});
