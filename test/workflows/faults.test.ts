import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import type { WardenActivities } from '../../src/activities';
import { startIntent } from '../../src/client/intents';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { demoScript, git, makeSampleRepo, useTestWorld, waitFor, worktreeFoldersLeft } from '../helpers/env';
import { groupAlive } from '../../src/activities/process';
import { answeringDesignStages } from '../../src/client/sample-repo';
import { PRINT_HOST_GROUP } from '../helpers/processes';

/** Fails the first `runAgentStage` of lld *after* it did its work: a crash between commit and reply. */
let failAfterLld = true;

const world = useTestWorld('faults', {
  wrap: (activities: WardenActivities) => ({
    ...activities,
    async runAgentStage(input) {
      const result = await activities.runAgentStage(input);
      if (input.stage === 'lld' && failAfterLld) {
        failAfterLld = false;
        throw new Error('injected: worker lost the reply after committing');
      }
      return result;
    },
  }),
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('a retried stage activity does not commit twice', async () => {
  const repo = makeSampleRepo();
  const id = `retry-${Date.now()}`;
  const handle = await startIntent(
    world().client,
    { id, goal: 'slugify', repoPath: repo, paths: ['lib/**'], agent: { kind: 'scripted', scriptPath: demoScript() }, limits: { cooldown: '0s' } },
    world().taskQueue,
  );
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate ? true : undefined), 120_000, 'the merge gate');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');
  expect(failAfterLld).toBe(false); // the fault did fire
  // The attempts' commits are below the lineage ref (main gets the change alone).
  const lldCommits = git(repo, 'log', '--oneline', `refs/warden/lineage/${id}`, `--grep=warden(${id}): lld attempt 1`, '--fixed-strings');
  expect(lldCommits.split('\n').filter(Boolean)).toHaveLength(1);
  const history = await handle.fetchHistory();
  const lldFailures = history.events!.filter((e) => e.activityTaskFailedEventAttributes);
  expect(lldFailures).toHaveLength(0); // retried inside the activity's retry policy, not surfaced as a failure
  const merges = git(repo, 'log', '--oneline', '--merges', 'main').split('\n').filter(Boolean);
  expect(merges).toHaveLength(1);
});

test('cancelling an intent mid-impl kills the agent process group and removes the worktree', async () => {
  const repo = makeSampleRepo();
  const before = git(repo, 'rev-parse', 'main');
  const pidDir = mkdtempSync(path.join(tmpdir(), 'warden-pid-'));
  const pidFile = path.join(pidDir, 'agent.pid');
  // Every stage answers at once, except impl: it records its pid and runs two long children.
  const command = answeringDesignStages(`if grep -q '^# Warden: impl'; then ${PRINT_HOST_GROUP} > ${pidFile}; sleep 300 & sleep 300 & wait; else echo done; fi`);
  const id = `cancel-${Date.now()}`;
  const handle = await startIntent(
    world().client,
    // Unsandboxed, so its pid file reaches the host's /tmp and its process group is a host one
    // (bubblewrap's cancellation is tested in test/activities/sandbox.test.ts).
    { id, goal: 'hang in impl', repoPath: repo, agent: { kind: 'command', command, sandbox: 'none' }, confinement: { allowUnconfinedCode: true }, limits: { cooldown: '0s' } },
    world().taskQueue,
  );
  const pid = await waitFor(() => (existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8')) : undefined), 120_000, 'the impl agent to start');
  expect(alive(pid)).toBe(true);
  await handle.cancel();
  const error = await handle.result().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(WorkflowFailedError);
  expect((error as WorkflowFailedError).cause?.name).toBe('CancelledFailure');
  // The whole process group is gone: the shell and both sleeps, which would run five minutes
  // unkilled. The wait is a hang guard; how fast a stop is, bench/kill-latency.ts measures.
  await waitFor(() => (groupAlive(pid) ? undefined : true), 120_000, 'the agent process group to die');
  const state = await handle.query(stateQuery);
  expect(state.status).toBe('cancelled');
  expect(git(repo, 'rev-parse', 'main')).toBe(before);
  expect(worktreeFoldersLeft(world().worktreeRoot)).toEqual([]);
});
