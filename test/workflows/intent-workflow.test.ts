import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import { startIntent, intentHandle } from '../../src/client/intents';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import type { IntentInput } from '../../src/shared/intent';
import type { IntentState } from '../../src/shared/state';
import { UserError } from '../../src/shared/errors';
import { demoScript, git, makeSampleRepo, waitFor, useTestWorld, worktreeFoldersLeft } from '../helpers/env';

/** The demo script with no delays: impl fails once, then passes. */
const fastScript = demoScript();

const world = useTestWorld('intent');

let counter = 0;
function intentFor(repoPath: string, overrides: Partial<IntentInput> = {}): IntentInput {
  counter += 1;
  return {
    id: `t${counter}-${Date.now()}`,
    goal: 'Add slugify() to the strings library',
    repoPath,
    baseBranch: 'main',
    paths: ['lib/**'],
    agent: { kind: 'scripted', scriptPath: fastScript },
    ...overrides,
    limits: { cooldown: '0s', ...overrides.limits },
  };
}

async function waitForGate(intentId: string): Promise<IntentState> {
  return waitFor(async () => {
    const state = await intentHandle(world().client, intentId).query(stateQuery);
    return state.pendingGate ? state : undefined;
  }, 120_000, `intent ${intentId} to reach the merge gate`);
}

/** Worktree folders left on disk, and worktrees `repo`'s git still has on record (besides its own). */
function worktreesLeft(repo: string): string[] {
  const folders = worktreeFoldersLeft(world().worktreeRoot);
  const recorded = git(repo, 'worktree', 'list', '--porcelain')
    .split('\n')
    .filter((line) => line.startsWith('worktree ') && line !== `worktree ${repo}`);
  return [...folders, ...recorded];
}

test('an approved intent runs every stage, loops impl until tests pass, and merges its change alone into main; the lineage goes to its ref', async () => {
  const repo = makeSampleRepo();
  const intent = intentFor(repo);
  const handle = await startIntent(world().client, intent, world().taskQueue);
  const atGate = await waitForGate(intent.id);
  expect(atGate.attempts).toEqual({ triage: 1, lld: 1, spec: 1, impl: 2, review: 1 });
  expect(atGate.tests.map((t) => t.passed)).toEqual([false, true]);
  expect(atGate.tests[0]!.summary).toContain('1 failed');
  expect(git(repo, 'rev-parse', 'main')).toBe(git(repo, 'rev-list', '--max-count=1', 'main')); // nothing merged yet
  expect(git(repo, 'log', '--oneline', 'main')).not.toContain('warden');

  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  const outcome = await handle.result();

  expect(outcome.status).toBe('merged');
  expect(git(repo, 'rev-parse', 'main')).toBe(outcome.mergedCommit);
  expect(readFileSync(path.join(repo, 'lib/strings.js'), 'utf8')).toContain('function slugify');
  // main gets the agent's change and nothing else: no lineage in its tree or its history
  expect(git(repo, 'diff', '--name-only', `${outcome.mergedCommit}^1`, outcome.mergedCommit!)).toBe('lib/strings.js\nlib/strings.test.js');
  expect(git(repo, 'log', '--format=%s', '--name-only', 'main')).not.toContain('docs/lineage');
  // the lineage is in the repository under its ref, with every attempt's commit below it ...
  const ref = `refs/warden/lineage/${intent.id}`;
  expect(outcome.lineageRef).toBe(ref);
  expect(git(repo, 'ls-tree', '--name-only', ref).split('\n')).toEqual(expect.arrayContaining(['01-triage.prompt.md', '04-impl-attempt-1-tests.log', '05-review.md']));
  expect(git(repo, 'show', `${ref}:04-impl-attempt-1-tests.log`)).toMatch(/not ok \d+ - slugify makes/);
  expect(git(repo, 'log', '--format=%s', ref)).toContain(`warden(${intent.id}): impl attempt 2`);
  // ... and in the worker's lineage folder, where the artifact paths follow it
  expect(outcome.lineagePath).toBe(path.join(world().lineageRoot, intent.id));
  expect(readFileSync(path.join(outcome.lineagePath!, '05-review.md'), 'utf8').trim()).toBe(git(repo, 'show', `${ref}:05-review.md`));
  expect(git(repo, 'branch', '--list', `warden/${intent.id}`)).toBe('');
  expect(worktreesLeft(repo)).toEqual([]);
  const final = await handle.query(stateQuery);
  expect(final).toMatchObject({ lineagePath: outcome.lineagePath, lineageRef: ref });
  expect(final.decisions).toEqual([expect.objectContaining({ gate: 'merge', decision: 'approve', by: 'tester', timedOut: false })]);
  expect(final.spendUsd).toBe('0.051000'); // exact: 0.004 + 0.008 + 0.007 + 0.012 + 0.014 + 0.006
  expect(final.artifacts['05-review.md']).toBe(path.join(outcome.lineagePath!, '05-review.md'));
  for (const artifact of Object.values(final.artifacts)) expect(existsSync(artifact)).toBe(true);
});

test('with lineage.location tree, the lineage merges into main under docs/lineage/done with the whole intent branch, as it did before', async () => {
  const repo = makeSampleRepo();
  const intent = intentFor(repo, { lineage: { location: 'tree' } });
  const handle = await startIntent(world().client, intent, world().taskQueue);
  await waitForGate(intent.id);
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  const outcome = await handle.result();

  expect(outcome.status).toBe('merged');
  expect(git(repo, 'rev-parse', 'main')).toBe(outcome.mergedCommit);
  expect(git(repo, 'show', '--name-only', '--format=', `main:docs/lineage/done/${intent.id}`)).toContain('05-review.md');
  expect(git(repo, 'log', '--format=%s', 'main')).toContain(`warden(${intent.id}): impl attempt 2`);
  expect(outcome.lineagePath).toBe(`${repo}/docs/lineage/done/${intent.id}`);
  expect(outcome.lineageRef).toBeUndefined();
  expect(git(repo, 'for-each-ref', 'refs/warden/')).toBe('');
  expect(existsSync(path.join(outcome.lineagePath!, '04-impl-attempt-1-tests.log'))).toBe(true);
  const final = await handle.query(stateQuery);
  expect(final.artifacts['05-review.md']).toBe(`${repo}/docs/lineage/done/${intent.id}/05-review.md`);
  for (const artifact of Object.values(final.artifacts)) expect(existsSync(artifact)).toBe(true);
});

test('a second start of a running intent id is refused with a clear message', async () => {
  const repo = makeSampleRepo();
  const intent = intentFor(repo);
  const handle = await startIntent(world().client, intent, world().taskQueue);
  await expect(startIntent(world().client, intent, world().taskQueue)).rejects.toThrow(UserError);
  await expect(startIntent(world().client, intent, world().taskQueue)).rejects.toThrow(/already running/);
  await waitForGate(intent.id);
  await handle.signal(decideSignal, { gate: 'merge', decision: 'reject', by: 'tester', reason: 'cleanup' });
  await handle.result();
});

test('a rejected merge gate merges nothing and removes the branch and the worktree', async () => {
  const repo = makeSampleRepo();
  const before = git(repo, 'rev-parse', 'main');
  const intent = intentFor(repo);
  const handle = await startIntent(world().client, intent, world().taskQueue);
  await waitForGate(intent.id);
  await handle.signal(decideSignal, { gate: 'merge', decision: 'reject', by: 'tester', reason: 'not this way' });
  const outcome = await handle.result();
  expect(outcome).toMatchObject({ status: 'rejected', reason: 'not this way' });
  expect(git(repo, 'rev-parse', 'main')).toBe(before);
  expect(git(repo, 'branch', '--list', `warden/${intent.id}`)).toBe('');
  expect(worktreesLeft(repo)).toEqual([]);
  // the record of what happened survives outside the branches: in the worker's lineage folder and the lineage ref
  expect(outcome.lineagePath).toBe(path.join(world().lineageRoot, intent.id));
  expect(existsSync(path.join(outcome.lineagePath!, '05-review.md'))).toBe(true);
  expect(outcome.lineageRef).toBe(`refs/warden/lineage/${intent.id}`);
  expect(git(repo, 'show', `${outcome.lineageRef}:05-review.md`)).toBe(readFileSync(path.join(outcome.lineagePath!, '05-review.md'), 'utf8').trim());
  const final = await handle.query(stateQuery);
  expect(final.artifacts['05-review.md']).toBe(path.join(outcome.lineagePath!, '05-review.md'));
  for (const artifact of Object.values(final.artifacts)) expect(existsSync(artifact)).toBe(true);
});

test('invalid decide payloads are ignored and counted; a valid one still decides', async () => {
  const repo = makeSampleRepo();
  const intent = intentFor(repo);
  const handle = await startIntent(world().client, intent, world().taskQueue);
  await waitForGate(intent.id);
  await handle.signal(decideSignal, { gate: 'merge', decision: 'maybe', by: 'tester' });
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve' });
  await handle.signal(decideSignal, { gate: 'merge', decision: 'reject', by: 'tester' }); // no reason
  await handle.signal(decideSignal, 'approve');
  await handle.signal(decideSignal, { gate: 'lld', decision: 'approve', by: 'tester' });
  const state = await waitFor(async () => {
    const s = await handle.query(stateQuery);
    return s.rejectedSignals === 5 ? s : undefined;
  }, 120_000, 'five ignored signals');
  expect(state.pendingGate?.gate).toBe('merge');
  expect(state.decisions).toEqual([]);
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');
});

test('a gate with no decision times out and rejects', async () => {
  const repo = makeSampleRepo();
  const before = git(repo, 'rev-parse', 'main');
  const intent = intentFor(repo, { limits: { gateTimeout: '2s' } });
  const handle = await startIntent(world().client, intent, world().taskQueue);
  const outcome = await handle.result();
  expect(outcome.status).toBe('rejected');
  expect(outcome.reason).toBe('no decision within 2s');
  const state = await handle.query(stateQuery);
  expect(state.decisions).toEqual([expect.objectContaining({ decision: 'reject', by: 'warden', timedOut: true })]);
  expect(git(repo, 'rev-parse', 'main')).toBe(before);
});

test('impl that never passes fails after its attempt cap, merges nothing and leaves no worktree', async () => {
  const repo = makeSampleRepo();
  const before = git(repo, 'rev-parse', 'main');
  const script = demoScript({ impl: [{ output: 'tried', edits: [{ path: 'lib/strings.js', content: 'module.exports = {};\n' }] }] });
  const intent = intentFor(repo, { agent: { kind: 'scripted', scriptPath: script }, limits: { attempts: { impl: 2 } } });
  const handle = await startIntent(world().client, intent, world().taskQueue);
  const error = await handle.result().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(WorkflowFailedError);
  expect(String((error as WorkflowFailedError).cause?.message)).toMatch(/MAX_ITERATIONS_EXCEEDED: stage impl: attempt 3/);
  const state = await handle.query(stateQuery);
  expect(state.status).toBe('failed');
  expect(state.tests).toHaveLength(2); // two impl attempts ran; the third was refused by the cap
  expect(git(repo, 'rev-parse', 'main')).toBe(before);
  expect(worktreesLeft(repo)).toEqual([]);
  // the branch stays, so the work can be inspected or resumed
  expect(git(repo, 'branch', '--list', `warden/${intent.id}`)).toContain(`warden/${intent.id}`);
});

test('a workflow started under an id other than intent-<id> is refused before it touches the repo', async () => {
  const repo = makeSampleRepo();
  const intent = intentFor(repo);
  const handle = await world().client.workflow.start('intentWorkflow', {
    taskQueue: world().taskQueue,
    workflowId: `intent-other-${intent.id}`,
    args: [intent],
  });
  const error = await handle.result().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(WorkflowFailedError);
  const cause = (error as WorkflowFailedError).cause as Error & { type?: string };
  expect(cause.type).toBe('INVALID_INTENT');
  expect(cause.message).toContain(`must run as workflow intent-${intent.id}, not intent-other-${intent.id}`);
  expect(git(repo, 'branch', '--list', `warden/${intent.id}`)).toBe('');
  expect(worktreesLeft(repo)).toEqual([]);
});

test('an intent that fails validation in the workflow fails at once and touches nothing', async () => {
  const handle = await world().client.workflow.start('intentWorkflow', {
    taskQueue: world().taskQueue,
    workflowId: `intent-invalid-${Date.now()}`,
    args: [{ id: 'bad id with spaces', goal: '', repoPath: 'relative/path', agent: { kind: 'robot' } }],
  });
  const error = await handle.result().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(WorkflowFailedError);
  const cause = (error as WorkflowFailedError).cause as Error & { type?: string };
  expect(cause.type).toBe('INVALID_INTENT');
  expect(cause.message).toMatch(/id: .*goal: the goal must not be empty.*repoPath: the repository path must be absolute/);
});
