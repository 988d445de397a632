import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { Worker } from '@temporalio/worker';
import { startIntent } from '../../src/client/intents';
import { workflowIdForIntent } from '../../src/shared/ids';
import { IntentSchema } from '../../src/shared/intent';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { INTENT_CHECK_PATCH, PATCHES_AT_START_PATCH, intentFromEarlierClient } from '../../src/workflows/intent-workflow';
import { DEMO_SCRIPT, makeSampleRepo, waitFor, useTestWorld } from '../helpers/env';

/**
 * Determinism guard. Histories recorded from earlier versions of the workflow live under
 * test/fixtures/histories, one per version worth keeping (e.g. intent-merged.json from before
 * the local-bookkeeping patch); replaying them against today's code fails on any change that
 * would break running intents. WARDEN_RECORD_HISTORY=<name> records the fresh merged run as <name>.json,
 * and the rejected and cancelled ones as <name>-rejected.json and <name>-cancelled.json.
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
  recordFixture(handle.workflowId, '');
  await Worker.runReplayHistory({ workflowBundle: world().bundle }, history, handle.workflowId);
});

/** Writes a finished run's history as the fixture <WARDEN_RECORD_HISTORY><suffix>.json, when recording. */
function recordFixture(workflowId: string, suffix: string): void {
  const record = process.env.WARDEN_RECORD_HISTORY;
  if (!record) return;
  // The CLI writes the proto JSON form that historyFromJSON reads back.
  const json = execFileSync(process.env.WARDEN_TEST_CLI_PATH!, ['workflow', 'show', '-w', workflowId, '--output', 'json', '--address', process.env.TEMPORAL_ADDRESS!], { encoding: 'utf8' });
  writeFileSync(path.join(FIXTURES, `${path.basename(record)}${suffix}.json`), json);
}

// The paths that end without a merge: a rejection, and a stop while the gate waits.
test.each(['rejected', 'cancelled'] as const)('a fresh history of a %s intent replays without non-determinism', async (ending) => {
  const repo = makeSampleRepo();
  const handle = await startIntent(
    world().client,
    { id: `replay-${ending}-${Date.now()}`, goal: 'slugify', repoPath: repo, paths: ['lib/**'], agent: { kind: 'scripted', scriptPath: DEMO_SCRIPT }, limits: { cooldown: '0s' } },
    world().taskQueue,
  );
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate ? true : undefined), 60_000, 'the merge gate');
  if (ending === 'rejected') await handle.signal(decideSignal, { gate: 'merge', decision: 'reject', by: 'tester', reason: 'not now' });
  else await handle.cancel();
  await handle.result().catch(() => undefined);
  expect((await handle.describe()).status.name).toBe(ending === 'rejected' ? 'COMPLETED' : 'CANCELLED');
  recordFixture(handle.workflowId, `-${ending}`);
  await Worker.runReplayHistory({ workflowBundle: world().bundle }, await handle.fetchHistory(), handle.workflowId);
});

const fixtures = readdirSync(FIXTURES).filter((file) => file.endsWith('.json'));

test('there are recorded histories to replay, from before and after each patch', () => {
  expect(fixtures).toEqual(
    expect.arrayContaining([
      'intent-merged.json',
      'intent-merged-local-bookkeeping.json',
      'intent-merged-intent-check.json',
      'intent-merged-split-first-task.json',
      'intent-rejected.json',
      'intent-cancelled.json',
      // paused during an impl cooldown and at the merge gate, approved while paused: merged
      'intent-merged-paused-before-hold-patch.json',
    ]),
  );
});

/** The workflow input of a recorded history, and whether its run checked it with the local activity. */
type Payloads = { payloads: Array<{ data: string }> };
const decode = (payloads: Payloads): unknown => JSON.parse(Buffer.from(payloads.payloads[0]!.data, 'base64').toString('utf8'));

function recordedInput(file: string): { input: unknown; checkedByActivity: boolean } {
  const history = JSON.parse(readFileSync(path.join(FIXTURES, file), 'utf8')) as { events: Array<{ workflowExecutionStartedEventAttributes?: { input: Payloads } }> };
  return { input: decode(history.events[0]!.workflowExecutionStartedEventAttributes!.input), checkedByActivity: recordedPatches(file).includes(INTENT_CHECK_PATCH) };
}

/** The patch ids a recorded history's markers name, in order. */
function recordedPatches(file: string): string[] {
  const history = JSON.parse(readFileSync(path.join(FIXTURES, file), 'utf8')) as {
    events: Array<{ markerRecordedEventAttributes?: { markerName: string; details: Record<string, Payloads> } }>;
  };
  return history.events
    .map((event) => event.markerRecordedEventAttributes)
    .filter((marker) => marker?.markerName === 'core_patch')
    .map((marker) => (decode(marker!.details['patch-data']!) as { id: string }).id);
}

test('the intent-check patch is found in the histories recorded after it, and only there', () => {
  expect(fixtures.filter((file) => recordedInput(file).checkedByActivity).sort()).toEqual([
    'intent-cancelled.json',
    'intent-merged-intent-check.json',
    'intent-merged-paused-before-hold-patch.json',
    'intent-merged-split-first-task.json',
    'intent-rejected.json',
  ]);
});

test('one recorded history ran the code after the intent check in the next workflow task', () => {
  // What PATCHES_AT_START_PATCH is for: this run's check resolved in its first workflow task, but
  // the workflow went on in the second. Its replay (below) resolves the check within the first.
  type Event = { eventType: string; markerRecordedEventAttributes?: { markerName: string } };
  const { events } = JSON.parse(readFileSync(path.join(FIXTURES, 'intent-merged-split-first-task.json'), 'utf8')) as { events: Event[] };
  const check = events.findIndex((event) => event.markerRecordedEventAttributes?.markerName === 'core_local_activity');
  expect(events.slice(0, check).filter((event) => event.eventType === 'EVENT_TYPE_WORKFLOW_TASK_COMPLETED')).toHaveLength(1);
  expect(events[check + 1]?.eventType).toBe('EVENT_TYPE_WORKFLOW_TASK_SCHEDULED');
  expect(recordedPatches('intent-merged-split-first-task.json')).toEqual([PATCHES_AT_START_PATCH, INTENT_CHECK_PATCH]);
});

test.each(fixtures)('%s: the intent the workflow replays with is the one the schema gives', (file) => {
  const { input, checkedByActivity } = recordedInput(file);
  // Later histories record the checked intent itself (the local activity's result).
  if (checkedByActivity) return;
  expect(intentFromEarlierClient(input as Parameters<typeof intentFromEarlierClient>[0])).toEqual(IntentSchema.parse(input));
});

test.each(fixtures)("the recorded history %s replays against today's workflow code", async (file) => {
  // runReplayHistory parses the proto JSON itself
  const history: unknown = JSON.parse(readFileSync(path.join(FIXTURES, file), 'utf8'));
  // replayed under the id it ran with, which the workflow checks against its intent
  const { id } = recordedInput(file).input as { id: string };
  await Worker.runReplayHistory({ workflowBundle: world().bundle }, history, workflowIdForIntent(id));
});
