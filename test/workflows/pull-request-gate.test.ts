import { execFileSync } from 'node:child_process';
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { answeringDesignStages } from '../../src/client/sample-repo';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import type { IntentInput } from '../../src/shared/intent';
import type { IntentState } from '../../src/shared/state';
import { startIntent } from '../../src/client/intents';
import { demoStages, git, makeSampleRepo, useTestWorld, waitFor } from '../helpers/env';
import { GITEA_REQUIRED_CHECK, useGitea } from '../helpers/gitea';
import pino from 'pino';
import { startWebApp, type WebApp } from '../../src/client/web/server';

/**
 * The merge gate as a pull request on a real Gitea: the intent pushes its change (without its
 * lineage) and opens a pull request whose description is the review package; a review by someone
 * the config does not map to an approver counts for nothing; a mapped reviewer's "request
 * changes" sends impl back and the new commit appears on the pull request; their approval passes
 * the gate, a required check held pending blocks the merge until it passes, and the merge goes
 * through the forge. The ledger and the pull request tell the same story. Then what goes wrong:
 * a token the forge refuses, a branch Warden may not push to, a pull request closed by hand.
 *
 * @runs-last: it waits for the Gitea build .ci/run starts in the background (test/setup/sequencer.js).
 */

const world = useTestWorld('pull-request-gate');
const forge = useGitea();
const TOKEN_ENV = 'WARDEN_FORGE_TOKEN_PR_TEST';

const b64 = (text: string): string => Buffer.from(text).toString('base64');
/** The demo's right lib/strings.js. */
const right = String((demoStages().impl![1]!.edits as Array<{ content: string }>)[0]!.content);
const ROUND_TWO_LINE = '// reviewed on the forge\n';

/** impl writes the right file, and adds a line once its prompt says changes were asked for. */
const agent = answeringDesignStages(
  `p=$(cat); case "$p" in "# Warden: impl"*) case "$p" in *"asked for changes"*) printf %s ${b64(right + ROUND_TWO_LINE)} | base64 -d > lib/strings.js ;; *) printf %s ${b64(right)} | base64 -d > lib/strings.js ;; esac; echo done ;; *) echo done ;; esac`,
);

/** impl breaks the tests on its first try after changes were asked for, and mends them when told how they failed. */
const stumblingAgent = answeringDesignStages(
  `p=$(cat); case "$p" in "# Warden: impl"*) case "$p" in *"End of their output"*) printf %s ${b64(right + ROUND_TWO_LINE)} | base64 -d > lib/strings.js ;; *"asked for changes"*) printf %s ${b64(`${right}\nthrow new Error('broken on purpose');\n`)} | base64 -d > lib/strings.js ;; *) printf %s ${b64(right)} | base64 -d > lib/strings.js ;; esac; echo done ;; *) echo done ;; esac`,
);

interface ForgeRepo {
  readonly local: string;
  readonly api: string;
}

let made = 0;
/**
 * A repository on the forge holding the sample repository's main, with the reviewer (write) and
 * the bystander (read) as collaborators and main protected by a required check and an approval
 * (`protectWarden`: Warden's branches are protected against pushes too).
 */
async function forgeRepo(options: { protectWarden?: boolean } = {}): Promise<ForgeRepo> {
  made += 1;
  const name = `demo${made}`;
  const f = forge();
  await f.api('POST', '/user/repos', { body: { name, default_branch: 'main' } });
  const api = `/repos/${f.author.login}/${name}`;
  const local = makeSampleRepo();
  execFileSync('git', ['push', '-q', f.cloneUrl().replace(/\/[^/]+\.git$/, `/${name}.git`), 'main'], { cwd: local });
  // The forge marks the repository no longer empty after the push, in the background; until then
  // it answers 404 for its pull requests.
  await waitFor(async () => ((await f.api<{ empty: boolean }>('GET', api)).empty ? undefined : true), 120_000, `${name} to be no longer empty on the forge`);
  // The remote Warden pushes to carries no credential: the worker's token is added on the way.
  git(local, 'remote', 'add', 'origin', `${f.webUrl}/${f.author.login}/${name}.git`);
  await f.api('PUT', `${api}/collaborators/${f.reviewer.login}`, { body: { permission: 'write' } });
  await f.api('PUT', `${api}/collaborators/${f.bystander.login}`, { body: { permission: 'read' } });
  await f.api('POST', `${api}/branch_protections`, {
    body: { rule_name: 'main', enable_status_check: true, status_check_contexts: [GITEA_REQUIRED_CHECK], required_approvals: 1, enable_approvals_whitelist: true, approvals_whitelist_username: [f.reviewer.login] },
  });
  if (options.protectWarden) await f.api('POST', `${api}/branch_protections`, { body: { rule_name: 'warden/*', enable_push: false } });
  return { local, api };
}

function start(repo: ForgeRepo, prefix: string, overrides: Partial<IntentInput> = {}): Promise<WorkflowHandle> {
  const id = `${prefix}-${Date.now()}`;
  return startIntent(
    world().client,
    {
      id,
      goal: 'Add slugify',
      repoPath: repo.local,
      paths: ['lib/**'],
      agent: { kind: 'command', command: agent },
      limits: { cooldown: '0s' },
      merge: { via: 'pull-request', method: 'merge', forge: { kind: 'gitea', tokenEnv: TOKEN_ENV, reviewers: { [forge().reviewer.login]: 'alice' }, pollEvery: '1s' } },
      ...overrides,
    },
    world().taskQueue,
  );
}

async function rows(id: string, type: string): Promise<Array<{ reason: string; metadata: Record<string, unknown> }>> {
  const { rows: found } = await world().pool.query('SELECT reason, metadata FROM safety_events WHERE intent_id = $1 AND event_type = $2 ORDER BY seq', [id, type]);
  return found as Array<{ reason: string; metadata: Record<string, unknown> }>;
}

const rowsAppear = (id: string, type: string, count = 1) => waitFor(async () => ((await rows(id, type)).length >= count ? rows(id, type) : undefined), 180_000, `${count} ${type} row(s) of ${id}`);

/** The state once the merge gate waits on the pull request (opened or updated `after` decisions). */
async function atPullRequestGate(handle: WorkflowHandle, after = 0): Promise<IntentState & { pullRequest: NonNullable<IntentState['pullRequest']> }> {
  let last: IntentState | undefined;
  return waitFor(async () => {
    const state = await handle.query(stateQuery);
    last = state;
    return state.pendingGate?.gate === 'merge' && state.pullRequest && state.decisions.length >= after ? (state as IntentState & { pullRequest: NonNullable<IntentState['pullRequest']> }) : undefined;
  }, 180_000, 'the merge gate on the pull request').catch((error: unknown) => {
    throw new Error(`${(error as Error).message}; the intent: ${JSON.stringify({ status: last?.status, stage: last?.stage, attempts: last?.attempts, error: last?.error, tests: last?.tests, pending: last?.pendingGate?.gate })}`);
  });
}

interface GiteaPull {
  number: number;
  state: string;
  merged: boolean;
  merge_commit_sha: string | null;
  body: string;
  head: { ref: string; sha: string };
  labels: Array<{ name: string }>;
}

beforeAll(() => {
  process.env[TOKEN_ENV] = forge().author.token;
});
afterAll(() => {
  delete process.env[TOKEN_ENV];
});

test('a pull request on a real Gitea: a bystander counts for nothing, the mapped reviewer sends it back and then approves, a pending check holds the merge, the forge merges', async () => {
  const f = forge();
  const repo = await forgeRepo();
  const localMain = git(repo.local, 'rev-parse', 'main');
  const handle = await start(repo, 'pr');
  const id = handle.workflowId.replace(/^intent-/, '');
  const first = await atPullRequestGate(handle);
  const { number } = first.pullRequest;

  // Opened with the review package, labelled, from warden/<id>, the change without its lineage.
  const pull = await f.api<GiteaPull>('GET', `${repo.api}/pulls/${number}`);
  expect(pull.head.ref).toBe(`warden/${id}`);
  expect(pull.head.sha).toBe(first.pullRequest.headSha);
  expect(pull.body).toContain('**Goal:** Add slugify');
  expect(pull.body).toContain('Predicted vs actual');
  expect(pull.body).toContain(`refs/warden/lineage/${id}`);
  expect(pull.labels.map((l) => l.name)).toEqual(expect.arrayContaining(['warden', `risk:${first.risk?.class}`]));
  const files = await f.api<Array<{ filename: string }>>('GET', `${repo.api}/pulls/${number}/files`);
  expect(files.map((file) => file.filename)).toEqual(['lib/strings.js']);
  expect((await rows(id, 'PULL_REQUEST_OPENED'))[0]!.metadata).toMatchObject({ number, headSha: first.pullRequest.headSha });

  // A read-only bystander's approval is recorded and counts for nothing.
  await f.api('POST', `${repo.api}/pulls/${number}/reviews`, { body: { event: 'APPROVED', body: 'looks fine to me', commit_id: pull.head.sha }, user: f.bystander });
  const [ignored] = await rowsAppear(id, 'FORGE_REVIEW_IGNORED');
  expect(ignored!.reason).toContain(`approved review by ${f.bystander.login}`);
  expect((await handle.query(stateQuery)).pendingGate?.gate).toBe('merge');

  // The mapped reviewer asks for changes: impl runs again with their text, and a new commit lands on the pull request.
  await f.api('POST', `${repo.api}/pulls/${number}/reviews`, { body: { event: 'REQUEST_CHANGES', body: 'Mark it as reviewed, please.', commit_id: pull.head.sha }, user: f.reviewer });
  const second = await atPullRequestGate(handle, first.decisions.length + 1);
  const sentBack = second.decisions.find((d) => d.decision === 'request-changes')!;
  expect(sentBack).toMatchObject({ gate: 'merge', by: 'alice', reason: 'Mark it as reviewed, please.' });
  expect(sentBack.via).toContain(`by ${f.reviewer.login} on the forge`);
  expect(second.attempts.impl).toBe(first.attempts.impl! + 1);
  expect(second.pullRequest.number).toBe(number);
  expect(second.pullRequest.headSha).not.toBe(first.pullRequest.headSha);
  const commits = await f.api<Array<{ sha: string }>>('GET', `${repo.api}/pulls/${number}/commits`);
  expect(commits.map((c) => c.sha)).toContain(second.pullRequest.headSha);
  expect(commits.length).toBe(2);
  expect((await rows(id, 'PULL_REQUEST_UPDATED')).at(-1)!.metadata).toMatchObject({ number, headSha: second.pullRequest.headSha, pushed: true });

  // The required check is pending when the reviewer approves: the gate passes, the merge waits.
  await f.api('POST', `${repo.api}/statuses/${second.pullRequest.headSha}`, { body: { state: 'pending', context: GITEA_REQUIRED_CHECK, description: 'running' } });
  await f.api('POST', `${repo.api}/pulls/${number}/reviews`, { body: { event: 'APPROVED', body: 'Thanks.', commit_id: second.pullRequest.headSha }, user: f.reviewer });
  await rowsAppear(id, 'FORGE_CHECKS_WAITING');
  expect((await f.api<GiteaPull>('GET', `${repo.api}/pulls/${number}`)).state).toBe('open');
  expect((await handle.query(stateQuery)).status).not.toBe('merged');

  await f.api('POST', `${repo.api}/statuses/${second.pullRequest.headSha}`, { body: { state: 'success', context: GITEA_REQUIRED_CHECK, description: 'passed' } });
  const outcome = await handle.result();
  expect(outcome.status).toBe('merged');
  const merged = await f.api<GiteaPull>('GET', `${repo.api}/pulls/${number}`);
  expect(merged.merged).toBe(true);
  expect(outcome.mergedCommit).toBe(merged.merge_commit_sha);
  expect(outcome.pullRequestUrl).toBe(second.pullRequest.url);
  // The forge's main has the change; the local main is the person's to pull, and its remote-tracking branch shows the merge.
  const onForge = await f.api<{ content: string }>('GET', `${repo.api}/contents/lib/strings.js?ref=main`);
  expect(Buffer.from(onForge.content, 'base64').toString('utf8')).toBe(right + ROUND_TWO_LINE);
  expect(git(repo.local, 'rev-parse', 'main')).toBe(localMain);
  expect(git(repo.local, 'rev-parse', 'refs/remotes/origin/main')).toBe(merged.merge_commit_sha);

  // The ledger and the pull request tell the same story.
  const { rows: decisions } = await world().pool.query("SELECT decision, decided_by AS by FROM gate_decisions WHERE intent_id = $1 AND gate = 'merge' ORDER BY decided_at", [id]);
  expect(decisions).toEqual([
    { decision: 'request-changes', by: 'alice' },
    { decision: 'approve', by: 'alice' },
  ]);
  const reviews = await f.api<Array<{ user: { login: string }; state: string }>>('GET', `${repo.api}/pulls/${number}/reviews`);
  expect(reviews.map((r) => [r.user.login, r.state])).toEqual([
    [f.bystander.login, 'APPROVED'],
    [f.reviewer.login, 'REQUEST_CHANGES'],
    [f.reviewer.login, 'APPROVED'],
  ]);
  expect((await rows(id, 'FORGE_REVIEW_COUNTED')).map((r) => r.metadata.decision)).toEqual(['request-changes', 'approve']);
  const [mergedRow] = await rows(id, 'PULL_REQUEST_MERGED');
  expect(mergedRow!.metadata).toMatchObject({ number, mergeCommit: merged.merge_commit_sha, headSha: second.pullRequest.headSha, method: 'merge' });
  expect((await rows(id, 'FORGE_CHECKS_PASSED')).length).toBe(1);
  const comments = await f.api<Array<{ body: string }>>('GET', `${repo.api}/issues/${number}/comments`);
  expect(comments.some((c) => c.body.includes(`new commit ${second.pullRequest.headSha.slice(0, 12)}`))).toBe(true);
});

test("a decision made in Warden, a failed test run and a gate that opens show on the pull request, and a pull request closed by hand ends the intent rejected", async () => {
  const f = forge();
  const repo = await forgeRepo();
  const handle = await start(repo, 'prclosed', { agent: { kind: 'command', command: stumblingAgent } });
  const id = handle.workflowId.replace(/^intent-/, '');
  const { pullRequest } = await atPullRequestGate(handle);
  await handle.signal(decideSignal, { gate: 'merge', decision: 'request-changes', by: 'rita', reason: 'One more line.' });
  // The failed run costs an attempt more than the first round took: the cost-overrun gate opens on the way, and rita lets it go on.
  const overrun = await waitFor(async () => {
    const state = await handle.query(stateQuery);
    return state.pendingGate?.gate === 'cost-overrun' ? state : undefined;
  }, 180_000, 'the cost-overrun gate');
  await handle.signal(decideSignal, { gate: 'cost-overrun', decision: 'approve', by: 'rita' });
  await atPullRequestGate(handle, overrun.decisions.length + 1);
  const comments = await f.api<Array<{ body: string }>>('GET', `${repo.api}/issues/${pullRequest.number}/comments`);
  expect(comments.some((c) => c.body.includes('**request-changes** by rita (unsigned)'))).toBe(true);
  // The safety layers' word while the pull request was open (a failed test run, medium) is said there too.
  const told = comments.filter((c) => c.body.startsWith('Warden, since the last word here:')).map((c) => c.body).join('\n');
  expect(told).toContain('TESTS_FAILED (medium)');
  expect(told).toMatch(/GATE_REQUESTED \(info\): Spend is .* Continue\?/);

  await f.api('PATCH', `${repo.api}/pulls/${pullRequest.number}`, { body: { state: 'closed' } });
  const outcome = await handle.result();
  expect(outcome.status).toBe('rejected');
  expect(outcome.reason).toContain(`pull request #${pullRequest.number} was closed`);
  const [closed] = await rows(id, 'PULL_REQUEST_CLOSED');
  expect(closed!.reason).toContain('while Warden waited');
});

test('an intent rejected in Warden closes its pull request with the reason', async () => {
  const f = forge();
  const repo = await forgeRepo();
  const handle = await start(repo, 'prreject');
  const { pullRequest } = await atPullRequestGate(handle);
  await handle.signal(decideSignal, { gate: 'merge', decision: 'reject', by: 'rita', reason: 'not this way' });
  expect((await handle.result()).status).toBe('rejected');
  expect((await f.api<GiteaPull>('GET', `${repo.api}/pulls/${pullRequest.number}`)).state).toBe('closed');
  const comments = await f.api<Array<{ body: string }>>('GET', `${repo.api}/issues/${pullRequest.number}/comments`);
  expect(comments.at(-1)!.body).toContain('Warden: the intent ended rejected');
  expect(comments.at(-1)!.body).toContain('not this way');
});

test('a remote nobody answers at fails the intent after a few tries with a FORGE_FAILED row', async () => {
  const repo = await forgeRepo();
  git(repo.local, 'remote', 'set-url', 'origin', 'http://127.0.0.1:9/nobody/here.git');
  const handle = await start(repo, 'prgone');
  const error = await handle.result().catch((e: unknown) => e);
  expect(String((error as WorkflowFailedError).cause?.message)).toMatch(/FORGE_FAILED: could not push the change and open its pull request: forge \(unreachable\)/);
  const [failed] = await rows(handle.workflowId.replace(/^intent-/, ''), 'FORGE_FAILED');
  expect(failed!.reason).toContain('could not push the change');
});

test('a token the forge refuses, one without the scopes, and a branch Warden may not push to each fail the intent with a FORGE_FAILED row, and nothing merges', async () => {
  const repo = await forgeRepo();
  process.env.WARDEN_FORGE_TOKEN_PR_WRONG = '0'.repeat(40);
  const wrong = await start(repo, 'prtoken', {
    merge: { via: 'pull-request', method: 'merge', forge: { kind: 'gitea', tokenEnv: 'WARDEN_FORGE_TOKEN_PR_WRONG', reviewers: {}, pollEvery: '1s' } },
  });
  const error = await wrong.result().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(WorkflowFailedError);
  expect(String((error as WorkflowFailedError).cause?.message)).toMatch(/FORGE_FAILED: could not push the change and open its pull request: forge \(unauthorized\)/);
  const [failed] = await rows(wrong.workflowId.replace(/^intent-/, ''), 'FORGE_FAILED');
  expect(failed!.reason).not.toContain('0'.repeat(40));

  // A token the forge accepts but that may only read: the push is refused.
  process.env.WARDEN_FORGE_TOKEN_PR_READ = await forge().createToken(forge().author, ['read:user', 'read:repository', 'read:issue']);
  const readOnly = await start(repo, 'prscope', {
    merge: { via: 'pull-request', method: 'merge', forge: { kind: 'gitea', tokenEnv: 'WARDEN_FORGE_TOKEN_PR_READ', reviewers: {}, pollEvery: '1s' } },
  });
  const scopeError = await readOnly.result().catch((e: unknown) => e);
  expect(String((scopeError as WorkflowFailedError).cause?.message)).toMatch(/FORGE_FAILED: could not push the change and open its pull request: forge \((forbidden|unauthorized)\)/);
  expect((await rows(readOnly.workflowId.replace(/^intent-/, ''), 'FORGE_FAILED')).length).toBe(1);

  const guarded = await forgeRepo({ protectWarden: true });
  const refused = await start(guarded, 'prprotected');
  const pushError = await refused.result().catch((e: unknown) => e);
  expect(String((pushError as WorkflowFailedError).cause?.message)).toMatch(/FORGE_FAILED: could not push the change .*forge \(forbidden\)/);
  expect(await forge().api<unknown[]>('GET', `${guarded.api}/pulls?state=all`)).toEqual([]);
});

test("with a poll far away, the forge's signed webhook delivery to warden serve wakes the intent; a delivery with a wrong signature is refused and recorded", async () => {
  const f = forge();
  const secret = 'forge-webhook-secret-for-the-test';
  const app: WebApp = await startWebApp({ client: world().client, ledger: world().ledger, linkSecret: { missing: 'not needed here' }, operator: 'olga', keysDir: '/nonexistent', host: '127.0.0.1', port: 0, logger: pino({ level: 'silent' }), forgeWebhookSecret: secret });
  try {
    const repo = await forgeRepo();
    await f.api('POST', `${repo.api}/hooks`, { body: { type: 'gitea', active: true, events: ['pull_request', 'pull_request_review', 'status'], config: { url: `${app.url}/forge/webhook`, content_type: 'json', secret } } });
    const handle = await start(repo, 'prhook', {
      merge: { via: 'pull-request', method: 'squash', forge: { kind: 'gitea', tokenEnv: TOKEN_ENV, reviewers: { [f.reviewer.login]: 'alice' }, pollEvery: '1h' } },
    });
    const id = handle.workflowId.replace(/^intent-/, '');
    const { pullRequest } = await atPullRequestGate(handle);
    await f.api('POST', `${repo.api}/statuses/${pullRequest.headSha}`, { body: { state: 'success', context: GITEA_REQUIRED_CHECK } });
    await f.api('POST', `${repo.api}/pulls/${pullRequest.number}/reviews`, { body: { event: 'APPROVED', body: 'ok', commit_id: pullRequest.headSha }, user: f.reviewer });
    // Only the webhook can wake it before an hour has passed.
    const outcome = await handle.result();
    expect(outcome.status).toBe('merged');
    expect((await rows(id, 'PULL_REQUEST_MERGED'))[0]!.metadata).toMatchObject({ method: 'squash' });

    const forged = await fetch(`${app.url}/forge/webhook`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-gitea-event': 'pull_request', 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` }, body: JSON.stringify({ number: pullRequest.number }) });
    expect(forged.status).toBe(401);
    const { rows: refused } = await world().pool.query("SELECT reason FROM safety_events WHERE event_type = 'FORGE_WEBHOOK_REFUSED' ORDER BY seq DESC LIMIT 1");
    expect(refused[0]?.reason).toContain('a forge webhook delivery was refused');
  } finally {
    await app.close();
  }
});
