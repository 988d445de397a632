import { appendFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import { intentHandle, startIntent } from '../../src/client/intents';
import { findResetPoint, resumeIntent } from '../../src/client/resume';
import { UserError } from '../../src/shared/errors';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { demoStages, git, makeSampleRepo, waitFor, writeScript, useTestWorld } from '../helpers/env';


const demo = { stages: demoStages() };
const BAD_IMPL = demo.stages.impl![0]!;
const GOOD_IMPL = demo.stages.impl![1]!;

const world = useTestWorld('resume');

async function failedIntent(): Promise<{ id: string; repo: string; scriptPath: string }> {
  const repo = makeSampleRepo();
  const scriptPath = writeScript({ stages: { ...demo.stages, impl: [BAD_IMPL] } });
  const id = `resume-${Date.now()}`;
  const handle = await startIntent(
    world().client,
    { id, goal: 'Add slugify', repoPath: repo, paths: ['lib/**'], agent: { kind: 'scripted', scriptPath }, limits: { cooldown: '0s' } },
    world().taskQueue,
  );
  await expect(handle.result()).rejects.toBeInstanceOf(WorkflowFailedError); // the two-strike rule stops it
  return { id, repo, scriptPath };
}

async function stageCalls(id: string): Promise<string[]> {
  const { rows } = await world().pool.query('SELECT stage FROM cost_events WHERE intent_id = $1 ORDER BY timestamp', [id]);
  return rows.map((r: { stage: string }) => r.stage);
}

test('resume --from impl re-runs impl and later stages only, from the commit impl started from', async () => {
  const { id, repo, scriptPath } = await failedIntent();
  expect(await stageCalls(id)).toEqual(['triage', 'lld', 'spec', 'impl', 'impl']);
  const failedHead = git(repo, 'rev-parse', `warden/${id}`);

  // the agent gets it right this time
  writeFileSync(scriptPath, JSON.stringify({ stages: { ...demo.stages, impl: [GOOD_IMPL] } }));
  const { stage } = await resumeIntent(world().client, 'default', id, { stage: 'impl', reason: 'agent fixed', reapplySignals: false, force: false });
  expect(stage).toBe('impl');

  const handle = intentHandle(world().client, id);
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate ? true : undefined), 120_000, 'the merge gate');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');

  // triage, lld and spec were not run again; impl ran once more, then review
  expect(await stageCalls(id)).toEqual(['triage', 'lld', 'spec', 'impl', 'impl', 'impl', 'review']);
  // the failed attempts' commits were rewound away: the branch that merged (its commits below the
  // lineage ref's first parent) holds one impl attempt, which passed
  const merged = git(repo, 'log', '--format=%s', `refs/warden/lineage/${id}^1`);
  expect(merged).toContain(`warden(${id}): spec attempt 1`);
  expect(merged).not.toContain('tests after impl attempt 2');
  expect(merged).toContain(`warden(${id}): tests after impl attempt 1: passed`);
  expect(() => git(repo, 'merge-base', '--is-ancestor', failedHead, 'main')).toThrow(); // not merged: rewound
  expect(() => git(repo, 'merge-base', '--is-ancestor', failedHead, `refs/warden/lineage/${id}^1`)).toThrow();
  // the failed run's lineage, recorded when it ended, stays below the merged one's
  expect(git(repo, 'rev-parse', `refs/warden/lineage/${id}^2^1`)).toBe(failedHead);
});

test('resume with no stage picks the stage that failed; bad requests change nothing', async () => {
  const { id } = await failedIntent();
  const history = await intentHandle(world().client, id).fetchHistory();
  expect(findResetPoint(history.events!).stage).toBe('impl');
  expect(() => findResetPoint(history.events!, 'deploy')).toThrow(/unknown stage "deploy"/);
  expect(() => findResetPoint(history.events!, 'review')).toThrow(/has not reached stage review/);
  const before = (await intentHandle(world().client, id).describe()).runId;
  await expect(resumeIntent(world().client, 'default', id, { stage: 'merge', reason: 'x', reapplySignals: false, force: false })).rejects.toThrow(UserError);
  expect((await intentHandle(world().client, id).describe()).runId).toBe(before);
});

test('a running intent is not reset without --force', async () => {
  const repo = makeSampleRepo();
  const id = `resume-running-${Date.now()}`;
  const handle = await startIntent(
    world().client,
    { id, goal: 'wait at the gate', repoPath: repo, agent: { kind: 'scripted', scriptPath: writeScript({ stages: demo.stages }) }, limits: { cooldown: '0s' } },
    world().taskQueue,
  );
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate ? true : undefined), 120_000, 'the merge gate');
  await expect(resumeIntent(world().client, 'default', id, { stage: 'review', reason: 'x', reapplySignals: false, force: false })).rejects.toThrow(/still running/);
  // Something the run left that git ignores: a rewind removes it too.
  const worktree = (await handle.query(stateQuery)).worktreePath!;
  appendFileSync(path.join(repo, '.git', 'info', 'exclude'), '*.log\n');
  writeFileSync(path.join(worktree, 'lib', 'build.log'), 'left by the run that is reset');
  // with --force it resets: review runs again and the gate is asked again (the old decision is not re-applied)
  await resumeIntent(world().client, 'default', id, { stage: 'review', reason: 'again', reapplySignals: false, force: true });
  const current = intentHandle(world().client, id); // the run the reset started
  await waitFor(async () => ((await current.query(stateQuery)).pendingGate ? true : undefined), 120_000, 'the merge gate again');
  await current.signal(decideSignal, { gate: 'merge', decision: 'reject', by: 'tester', reason: 'done' });
  expect((await current.result()).status).toBe('rejected');
  expect(await stageCalls(id)).toEqual(['triage', 'lld', 'spec', 'impl', 'impl', 'review', 'review']);
  const { rows } = await world().pool.query("SELECT reason, metadata FROM safety_events WHERE intent_id = $1 AND event_type = 'ROLLBACK'", [id]);
  expect(rows).toHaveLength(1);
  expect(rows[0].reason).toMatch(/^the worktree was reset from [0-9a-f]{12} to [0-9a-f]{12} before review attempt 1 \(a resume\): 1 untracked or ignored path\(s\) removed with it$/);
  expect(rows[0].metadata.removed).toEqual(['lib/build.log']);
});
