import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { Worker } from '@temporalio/worker';
import { startIntent } from '../../src/client/intents';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { DEMO_SCRIPT, makeSampleRepo, waitFor, useTestWorld } from '../helpers/env';

/**
 * Determinism guard. Histories recorded from earlier versions of the workflow live under
 * test/fixtures/histories, one per version worth keeping (e.g. intent-merged.json from before
 * the local-bookkeeping patch); replaying them against today's code fails on any change that
 * would break running intents. WARDEN_RECORD_HISTORY=<name> records a fresh run as <name>.json.
 */
const FIXTURES = path.resolve(__dirname, '../fixtures/histories');

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
  const record = process.env.WARDEN_RECORD_HISTORY;
  if (record) {
    // The CLI writes the proto JSON form that historyFromJSON reads back.
    const json = execFileSync(process.env.WARDEN_TEST_CLI_PATH!, ['workflow', 'show', '-w', handle.workflowId, '--output', 'json', '--address', process.env.TEMPORAL_ADDRESS!], { encoding: 'utf8' });
    writeFileSync(path.join(FIXTURES, `${path.basename(record)}.json`), json);
  }
  await Worker.runReplayHistory({ workflowBundle: world().bundle }, history, handle.workflowId);
});

const fixtures = readdirSync(FIXTURES).filter((file) => file.endsWith('.json'));

test('there are recorded histories to replay, from before and after the local-bookkeeping patch', () => {
  expect(fixtures).toEqual(expect.arrayContaining(['intent-merged.json', 'intent-merged-local-bookkeeping.json']));
});

test.each(fixtures)("the recorded history %s replays against today's workflow code", async (file) => {
  // runReplayHistory parses the proto JSON itself
  const history: unknown = JSON.parse(readFileSync(path.join(FIXTURES, file), 'utf8'));
  await Worker.runReplayHistory({ workflowBundle: world().bundle }, history, 'intent-recorded');
});
