import type { WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { eventLabels } from '../../bench/core/intent-shape';
import type { LedgerBatch } from '../../src/activities';
import { LEDGER_ROWS_HEADER } from '../../src/shared/ledger-handover';
import { decideSignal, pauseSignal, resumeSignal, stateQuery } from '../../src/shared/messages';
import type { IntentState } from '../../src/shared/state';
import { startSampleIntent, useTestWorld, waitFor } from '../helpers/env';
import { untilIdle } from '../helpers/workflow-idle';

/**
 * A gate's decision is written before the next stage acts on it, without a write of its own in
 * the decision's workflow task: the merge stage's first activity carries the rows and its worker
 * writes them before anything else the attempt does. Where the next step may wait (a pause), they
 * are written at once.
 */
const world = useTestWorld('gate-handover');

async function until(handle: WorkflowHandle, ok: (s: IntentState) => boolean, what: string): Promise<IntentState> {
  return waitFor(
    async () => {
      const state = await handle.query(stateQuery);
      return ok(state) ? state : undefined;
    },
    120_000,
    what,
  );
}

test("the merge gate's approval rides on the merge stage's first activity, written before it starts", async () => {
  const { handle, id } = await startSampleIntent(world(), 'ho');
  await until(handle, (s) => s.pendingGate?.gate === 'merge' && s.pendingGate.package !== undefined, 'the merge gate');
  // A person who finds the gate's package finds its request in the ledger too.
  const requested = await world().pool.query("SELECT count(*)::int AS n FROM safety_events WHERE intent_id = $1 AND event_type = 'GATE_REQUESTED' AND metadata->>'gate' = 'merge'", [id]);
  expect(requested.rows[0]).toEqual({ n: 1 });
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');

  const events = (await handle.fetchHistory()).events ?? [];
  const labels = eventLabels(events);
  const signalled = labels.indexOf('WorkflowExecutionSignaled(decide)');
  const rebase = labels.indexOf('ActivityTaskScheduled(rebaseOntoBase)');
  expect(signalled).toBeGreaterThan(0);
  expect(rebase).toBeGreaterThan(signalled);
  // No write of its own between the decision and the merge stage's first activity.
  expect(labels.slice(signalled, rebase)).not.toContain('LocalActivity(appendToLedger)');
  expect(labels.slice(signalled, rebase)).not.toContain('ActivityTaskScheduled(appendToLedger)');

  const header = events[rebase]!.activityTaskScheduledEventAttributes!.header?.fields?.[LEDGER_ROWS_HEADER];
  expect(header).toBeDefined();
  const { rows } = defaultPayloadConverter.fromPayload<LedgerBatch>(header!);
  const decision = rows.flatMap((r) => ('gateDecision' in r ? [r.gateDecision] : []));
  expect(decision).toEqual([expect.objectContaining({ gate: 'merge', decision: 'approve', by: 'tester' })]);
  expect(rows.map((r) => ('safetyEvent' in r ? r.safetyEvent.eventType : 'gateDecision'))).toEqual(expect.arrayContaining(['gateDecision', 'GATE_DECIDED']));

  // Written once, and before the attempt reached the safety layers (which note when it started).
  const written = await world().pool.query('SELECT id, recorded_at FROM gate_decisions WHERE intent_id = $1', [id]);
  expect(written.rows.map((r: { id: string }) => r.id)).toEqual([decision[0]!.id]);
  const attempts = await world().pool.query("SELECT started_at FROM activity_runs WHERE intent_id = $1 AND activity_type = 'rebaseOntoBase'", [id]);
  expect(attempts.rows).toHaveLength(1);
  expect((attempts.rows[0] as { started_at: Date }).started_at.getTime()).toBeGreaterThanOrEqual((written.rows[0] as { recorded_at: Date }).recorded_at.getTime());
  const decided = await world().pool.query("SELECT count(*)::int AS n FROM safety_events WHERE intent_id = $1 AND event_type = 'GATE_DECIDED'", [id]);
  expect(decided.rows[0]).toEqual({ n: 1 });
});

test('approved while paused: the decision is in the ledger while the merge stage is held', async () => {
  const { handle, id } = await startSampleIntent(world(), 'hp');
  await until(handle, (s) => s.pendingGate?.gate === 'merge' && s.pendingGate.package !== undefined, 'the merge gate');
  await handle.signal(pauseSignal, { by: 'operator', reason: 'hold the merge' });
  await until(handle, (s) => s.status === 'paused', 'paused');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  await until(handle, (s) => s.stage === 'merge' && s.decisions.some((d) => d.gate === 'merge'), 'the merge stage to be entered');
  await untilIdle(handle);
  expect((await handle.query(stateQuery)).status).toBe('paused');
  const written = await world().pool.query('SELECT decision FROM gate_decisions WHERE intent_id = $1', [id]);
  expect(written.rows).toEqual([{ decision: 'approve' }]);
  await handle.signal(resumeSignal, { by: 'operator' });
  expect((await handle.result()).status).toBe('merged');
});
