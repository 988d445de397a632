import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { intentStatus, renderIntentStatus } from '../../src/client/intent-status';
import { listIntents } from '../../src/client/list-intents';
import { answeringDesignStages } from '../../src/client/sample-repo';
import { stateQuery } from '../../src/shared/messages';
import { keepSweepSchedule, sweepScheduleId } from '../../src/workers/sweep-schedule';
import { anchorScheduleId } from '../../src/workers/anchor-schedule';
import { git, startSampleIntent, temporalAddress, useTestWorld, waitFor } from '../helpers/env';
import { processesWith } from '../helpers/processes';

/**
 * Terminate from the Web UI or the Temporal CLI, with nobody running `warden schedules install`:
 * the worker installed the sweep schedule as it started, so the terminated intent is recorded
 * (INTENT_TERMINATED), its worktree removed and its processes gone, and its status says
 * terminated, from the server and from the ledger alone. Nothing here starts a sweep by hand.
 */

const world = useTestWorld('termsweep', { sweepSchedule: true });

afterAll(async () => {
  await world().client.schedule.getHandle(sweepScheduleId(world().taskQueue)).delete().catch(() => undefined);
  await world().client.schedule.getHandle(anchorScheduleId(world().taskQueue)).delete().catch(() => undefined);
});

function terminate(id: string, reason: string): void {
  execFileSync(process.env.WARDEN_TEST_CLI_PATH!, ['workflow', 'terminate', '--workflow-id', `intent-${id}`, '--reason', reason, '--address', temporalAddress()], { encoding: 'utf8' });
}

function worktreesOf(id: string): string[] {
  const root = world().worktreeRoot;
  if (!existsSync(root)) return [];
  return readdirSync(root).flatMap((repoFolder) => (existsSync(path.join(root, repoFolder, id)) ? [path.join(root, repoFolder, id)] : []));
}

async function eventsOf(id: string, type: string): Promise<Array<{ reason: string; metadata: Record<string, unknown> }>> {
  const { rows } = await world().pool.query('SELECT reason, metadata FROM safety_events WHERE intent_id = $1 AND event_type = $2', [id, type]);
  return rows;
}

test('the worker installs the sweep schedule; an intent terminated at the merge gate and one terminated mid-impl are recorded, cleaned and shown as terminated', async () => {
  // Installed by the worker as it started: nobody ran `warden schedules install`.
  const schedule = await waitFor(
    () => world().client.schedule.getHandle(sweepScheduleId(world().taskQueue)).describe().catch(() => undefined),
    120_000,
    'the sweep schedule',
  );
  expect(schedule.action).toMatchObject({ type: 'startWorkflow', workflowType: 'sweepWorkflow', taskQueue: world().taskQueue });
  // and the hourly anchor of the ledger's hash chain beside it
  const anchors = await waitFor(() => world().client.schedule.getHandle(anchorScheduleId(world().taskQueue)).describe().catch(() => undefined), 120_000, 'the anchor schedule');
  expect(anchors.action).toMatchObject({ type: 'startWorkflow', workflowType: 'ledgerAnchorWorkflow', taskQueue: world().taskQueue });

  // One waits at the merge gate; the other's impl agent sleeps as <tag>-42.
  const atGate = await startSampleIntent(world(), 'tg');
  const tag = `warden-termsweep-${process.pid}-${Date.now()}`;
  const command = answeringDesignStages(`if grep -q '^# Warden: impl'; then bash -c "exec -a ${tag}-\\$((40+2)) sleep 300" & wait; else echo done; fi`);
  const midImpl = await startSampleIntent(world(), 'ti', { agent: { kind: 'command', command } });
  await waitFor(async () => ((await atGate.handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
  await waitFor(() => (processesWith(`${tag}-42`).length > 0 ? true : undefined), 120_000, 'the impl agent to start');
  terminate(atGate.id, 'pulled from the Web UI');
  terminate(midImpl.id, 'pulled from the CLI');

  for (const { id, repo } of [atGate, midImpl]) {
    const [terminated] = await waitFor(async () => {
      const rows = await eventsOf(id, 'INTENT_TERMINATED');
      return rows.length > 0 ? rows : undefined;
    }, 300_000, `INTENT_TERMINATED of ${id}`);
    expect(terminated!.reason).toMatch(/^the intent's workflow was terminated from outside Warden \(terminated by .+: pulled from the (Web UI|CLI)\)/);
    await waitFor(async () => ((await eventsOf(id, 'INTENT_SWEPT')).length === 1 ? true : undefined), 120_000, `INTENT_SWEPT of ${id}`);
    expect(worktreesOf(id)).toEqual([]);
    expect(git(repo, 'worktree', 'list').split('\n')).toHaveLength(1);
    // From the server, and from the ledger alone (no server, or past its retention).
    for (const client of [world().client, undefined]) {
      const lines = renderIntentStatus(await intentStatus(client, world().ledger, id, client ? undefined : 'no server in this check'));
      expect(lines[0]).toMatch(new RegExp(`^${id}: terminated`));
      expect(lines.join('\n')).not.toContain('waiting at');
    }
  }
  expect(processesWith(`${tag}-42`)).toEqual([]);
  // warden list too: the workflow's last word was "waiting", but it was terminated.
  const listed = await listIntents(world().client, { limit: 1000 });
  expect(listed.find((row) => row.intentId === atGate.id)?.status).toBe('terminated');
  expect(await eventsOf(atGate.id, 'INTENT_TERMINATED')).toHaveLength(1); // once, however many sweeps ran
});

test('several workers installing the schedule at once agree: one creates it, the others keep it', async () => {
  const queue = `${world().taskQueue}-many`;
  try {
    const changes = await Promise.all([1, 2, 3, 4].map(() => keepSweepSchedule(world().client, queue)));
    expect(changes.filter((c) => c === 'created')).toHaveLength(1);
    expect(changes.filter((c) => c === 'kept')).toHaveLength(3);
    expect(await keepSweepSchedule(world().client, queue)).toBe('kept');
    // Changed by hand, it is put back; deleted, it is made again.
    const handle = world().client.schedule.getHandle(sweepScheduleId(queue));
    await handle.update((previous) => ({ ...previous, spec: { intervals: [{ every: '1h' }] } }));
    expect(await keepSweepSchedule(world().client, queue)).toBe('updated');
    await handle.delete();
    expect(await keepSweepSchedule(world().client, queue)).toBe('created');
  } finally {
    await world().client.schedule.getHandle(sweepScheduleId(queue)).delete().catch(() => undefined);
  }
});
