import { eventLabels } from '../../bench/core/intent-shape';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { startSampleIntent, useTestWorld, waitFor } from '../helpers/env';

/**
 * What one intent costs the server, as its history shows it: the checks Warden makes between
 * agent calls ride in the calls and activities that need them, so each step is one workflow task
 * fewer (docs/benchmarks.md); a stage's ledger rows are still written as soon as the call returns.
 */
const world = useTestWorld('intent-shape');

test("an intent runs no separate document or change checks, one inspection after each test run, and writes each design stage's rows before anything else", async () => {
  const { handle } = await startSampleIntent(world(), 'shape');
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

  // triage → lld → spec → impl: after each agent call, its rows are written first, before the
  // workflow does anything else (so the ledger never shows less than the workflow), then the
  // next call's own write.
  const agentCalls = labels.flatMap((l, i) => (l === 'ActivityTaskScheduled(runAgentStage)' ? [i] : []));
  expect(agentCalls.length).toBeGreaterThanOrEqual(4);
  for (let k = 0; k < 3; k++) {
    const between = labels.slice(agentCalls[k]! + 1, agentCalls[k + 1]);
    const commands = between.slice(between.indexOf('WorkflowTaskCompleted') + 1);
    expect(commands[0]).toBe('LocalActivity(appendToLedger)');
    expect(between.filter((l) => l === 'LocalActivity(appendToLedger)')).toHaveLength(2);
  }
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
