import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { historyFromJSON, historyToJSON } from '@temporalio/common/lib/proto-utils';
import { bundleWorkflowCode, DefaultLogger, Worker, type ReplayResult } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { intentHandle, startIntent } from '../../src/client/intents';
import { resumeIntent } from '../../src/client/resume';
import type { IntentInput } from '../../src/shared/intent';
import { workflowIdForIntent } from '../../src/shared/ids';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { maintenanceWorkflow, notificationWorkflow } from '../../src/workflows';
import { startReceiver } from '../helpers/webhook-receiver';
import { demoStages, makeSampleRepo, waitFor, writeScript, useTestWorld } from '../helpers/env';

/**
 * The replay net. Recorded histories of each kind of workflow run live under
 * test/fixtures/histories, and every one of them must replay against today's workflow code: a
 * change that would break a running workflow fails here. Each run below is also replayed as soon
 * as it has finished. To record the set again from today's code (after a change that breaks
 * replay and ships under a new worker deployment version):
 *
 *   WARDEN_RECORD_HISTORY=1 npx jest test/workflows/replay.test.ts --maxWorkers=1
 *
 * writes each finished run below as test/fixtures/histories/<kind>.json, then checks and replays
 * the set it wrote. Commit the new files together with the change.
 */
const FIXTURES = path.resolve(__dirname, '../fixtures/histories');
const RECORDING = Boolean(process.env.WARDEN_RECORD_HISTORY);

const world = useTestWorld('replay');

// ---------------------------------------------------------------------------------------------
// Recorded histories, as the proto JSON that historyFromJSON reads back.

interface Payloads {
  payloads?: Array<{ data?: string }>;
}

interface RecordedEvent {
  eventType: string;
  workflowExecutionStartedEventAttributes?: { workflowType: { name: string }; input?: Payloads };
  workflowExecutionCompletedEventAttributes?: { result?: Payloads };
  workflowExecutionSignaledEventAttributes?: { signalName: string; input?: Payloads };
  workflowTaskFailedEventAttributes?: { cause?: string };
  activityTaskScheduledEventAttributes?: { activityType?: { name: string }; input?: Payloads };
  markerRecordedEventAttributes?: { markerName: string };
}

interface Fixture {
  readonly file: string;
  readonly json: unknown;
  readonly events: readonly RecordedEvent[];
  readonly workflowType: string;
  /** The id it ran under: the intent workflow checks it against its intent's id. */
  readonly workflowId: string;
}

const decode = (payloads: Payloads | undefined): unknown => {
  const data = payloads?.payloads?.[0]?.data;
  return data === undefined ? undefined : JSON.parse(Buffer.from(data, 'base64').toString('utf8'));
};

function loadFixture(file: string): Fixture {
  const json = JSON.parse(readFileSync(path.join(FIXTURES, file), 'utf8')) as { events: RecordedEvent[] };
  const started = json.events[0]!.workflowExecutionStartedEventAttributes!;
  const workflowType = started.workflowType.name;
  const input = decode(started.input) as { id?: string };
  const workflowId = workflowType === 'intentWorkflow' ? workflowIdForIntent(input.id!) : `replay-${path.basename(file, '.json')}`;
  return { file, json, events: json.events, workflowType, workflowId };
}

/** Every recorded history, read once the fresh runs below have finished. */
let fixtures: Fixture[] = [];

/** The workflow's result, when it completed. */
const resultOf = (fixture: Fixture): Record<string, unknown> | undefined =>
  decode(fixture.events.find((e) => e.workflowExecutionCompletedEventAttributes)?.workflowExecutionCompletedEventAttributes?.result) as Record<string, unknown> | undefined;
const has = (fixture: Fixture, eventType: string): boolean => fixture.events.some((e) => e.eventType === `EVENT_TYPE_${eventType}`);
const intents = (): Fixture[] => fixtures.filter((f) => f.workflowType === 'intentWorkflow');

/** Replays every history, and returns the failures by file (an empty list when every one replays). */
async function replayAll(options: { workflowBundle: { readonly code: string } }, histories: readonly Fixture[]): Promise<Array<{ file: string; error: Error }>> {
  const results: ReplayResult[] = [];
  const inputs = histories.map((f) => ({ workflowId: f.workflowId, history: historyFromJSON(f.json) }));
  for await (const result of Worker.runReplayHistories(options, inputs)) results.push(result);
  expect(results).toHaveLength(histories.length);
  return results.filter((r) => r.error).map((r) => ({ file: histories.find((f) => f.workflowId === r.workflowId)!.file, error: r.error! }));
}

// ---------------------------------------------------------------------------------------------
// Fresh runs: each is replayed as soon as it has finished, and recorded when asked.

/** Replays a finished run against today's code, and writes it as <kind>.json when recording. */
async function replayAndRecord(handle: WorkflowHandle, kind: string): Promise<void> {
  const history = await handle.fetchHistory();
  await Worker.runReplayHistory({ workflowBundle: world().bundle }, history, handle.workflowId);
  if (RECORDING) writeFileSync(path.join(FIXTURES, `${kind}.json`), `${historyToJSON(history)}\n`);
}

function intentInput(kind: string, overrides: Partial<IntentInput> = {}): IntentInput {
  return {
    id: `replay-${kind}-${Date.now()}`,
    goal: 'Add slugify',
    repoPath: makeSampleRepo(),
    paths: ['lib/**'],
    agent: { kind: 'scripted', scriptPath: writeScript({ stages: demoStages() }) },
    limits: { cooldown: '0s' },
    ...overrides,
  };
}

async function atGate(handle: WorkflowHandle, gate: string): Promise<void> {
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === gate ? true : undefined), 120_000, `the ${gate} gate`);
}

test('a merged intent, its design reviewed and a refused decide signal on the way, replays', async () => {
  const designReview = { lld: [{ output: 'APPROVE\n```json\n{"verdict": "APPROVE", "findings": []}\n```\n' }], spec: [{ output: 'REQUEST_CHANGES\n```json\n{"verdict": "REQUEST_CHANGES", "findings": []}\n```\n' }] };
  const agent = { kind: 'scripted' as const, scriptPath: writeScript({ stages: demoStages(), designReview }) };
  const handle = await startIntent(world().client, intentInput('merged', { agent, reviewPolicy: { design: true } }), world().taskQueue);
  await atGate(handle, 'merge');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'maybe', by: 'tester' }); // refused, but in the history
  await waitFor(async () => ((await handle.query(stateQuery)).rejectedSignals === 1 ? true : undefined), 120_000, 'the refusal');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');
  await replayAndRecord(handle, 'intent-merged');
});

test('an intent whose merge gate timed out (timeout policy: reject) replays', async () => {
  const handle = await startIntent(world().client, intentInput('gate-timeout', { gates: { merge: { timeout: '2s', onTimeout: 'reject' } } }), world().taskQueue);
  const outcome = await handle.result();
  expect(outcome).toMatchObject({ status: 'rejected', reason: 'no decision within 2s' });
  await replayAndRecord(handle, 'intent-gate-timed-out');
});

test('an intent a person rejected at the merge gate replays', async () => {
  const handle = await startIntent(world().client, intentInput('rejected'), world().taskQueue);
  await atGate(handle, 'merge');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'reject', by: 'tester', reason: 'not now' });
  expect(await handle.result()).toMatchObject({ status: 'rejected', reason: 'not now' });
  await replayAndRecord(handle, 'intent-rejected');
});

test('an intent stopped while it waited at the merge gate replays', async () => {
  const handle = await startIntent(world().client, intentInput('cancelled'), world().taskQueue);
  await atGate(handle, 'merge');
  await handle.cancel();
  await expect(handle.result()).rejects.toThrow();
  expect((await handle.describe()).status.name).toBe('CANCELLED');
  await replayAndRecord(handle, 'intent-cancelled');
});

test('an intent rewound to impl by resume, then merged, replays', async () => {
  const stages = demoStages();
  const [badImpl, goodImpl] = stages.impl!;
  const scriptPath = writeScript({ stages: { ...stages, impl: [badImpl!] } });
  const input = intentInput('rewound', { agent: { kind: 'scripted', scriptPath } });
  const first = await startIntent(world().client, input, world().taskQueue);
  await expect(first.result()).rejects.toThrow(); // the two-strike rule stops it
  writeFileSync(scriptPath, JSON.stringify({ stages: { ...stages, impl: [goodImpl!] } }));
  expect((await resumeIntent(world().client, 'default', input.id, { stage: 'impl', reason: 'agent fixed', reapplySignals: false, force: false, by: 'tester', ledger: world().ledger })).stage).toBe('impl');
  const handle = intentHandle(world().client, input.id);
  await atGate(handle, 'merge');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');
  await replayAndRecord(handle, 'intent-rewound');
});

test('a maintenance run replays', async () => {
  const workflowId = `replay-maintenance-${Date.now()}`;
  const result = await world().client.workflow.execute(maintenanceWorkflow, { taskQueue: world().taskQueue, workflowId, args: [{ retentionDays: 90, dayBudgetUsd: '20' }] });
  expect(result.reportPath).toMatch(/\.md$/);
  await replayAndRecord(world().client.workflow.getHandle(workflowId), 'maintenance');
});

test('a notification run, one channel told and one a dead letter, replays', async () => {
  const receiver = await startReceiver({ '/refuses': 404 });
  try {
    const workflowId = `replay-notification-${Date.now()}`;
    const event = { id: '22222222-2222-8222-8222-222222222222', timestamp: new Date().toISOString(), eventType: 'INTENT_MERGED', severity: 'info' as const, intentId: 'replayed', reason: 'merged', metadata: {} };
    const deliveries = ['/ok', '/refuses'].map((p, i) => ({ deliveryId: `d-${i}`, kind: 'intent.merged' as const, channel: { kind: 'webhook' as const, url: receiver.url(p) }, event }));
    const result = await world().client.workflow.execute(notificationWorkflow, { taskQueue: world().taskQueue, workflowId, args: [{ deliveries, attempts: 2, firstRetryMs: 100 }] });
    expect(result).toEqual({ delivered: 1, undelivered: 1 });
    await replayAndRecord(world().client.workflow.getHandle(workflowId), 'notification');
  } finally {
    await receiver.close();
  }
});

// After the fresh runs, so that a recording run replays and checks the set it has just written.
describe('the recorded histories', () => {
  beforeAll(() => {
    fixtures = readdirSync(FIXTURES)
      .filter((file) => file.endsWith('.json'))
      .sort()
      .map(loadFixture);
  });

  test('cover every kind of run: a merge (its design reviewed), a gate timeout, a rejection, a kill, a rewind, the maintenance and the notification workflows', () => {
    // a merge, with an invalid decide signal that the workflow refused on the way
    const merged = intents().filter((f) => resultOf(f)?.status === 'merged');
    expect(merged.some((f) => f.events.some((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'decide' && (decode(e.workflowExecutionSignaledEventAttributes.input) as { decision?: string }).decision === 'maybe'))).toBe(true);
    // the design reviewed by another agent call before its gates
    const designReviewed = (f: Fixture) => f.events.some((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runAgentStage' && (decode(e.activityTaskScheduledEventAttributes.input) as { designReview?: boolean } | undefined)?.designReview === true);
    expect(merged.some(designReviewed)).toBe(true);
    // a gate that ended by its timeout policy: its timer fired and no one decided
    const timedOut = intents().filter((f) => has(f, 'TIMER_FIRED') && resultOf(f)?.status === 'rejected' && /^no decision within /.test(String(resultOf(f)?.reason)));
    expect(timedOut.length).toBeGreaterThan(0);
    expect(timedOut.every((f) => !f.events.some((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'decide'))).toBe(true);
    // a rejection by a person
    expect(intents().some((f) => resultOf(f)?.status === 'rejected' && resultOf(f)?.reason === 'not now')).toBe(true);
    // a kill: cancelled while it waited (warden stop)
    expect(intents().some((f) => has(f, 'WORKFLOW_EXECUTION_CANCEL_REQUESTED') && has(f, 'WORKFLOW_EXECUTION_CANCELED'))).toBe(true);
    // a rewind: reset to an earlier stage (warden resume), then finished
    const rewound = intents().filter((f) => f.events.some((e) => e.workflowTaskFailedEventAttributes?.cause === 'WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW'));
    expect(rewound.map((f) => resultOf(f)?.status)).toContain('merged');
    // the daily upkeep
    expect(fixtures.filter((f) => f.workflowType === 'maintenanceWorkflow' && has(f, 'WORKFLOW_EXECUTION_COMPLETED'))).not.toHaveLength(0);
    // a notification: one delivery told, one a dead letter
    expect(fixtures.filter((f) => f.workflowType === 'notificationWorkflow' && resultOf(f)?.undelivered === 1)).not.toHaveLength(0);
  });

  // Warden's workflow code has no patched() branch today; the first patch (see
  // docs/versioning.md) names here the markers it allows, with its removal plan.
  test('carry no patch marker: the code they replay against has no patched() branch', () => {
    expect(fixtures.length).toBeGreaterThanOrEqual(6);
    for (const fixture of fixtures) {
      expect({ file: fixture.file, markers: fixture.events.filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch').length }).toEqual({ file: fixture.file, markers: 0 });
    }
  });

  test("replay against today's workflow code", async () => {
    expect(await replayAll({ workflowBundle: world().bundle }, fixtures)).toEqual([]);
  });

  test('fail to replay against altered workflow code, with a determinism error for each', async () => {
    const altered = await bundleWorkflowCode({ workflowsPath: path.join(FIXTURES, 'altered-workflows.ts'), logger: new DefaultLogger('WARN') });
    const failures = await replayAll({ workflowBundle: altered }, fixtures);
    expect(failures.map((f) => f.file)).toEqual(fixtures.map((f) => f.file));
    for (const { error } of failures) expect(error).toBeInstanceOf(DeterminismViolationError);
  });
});
