import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startIntent } from '../../src/client/intents';
import { changeReaderFor } from '../../src/client/web/change-reader';
import { hostQueueFor, workflowIdForIntent, workBranchFor } from '../../src/shared/ids';
import { decideUpdate, stateQuery } from '../../src/shared/messages';
import type { WardenWorker } from '../../src/workers/host-worker';
import { createTestWorld, demoScript, git, makeSampleRepo, waitFor, worktreeFoldersLeft, type TestWorld } from '../helpers/env';

/**
 * Several worker hosts, no shared disk (config `placement`): every host works from its own clone
 * of the repository's remote, an intent's stages run on the host that made its worktree, and
 * when that host is gone for `moveAfter` another host takes the intent over from the commits the
 * last step pushed.
 */

let world: TestWorld;
beforeAll(async () => {
  world = await createTestWorld('host-move');
});
afterAll(async () => {
  await world.close();
});

/** A remote (a bare repository) with the sample's history, and a checkout of it where `warden run` would be. */
function sampleRemote(): { remote: string; checkout: string } {
  const sample = makeSampleRepo();
  const dir = mkdtempSync(path.join(tmpdir(), 'warden-remote-'));
  const remote = path.join(dir, 'origin.git');
  git(dir, 'clone', '-q', '--bare', sample, remote);
  const checkout = path.join(dir, 'checkout');
  git(dir, 'clone', '-q', remote, checkout);
  return { remote, checkout };
}

async function hostWorker(name: string): Promise<{ worker: WardenWorker; running: Promise<void>; dir: string }> {
  const dir = mkdtempSync(path.join(tmpdir(), `warden-${name}-`));
  const worker = await world.worker({ host: { name, dir } });
  return { worker, running: worker.run(), dir };
}

test('an intent whose host is gone moves to another host and merges there, from the commits it pushed', async () => {
  const { remote, checkout } = sampleRemote();
  const checkoutMain = git(checkout, 'rev-parse', 'main');
  const id = `move-${Date.now()}`;
  const a = await hostWorker('host-a');
  const handle = await startIntent(
    world.client,
    {
      id,
      goal: 'Add slugify',
      repoPath: checkout,
      paths: ['lib/**'],
      agent: { kind: 'scripted', scriptPath: demoScript() },
      limits: { cooldown: '0s' },
      placement: { remote: 'origin', remoteUrl: remote, moveAfter: '3s' },
    },
    world.taskQueue,
  );
  const waiting = await waitFor(async () => {
    const state = await handle.query(stateQuery);
    return state.pendingGate?.gate === 'merge' ? state : undefined;
  }, 180_000, 'the merge gate on host-a');
  expect(waiting.host).toBe('host-a');
  // Every step's commits are on the remote: the work branch is where the intent stands.
  const pushed = git(remote, 'rev-parse', `refs/heads/${workBranchFor(id)}`);
  const [cloneA] = readdirSync(path.join(a.dir, 'clones'));
  expect(git(path.join(a.dir, 'clones', cloneA!), 'rev-parse', `refs/heads/warden/${id}`)).toBe(pushed);

  // A web app on another machine reads the change from the pushed work branch: the same diff and documents.
  const elsewhere = { ...waiting, worktreePath: path.join(tmpdir(), 'not-on-this-machine') };
  const pushedChange = await changeReaderFor(elsewhere, mkdtempSync(path.join(tmpdir(), 'warden-serve-')));
  const localChange = await changeReaderFor(waiting, mkdtempSync(path.join(tmpdir(), 'warden-serve-')));
  expect(waiting.pushedWork).toEqual({ remoteUrl: remote, branch: workBranchFor(id) });
  const pushedDiff = await pushedChange!.diff('main');
  expect(pushedDiff).toContain('slugify');
  expect(pushedDiff).toBe(await localChange!.diff('main'));
  const lld = Object.entries(waiting.artifacts).find(([name]) => name.includes('lld'))![1];
  expect(await pushedChange!.read(lld)).toBe(readFileSync(path.join(waiting.worktreePath!, lld), 'utf8'));

  // host-a goes, with its disk; host-b comes.
  a.worker.shutdown();
  await a.running;
  const b = await hostWorker('host-b');
  try {
    await handle.executeUpdate(decideUpdate, { args: [{ gate: 'merge', decision: 'approve', by: 'ana' }] });
    const outcome = await handle.result();
    expect(outcome.status).toBe('merged');

    // The merge is on the remote's main; the checkout `warden run` was given was never touched.
    expect(git(remote, 'rev-parse', 'main')).toBe(outcome.mergedCommit);
    expect(git(remote, 'show', 'main:lib/strings.js')).toContain('slugify');
    expect(git(checkout, 'rev-parse', 'main')).toBe(checkoutMain);
    // Nothing of the intent is left on the remote or on host-b; host-a's copy stays on its own disk.
    expect(git(remote, 'branch', '--list', workBranchFor(id))).toBe('');
    expect(worktreeFoldersLeft(path.join(b.dir, 'worktrees'))).toEqual([]);
    expect(worktreeFoldersLeft(path.join(a.dir, 'worktrees'))).toEqual([id]);

    const { rows } = await world.pool.query<{ metadata: { from: string; to: string; head: string; step: string } }>(
      "SELECT metadata FROM safety_events WHERE intent_id = $1 AND event_type = 'INTENT_MOVED'",
      [id],
    );
    expect(rows.map((r) => r.metadata)).toEqual([expect.objectContaining({ from: 'host-a', to: 'host-b', head: pushed, step: 'git' })]);

    // Which host ran what: the history says where each activity was sent.
    const history = await world.client.workflow.getHandle(workflowIdForIntent(id)).fetchHistory();
    const sentTo = (history.events ?? [])
      .filter((e) => e.activityTaskScheduledEventAttributes)
      .map((e) => [e.activityTaskScheduledEventAttributes!.activityType!.name!, e.activityTaskScheduledEventAttributes!.taskQueue!.name!] as const);
    const queues = (name: string) => sentTo.filter(([type]) => type === name).map(([, queue]) => queue);
    expect(queues('runAgentStage').every((q) => q === hostQueueFor(world.taskQueue, 'host-a'))).toBe(true);
    // rebaseOntoBase waited on host-a in vain, then ran on host-b; the merge ran on host-b.
    expect(queues('rebaseOntoBase')).toEqual([hostQueueFor(world.taskQueue, 'host-a'), hostQueueFor(world.taskQueue, 'host-b')]);
    expect(queues('mergeIntent')).toEqual([hostQueueFor(world.taskQueue, 'host-b')]);
    expect(queues('prepareWorktree')).toEqual([world.taskQueue, world.taskQueue]);
    expect(existsSync(path.join(b.dir, 'clones'))).toBe(true);
  } finally {
    b.worker.shutdown();
    await b.running;
  }
});
