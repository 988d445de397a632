import { spawnSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { WorkflowFailedError } from '@temporalio/client';
import { intentHandle, startIntent } from '../../src/client/intents';
import { timelineWithHistory } from '../../src/client/history-timeline';
import { findResetPoint, resumeIntent } from '../../src/client/resume';
import { verifyStoredChain } from '../../src/ledger/chain';
import { UserError } from '../../src/shared/errors';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { sweepClosedIntents } from '../../src/activities/sweeper';
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
  const { stage } = await resumeIntent(world().client, 'default', id, { stage: 'impl', reason: 'agent fixed', reapplySignals: false, force: false, by: 'tester', ledger: world().ledger });
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
  await expect(resumeIntent(world().client, 'default', id, { stage: 'merge', reason: 'x', reapplySignals: false, force: false, by: 'tester', ledger: world().ledger })).rejects.toThrow(UserError);
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
  await expect(resumeIntent(world().client, 'default', id, { stage: 'review', reason: 'x', reapplySignals: false, force: false, by: 'tester', ledger: world().ledger })).rejects.toThrow(/still running/);
  // Something the run left that git ignores: a rewind removes it too.
  const worktree = (await handle.query(stateQuery)).worktreePath!;
  appendFileSync(path.join(repo, '.git', 'info', 'exclude'), '*.log\n');
  writeFileSync(path.join(worktree, 'lib', 'build.log'), 'left by the run that is reset');
  // with --force it resets: review runs again and the gate is asked again (the old decision is not re-applied)
  await resumeIntent(world().client, 'default', id, { stage: 'review', reason: 'again', reapplySignals: false, force: true, by: 'tester', ledger: world().ledger });
  const current = intentHandle(world().client, id); // the run the reset started
  await waitFor(async () => ((await current.query(stateQuery)).pendingGate ? true : undefined), 120_000, 'the merge gate again');
  await current.signal(decideSignal, { gate: 'merge', decision: 'reject', by: 'tester', reason: 'done' });
  expect((await current.result()).status).toBe('rejected');
  expect(await stageCalls(id)).toEqual(['triage', 'lld', 'spec', 'impl', 'impl', 'review', 'review']);
  const { rows } = await world().pool.query("SELECT reason, metadata FROM safety_events WHERE intent_id = $1 AND event_type = 'ROLLBACK'", [id]);
  expect(rows).toHaveLength(1);
  expect(rows[0].reason).toMatch(/^the worktree was reset from [0-9a-f]{12} to [0-9a-f]{12} before review attempt 1 \(a resume\): 1 untracked or ignored path\(s\) removed with it$/);
  expect(rows[0].metadata.removed).toEqual(['lib/build.log']);
  // the ROLLBACK row is in the intent's hash chain, and the chains are whole
  const { rows: chained } = await world().pool.query("SELECT chain_pos::int AS pos FROM safety_events WHERE intent_id = $1 AND event_type = 'ROLLBACK'", [id]);
  expect(chained[0].pos).toBeGreaterThan(0);
  expect(await verifyStoredChain(world().pool)).toMatchObject({ whole: true, broken: [], unchained: [] });
});

const BIN = path.resolve(__dirname, '../../bin/warden.js');

/** `warden ARGS` for real, against this file's ledger and the test Temporal server. */
function warden(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const home = mkdtempSync(path.join(tmpdir(), 'warden-resume-home-'));
  const env = { ...process.env, WARDEN_HOME: home, WARDEN_LOG_LEVEL: 'warn', USER: 'resume-tester', DATABASE_URL: world().databaseUrl };
  const result = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8', timeout: 120_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** An intent rejected at its merge gate: its branch is deleted as it ends. */
async function rejectedIntent(lineage?: { keepForResume: string }): Promise<{ id: string; repo: string }> {
  const repo = makeSampleRepo();
  const id = `resume-rejected-${Date.now()}`;
  const handle = await startIntent(
    world().client,
    {
      id,
      goal: 'Add slugify',
      repoPath: repo,
      paths: ['lib/**'],
      agent: { kind: 'scripted', scriptPath: writeScript({ stages: { ...demo.stages, impl: [GOOD_IMPL] } }) },
      limits: { cooldown: '0s' },
      ...(lineage ? { lineage: { location: 'ref' as const, ...lineage } } : {}),
    },
    world().taskQueue,
  );
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'reject', by: 'tester', reason: 'not yet' });
  expect((await handle.result()).status).toBe('rejected');
  expect(() => git(repo, 'rev-parse', '--verify', `refs/heads/warden/${id}`)).toThrow(); // the rejection deleted the branch
  return { id, repo };
}

async function resumedRows(id: string): Promise<{ reason: string; metadata: Record<string, unknown> }[]> {
  const { rows } = await world().pool.query("SELECT reason, metadata FROM safety_events WHERE intent_id = $1 AND event_type = 'INTENT_RESUMED'", [id]);
  return rows;
}

test('an intent rejected at its merge gate resumes from impl (warden resume, for real) from its kept commits and can merge', async () => {
  const { id, repo } = await rejectedIntent();
  const kept = git(repo, 'rev-parse', `refs/warden/resume/${id}^1`); // the branch as it ended
  expect(git(repo, 'log', '--format=%s', kept)).toContain(`warden(${id}): tests after impl attempt 1: passed`);

  const resumed = warden('resume', id, '--from', 'impl', '--reason', 'try once more');
  expect(resumed.stderr).toBe('');
  expect(resumed.code).toBe(0);
  expect(resumed.stdout).toMatch(new RegExp(`^intent ${id} resumes from impl \\(run [0-9a-f-]+\\)`));

  const handle = intentHandle(world().client, id);
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate again');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');
  expect(await stageCalls(id)).toEqual(['triage', 'lld', 'spec', 'impl', 'review', 'impl', 'review']);
  // impl ran again from the commit it first started from, which only the resume ref still held
  const merged = git(repo, 'log', '--format=%s', `refs/warden/lineage/${id}^1`);
  expect(merged).toContain(`warden(${id}): spec attempt 1`);
  expect(git(repo, 'log', '--format=%s', 'main')).toContain(`warden(${id}): Add slugify`);

  // the reset and what it undid, in the ledger
  const rows = await resumedRows(id);
  expect(rows).toHaveLength(1);
  expect(rows[0]!.reason).toMatch(new RegExp(`^resumed from impl by resume-tester \\(try once more\\): the completed run \\S+ was reset, undoing 2 stage attempt\\(s\\) \\(impl, review\\); 1 signal\\(s\\) dropped \\(decide: reject at merge by tester\\); the branch goes back from [0-9a-f]{12} to [0-9a-f]{12} \\(\\d+ commit\\(s\\) of the completed run\\)$`));
  expect(rows[0]!.metadata).toMatchObject({ by: 'resume-tester', stage: 'impl', endedAs: 'COMPLETED', undoneStages: ['impl', 'review'], branchTip: kept });
  const { rows: rollbacks } = await world().pool.query("SELECT metadata FROM safety_events WHERE intent_id = $1 AND event_type = 'ROLLBACK'", [id]);
  expect(rollbacks).toHaveLength(1);
  expect(rollbacks[0].metadata.to).toBe(rows[0]!.metadata.startCommit);

  // Beside the histories: each row is tied to the run that wrote it; the reset's own row is the resume command's.
  const timeline = await timelineWithHistory(world().client, world().pool, id);
  const first = timeline.find((e) => e.type === 'INTENT_STARTED')!.history!.runId;
  const second = timeline.find((e) => e.type === 'INTENT_MERGED')!.history!.runId;
  expect(second).not.toBe(first);
  expect(second).toBe((await handle.describe()).runId);
  expect(timeline.find((e) => e.type === 'INTENT_REJECTED')!.history!.runId).toBe(first);
  expect(timeline.find((e) => e.type === 'ROLLBACK')!.history).toMatchObject({ runId: second, eventType: 'ActivityTaskScheduled' });
  expect(timeline.filter((e) => !e.history).map((e) => [e.type, e.untied])).toEqual([['INTENT_RESUMED', expect.stringContaining('a warden command such as stop or resume')]]);
});

test('a failed intent resumes from impl, and the reset is in the ledger', async () => {
  const { id } = await failedIntent();
  await resumeIntent(world().client, 'default', id, { stage: 'impl', reason: 'look again', reapplySignals: false, force: false, by: 'tester', ledger: world().ledger });
  const rows = await resumedRows(id);
  expect(rows).toHaveLength(1);
  expect(rows[0]!.metadata).toMatchObject({ stage: 'impl', endedAs: 'FAILED', undoneStages: ['impl', 'impl'] });
  await expect(intentHandle(world().client, id).result()).rejects.toBeInstanceOf(WorkflowFailedError);
});

test('a stopped intent resumes from impl and can merge', async () => {
  const repo = makeSampleRepo();
  const id = `resume-stopped-${Date.now()}`;
  const handle = await startIntent(
    world().client,
    { id, goal: 'Add slugify', repoPath: repo, paths: ['lib/**'], agent: { kind: 'scripted', scriptPath: writeScript({ stages: { ...demo.stages, impl: [GOOD_IMPL] } }) }, limits: { cooldown: '0s' } },
    world().taskQueue,
  );
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
  await handle.cancel();
  await expect(handle.result()).rejects.toBeInstanceOf(WorkflowFailedError);
  expect((await handle.describe()).status.name).toBe('CANCELLED');

  await resumeIntent(world().client, 'default', id, { stage: 'impl', reason: 'go on', reapplySignals: false, force: false, by: 'tester', ledger: world().ledger });
  const current = intentHandle(world().client, id);
  await waitFor(async () => ((await current.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate again');
  await current.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await current.result()).status).toBe('merged');
  expect(await stageCalls(id)).toEqual(['triage', 'lld', 'spec', 'impl', 'review', 'impl', 'review']);
  expect((await resumedRows(id))[0]!.metadata).toMatchObject({ endedAs: 'CANCELLED', undoneStages: ['impl', 'review'] });
});

test("past its retention the sweeper drops an ended intent's resume ref, and resume says so before resetting anything", async () => {
  const { id, repo } = await rejectedIntent({ keepForResume: '1h' });
  git(repo, 'rev-parse', '--verify', `refs/warden/resume/${id}`); // kept as it ended
  const report = await sweepClosedIntents({
    worktreeRoot: mkdtempSync(path.join(tmpdir(), 'warden-resume-sweep-')),
    lineageRoot: world().lineageRoot,
    statusOf: async () => ({ status: 'NOT_FOUND' }),
    recordEvent: async () => undefined,
    repositories: () => world().ledger.queries.intentRepositories(),
    logger: pino({ level: 'silent' }),
    now: () => Date.now() + 2 * 3_600_000, // two hours on: past the hour it was kept for
  });
  expect(report.droppedResumeRefs).toContainEqual({ intentId: id, repoPath: repo });
  expect(() => git(repo, 'rev-parse', '--verify', `refs/warden/resume/${id}`)).toThrow();

  const before = (await intentHandle(world().client, id).describe()).runId;
  const refused = warden('resume', id, '--from', 'impl');
  expect(refused.code).toBe(2);
  expect(refused.stdout).toBe('');
  expect(refused.stderr.trim()).toMatch(
    new RegExp(`^warden: intent ${id} cannot resume from impl: the commit it started from \\([0-9a-f]{12}\\) is no longer kept \\(its branch is gone or moved, and refs/warden/resume/${id} was dropped after its retention, lineage.keepForResume\\); start a new intent instead$`),
  );
  expect((await intentHandle(world().client, id).describe()).runId).toBe(before);
  expect(await resumedRows(id)).toHaveLength(0);
});
