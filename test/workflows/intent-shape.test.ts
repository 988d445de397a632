import type { temporal } from '@temporalio/proto';
import { eventLabels } from '../../bench/core/intent-shape';
import { CARRIED_ROWS_FIELD } from '../../src/shared/carried-rows';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { startSampleIntent, useTestWorld, waitFor } from '../helpers/env';

/**
 * What one intent costs the server, as its history shows it: the checks Warden makes between
 * agent calls ride in the calls and activities that need them, so each step is one workflow task
 * fewer (docs/benchmarks.md); a stage's ledger rows ride ahead in the next activity, whose worker
 * writes them before it acts.
 */
const world = useTestWorld('intent-shape');

/** The event types of the ledger rows an ActivityTaskScheduled event's first argument carries. */
function carriedEvents(event: temporal.api.history.v1.IHistoryEvent): string[] {
  const payload = event.activityTaskScheduledEventAttributes?.input?.payloads?.[0];
  const input = JSON.parse(Buffer.from(payload!.data!).toString('utf8')) as Record<string, { rows?: Array<{ safetyEvent?: { eventType: string } }> } | undefined>;
  return (input[CARRIED_ROWS_FIELD]?.rows ?? []).flatMap((row) => (row.safetyEvent ? [row.safetyEvent.eventType] : []));
}

test("an intent runs no separate document or change checks, one inspection after each test run, and sends each agent call's rows ahead in the next activity", async () => {
  const { handle, id } = await startSampleIntent(world(), 'shape');
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');

  const labels = eventLabels((await handle.fetchHistory()).events ?? []);
  const scheduled = labels.filter((l) => l.startsWith('ActivityTaskScheduled(')).map((l) => l.slice('ActivityTaskScheduled('.length, -1));
  for (const gone of ['checkDocument', 'measureChange', 'checkImplementation', 'checkTestPlan']) expect(scheduled).not.toContain(gone);
  // Every test run is followed by one inspection of what it left, and nothing else before the next step.
  scheduled.forEach((type, i) => {
    if (type === 'runTests') expect(scheduled[i + 1]).toBe('inspectImplementation');
  });
  expect(scheduled.filter((t) => t === 'inspectImplementation')).toHaveLength(scheduled.filter((t) => t === 'runTests').length);

  // triage → lld → spec → impl: an agent call's rows, and the next stage's start, ride in the next
  // call itself, whose worker writes them before anything else: one workflow task between two
  // calls, and no ledger write of its own.
  const events = (await handle.fetchHistory()).events ?? [];
  const agentCalls = labels.flatMap((l, i) => (l === 'ActivityTaskScheduled(runAgentStage)' ? [i] : []));
  expect(agentCalls.length).toBeGreaterThanOrEqual(4);
  for (let k = 0; k < 3; k++) {
    const between = labels.slice(agentCalls[k]! + 1, agentCalls[k + 1]);
    expect(between.filter((l) => l === 'WorkflowTaskCompleted')).toHaveLength(1);
    expect(between.filter((l) => l.startsWith('LocalActivity('))).toEqual([]);
    expect(carriedEvents(events[agentCalls[k + 1]!]!)).toEqual(expect.arrayContaining(['STAGE_COMPLETED', 'STAGE_STARTED']));
  }
  // impl's rows do not wait for the next stage's start: its tests' run carries them.
  const tests = labels.indexOf('ActivityTaskScheduled(runTests)', agentCalls[3]);
  expect(carriedEvents(events[tests]!)).toContain('STAGE_COMPLETED');
  // In the ledger, each stage's completion comes before the next stage's start.
  const { rows } = await world().pool.query<{ type: string; stage: string }>(
    "SELECT event_type AS type, stage FROM safety_events WHERE intent_id = $1 AND event_type IN ('STAGE_STARTED', 'STAGE_COMPLETED') ORDER BY seq",
    [id],
  );
  expect(rows.slice(0, 7).map((r) => `${r.type} ${r.stage}`)).toEqual([
    'STAGE_STARTED triage',
    'STAGE_COMPLETED triage',
    'STAGE_STARTED lld',
    'STAGE_COMPLETED lld',
    'STAGE_STARTED spec',
    'STAGE_COMPLETED spec',
    'STAGE_STARTED impl',
  ]);
});

test("the merge gate's request is written by its review package's activity: no ledger write of its own, and on record once the package shows", async () => {
  const { handle, id } = await startSampleIntent(world(), 'gatereq');
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.package ? true : undefined), 120_000, "the merge gate's package");
  // A person who finds the package finds the request in the ledger, with the package's figures.
  const requested = await world().pool.query<{ metadata: Record<string, unknown> }>("SELECT metadata FROM safety_events WHERE intent_id = $1 AND event_type = 'GATE_REQUESTED' AND metadata->>'gate' = 'merge'", [id]);
  expect(requested.rows).toHaveLength(1);
  expect(requested.rows[0]!.metadata).toMatchObject({ gate: 'merge', actual: { files: expect.any(Number), lines: expect.any(Number) }, predicted: expect.any(Object) });
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');

  const labels = eventLabels((await handle.fetchHistory()).events ?? []);
  expect(labels).not.toContain('ActivityTaskScheduled(appendToLedger)');
  const opened = labels.indexOf('ActivityTaskScheduled(buildReviewPackage)');
  expect(opened).toBeGreaterThan(-1);
  // After the package, the gate waits for the decision: nothing else is scheduled before the signal.
  const signalled = labels.indexOf('WorkflowExecutionSignaled(decide)');
  expect(labels.slice(opened + 1, signalled).filter((l) => l.startsWith('ActivityTaskScheduled(') || l.startsWith('LocalActivity('))).toEqual([]);
});

test("an intent's ending rows go with its ladder run: one local activity after the cleanup, and the ending is in the ledger", async () => {
  const { handle, id } = await startSampleIntent(world(), 'ending');
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');

  const labels = eventLabels((await handle.fetchHistory()).events ?? []);
  expect(labels.slice(labels.indexOf('LocalActivity(cleanupIntent)') + 1)).toEqual(['LocalActivity(recordLadderRun)', 'WorkflowExecutionCompleted']);
  const ended = await world().pool.query("SELECT count(*)::int AS n FROM safety_events WHERE intent_id = $1 AND event_type = 'INTENT_MERGED'", [id]);
  expect(ended.rows[0]).toEqual({ n: 1 });
});
