import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { Worker } from '@temporalio/worker';
import { startIntent } from '../../src/client/intents';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { DEMO_SCRIPT, makeSampleRepo, waitFor, useTestWorld } from '../helpers/env';

/**
 * Determinism guard. Histories recorded from earlier versions of the workflow live under
 * test/fixtures/histories; replaying them against today's code fails on any change that would
 * break running intents. Set WARDEN_RECORD_HISTORY=1 to (re)record the fixture from a fresh run.
 */
const FIXTURE = path.resolve(__dirname, '../fixtures/histories/intent-merged.json');

const world = useTestWorld('replay');

test('a fresh history of a merged intent replays without non-determinism', async () => {
  const repo = makeSampleRepo();
  const id = `replay-${Date.now()}`;
  const handle = await startIntent(
    world().client,
    { id, goal: 'slugify', repoPath: repo, paths: ['lib/**'], agent: { kind: 'scripted', scriptPath: DEMO_SCRIPT }, limits: { cooldown: '0s' } },
    world().taskQueue,
  );
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate ? true : undefined), 60_000, 'the merge gate');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'maybe', by: 'tester' }); // ignored, but in history
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  await handle.result();
  const history = await handle.fetchHistory();
  if (process.env.WARDEN_RECORD_HISTORY === '1') {
    // The CLI writes the proto JSON form that historyFromJSON reads back.
    const json = execFileSync(process.env.WARDEN_TEST_CLI_PATH!, ['workflow', 'show', '-w', handle.workflowId, '--output', 'json', '--address', process.env.TEMPORAL_ADDRESS!], { encoding: 'utf8' });
    writeFileSync(FIXTURE, json);
  }
  await Worker.runReplayHistory({ workflowBundle: world().bundle }, history, handle.workflowId);
});

test('the recorded history of an earlier version replays against today\'s workflow code', async () => {
  expect(existsSync(FIXTURE)).toBe(true);
  // runReplayHistory parses the proto JSON itself
  const history: unknown = JSON.parse(readFileSync(FIXTURE, 'utf8'));
  await Worker.runReplayHistory({ workflowBundle: world().bundle }, history, 'intent-recorded');
});
