import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import { intentStatus } from '../../src/client/intent-status';
import { answeringDesignStages } from '../../src/client/sample-repo';
import { stateQuery } from '../../src/shared/messages';
import { createWardenWorker } from '../../src/workers/warden-worker';
import { createRedactor } from '../../src/shared/redact';
import { SWEEP_AFTER_CLOSE_MS } from '../../src/activities/sweeper';
import { TEST_CONFIG, git, startSampleIntent, temporalAddress, useTestWorld, waitFor } from '../helpers/env';
import { processesWith } from '../helpers/processes';

/**
 * Nothing is left behind: an intent terminated from outside (the Web UI, `temporal workflow
 * terminate`) never runs its own cleanup. Its agent dies with the activity; the sweeper removes
 * its worktree, keeps its lineage and branch, and writes one ledger row saying what happened.
 */

const world = useTestWorld('sweeper');

/** Terminates an intent while its impl agent sleeps as `<prefix>-42` (only the sleep's own command line says 42). */
async function terminatedMidImpl(prefix: string) {
  const command = answeringDesignStages(`if grep -q '^# Warden: impl'; then bash -c "exec -a ${prefix}-\\$((40+2)) sleep 300" & wait; else echo done; fi`);
  const tag = `${prefix}-42`;
  const started = await startSampleIntent(world(), 'sw', { agent: { kind: 'command', command } });
  await waitFor(() => (processesWith(tag).length > 0 ? true : undefined), 120_000, 'the impl agent to start');
  expect(await started.handle.query(stateQuery)).toMatchObject({ stage: 'impl' });
  const cli = process.env.WARDEN_TEST_CLI_PATH!;
  execFileSync(cli, ['workflow', 'terminate', '--workflow-id', `intent-${started.id}`, '--reason', 'operator pulled the plug', '--address', temporalAddress()], { encoding: 'utf8' });
  return started;
}

function worktreesOf(id: string): string[] {
  const root = world().worktreeRoot;
  if (!existsSync(root)) return [];
  return readdirSync(root).flatMap((repoFolder) => (existsSync(path.join(root, repoFolder, id)) ? [path.join(root, repoFolder, id)] : []));
}

async function sweptRows(id: string): Promise<Array<{ reason: string; metadata: Record<string, unknown> }>> {
  const { rows } = await world().pool.query("SELECT reason, metadata FROM safety_events WHERE intent_id = $1 AND event_type = 'INTENT_SWEPT'", [id]);
  return rows;
}

test('terminated mid-impl: the agent dies, the sweep workflow removes the worktree and says so in the ledger, once', async () => {
  const tag = `warden-sweep-${process.pid}-${Date.now()}`;
  const { handle, repo, id } = await terminatedMidImpl(tag);
  const terminatedAt = Date.now();
  // Just closed (SWEEP_AFTER_CLOSE_MS is 10 s; this sweep runs within a second or two): its
  // activity may still be stopping, so the sweep leaves it for now.
  expect(await world().client.workflow.execute('sweepWorkflow', { taskQueue: world().taskQueue, workflowId: `sweep-early-${id}`, args: [] })).toMatchObject({ swept: 0 });
  // The activity learns of the termination on its next heartbeat and kills the agent, which
  // would sleep five minutes unkilled. A hang guard; how fast a stop is: bench/kill-latency.ts.
  await waitFor(() => (processesWith(`${tag}-42`).length === 0 ? true : undefined), 120_000, 'the agent to die');
  expect(worktreesOf(id)).toHaveLength(1); // nothing ran the intent's cleanup

  const status = await intentStatus(world().client, world().ledger, id);
  expect(status).toMatchObject({ workflowStatus: 'TERMINATED', wardenStatus: 'terminated' });
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, terminatedAt + SWEEP_AFTER_CLOSE_MS + 500 - Date.now())));

  const sweep = await world().client.workflow.execute('sweepWorkflow', { taskQueue: world().taskQueue, workflowId: `sweep-${id}`, args: [] });
  expect(sweep).toMatchObject({ swept: 1 });
  expect(worktreesOf(id)).toEqual([]);
  expect(git(repo, 'worktree', 'list').split('\n')).toHaveLength(1);
  // The branch is kept (a resume continues from it) and, with its worktree gone, can be deleted.
  expect(git(repo, 'branch', '--list', `warden/${id}`)).toContain(`warden/${id}`);
  // and its commits are kept under the resume ref, whatever becomes of the branch
  expect(git(repo, 'rev-parse', `refs/warden/resume/${id}^1`)).toBe(git(repo, 'rev-parse', `warden/${id}`));
  const [row, ...more] = await sweptRows(id);
  expect(more).toEqual([]);
  expect(row!.reason).toMatch(/^the intent was terminated \(terminated by .+: operator pulled the plug\) without its own cleanup: its worktree was removed, its lineage kept at .+, its branch warden\/.+ kept$/);
  expect(row!.metadata).toMatchObject({ workflowStatus: 'TERMINATED', branchKept: true });
  expect(existsSync(String(row!.metadata.lineageCopy))).toBe(true);

  // A second sweep finds nothing of it.
  const again = await world().client.workflow.execute('sweepWorkflow', { taskQueue: world().taskQueue, workflowId: `sweep-again-${id}`, args: [] });
  expect(again).toMatchObject({ swept: 0 });
  expect(await sweptRows(id)).toHaveLength(1);
  expect(git(repo, 'branch', '-D', `warden/${id}`)).toContain('Deleted branch');
  expect((await handle.describe()).status.name).toBe('TERMINATED');
});

test('a worker that starts sweeps at once; running intents are left alone', async () => {
  const tag = `warden-sweep-start-${process.pid}-${Date.now()}`;
  const { id } = await terminatedMidImpl(tag);
  const running = await startSampleIntent(world(), 'swr', { limits: { gateTimeout: '10m' } });
  await waitFor(async () => ((await running.handle.query(stateQuery)).pendingGate ? true : undefined), 120_000, 'the running intent to wait at a gate');
  await waitFor(() => (processesWith(`${tag}-42`).length === 0 ? true : undefined), 120_000, 'the agent to die');
  expect(worktreesOf(id)).toHaveLength(1);
  await new Promise((resolve) => setTimeout(resolve, SWEEP_AFTER_CLOSE_MS + 500)); // no longer just closed

  // A second worker on another task queue, over the same worktree folder: it sweeps as it starts.
  const worker = await createWardenWorker({
    connection: world().connection,
    taskQueue: `${world().taskQueue}-second`,
    workflowBundle: world().bundle,
    worktreeRoot: world().worktreeRoot,
    lineageRoot: world().lineageRoot,
    ledger: world().ledger,
    logger: pino({ level: 'silent' }),
    redact: createRedactor(process.env),
    safety: TEST_CONFIG.worker,
    sweepSchedule: false, // this test sweeps by hand
  });
  try {
    await worker.runUntil(waitFor(async () => ((await sweptRows(id)).length === 1 ? true : undefined), 120_000, 'the sweep at worker start'));
    expect(worktreesOf(id)).toEqual([]);
    expect(worktreesOf(running.id)).toHaveLength(1);
    expect(await sweptRows(running.id)).toEqual([]);
  } finally {
    await running.handle.terminate('test over');
  }
});
