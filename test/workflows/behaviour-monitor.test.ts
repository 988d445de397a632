import type { WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { LadderStore } from '../../src/ledger/ladder-store';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import type { IntentState } from '../../src/shared/state';
import { demoScript, demoStages, startSampleIntent, useTestWorld, waitFor } from '../helpers/env';
import { untilIdle } from '../helpers/workflow-idle';

/**
 * The behaviour monitor through real intents: it runs in the worker over every agent call, with
 * baselines seeded from the ledger's past runs, so a cost outlier is caught on an intent's first
 * attempt. HIGH holds the intent at the anomaly gate for a person, even at ladder level L4;
 * a second HIGH in the same intent is CRITICAL and halts it.
 */

const world = useTestWorld('behaviour-monitor');
const demo = demoStages();

/** Ten past answered calls of `stage` by `agent`: about $0.01 each, latencies spread wide. */
async function pastRuns(agent: string, stage: string): Promise<void> {
  for (let i = 0; i < 10; i++) {
    const startedAt = new Date(Date.now() - 3_600_000 + i * 60_000);
    await world().ledger.activityRuns.record({
      workflowId: `past-${agent}`,
      runId: 'r1',
      activityId: `${stage}-${i}`,
      attempt: 1,
      activityType: 'runAgentStage',
      taskQueue: 'past',
      intentId: `past-${agent}`,
      stage,
      agentId: agent,
      modelId: 'scripted',
      startedAt,
      endedAt: new Date(startedAt.getTime() + (i % 2 ? 6_000 : 200)),
      outcome: 'completed',
      spendUsd: i % 2 ? '0.011' : '0.009',
    });
  }
}

/** Starts an intent of `agent`, whose ladder scope is pinned at L4 (full autonomy). */
async function start(agent: string, costs: Partial<Record<'triage' | 'lld', number>>) {
  await new LadderStore(world().pool).setLevel({ scope: `agent:${agent}`, level: 4, pinned: true, by: 'tester', defaults: { level: 0, allowLevelUp: false } });
  const stages = Object.fromEntries(Object.entries(costs).map(([stage, costUsd]) => [stage, [{ ...demo[stage][0], costUsd }]]));
  return startSampleIntent(world(), 'bm', { agent: { kind: 'scripted', name: agent, scriptPath: demoScript(stages) } });
}

async function anomalies(id: string): Promise<Array<{ severity: string; reason: string; metadata: { kind: string } }>> {
  const { rows } = await world().pool.query(`SELECT severity, reason, metadata FROM safety_events WHERE intent_id = $1 AND event_type = 'ANOMALY_DETECTED' ORDER BY recorded_at`, [id]);
  return rows;
}

async function atGate(handle: WorkflowHandle, gate: string): Promise<IntentState> {
  return waitFor(async () => {
    const s = await handle.query(stateQuery);
    if (s.status === 'merged' || s.status === 'rejected' || s.status === 'failed') throw new Error(`intent ended (${s.status}: ${s.error ?? ''}) before the ${gate} gate`);
    return s.pendingGate?.gate === gate ? s : undefined;
  }, 120_000, `the ${gate} gate`);
}

// The worker reads the past runs at its first agent call: they are in the ledger before it.
beforeAll(async () => {
  await pastRuns('watched-high', 'triage');
  await pastRuns('watched-critical', 'triage');
  await pastRuns('watched-critical', 'lld');
});

test('a HIGH cost outlier on the first attempt of a new intent stops it for a person, even at L4', async () => {
  const { handle, id } = await start('watched-high', { triage: 0.5 });

  const waiting = await atGate(handle, 'anomaly');
  expect(waiting.pendingGate?.prompt).toMatch(/cost \$0\.500000 is .* standard deviations from the baseline of \$0\.010000 over 10 runs/);
  expect(await anomalies(id)).toEqual([expect.objectContaining({ severity: 'high', metadata: expect.objectContaining({ kind: 'cost-outlier' }) })]);
  // Full autonomy does not pass it: still waiting once the workflow has nothing left to do by
  // itself, and the gate says a person must decide.
  await untilIdle(handle);
  expect((await handle.query(stateQuery)).pendingGate?.gate).toBe('anomaly');
  const { rows } = await world().pool.query(`SELECT metadata FROM safety_events WHERE intent_id = $1 AND event_type = 'GATE_REQUESTED'`, [id]);
  expect(rows[0].metadata).toMatchObject({ gate: 'anomaly', humanOnly: true });

  await handle.signal(decideSignal, { gate: 'anomaly', decision: 'approve', by: 'tester' });
  await waitFor(async () => ((await handle.query(stateQuery)).attempts.spec ?? 0) > 0 || undefined, 60_000, 'the intent past the anomaly gate');
  await handle.cancel();
  await handle.result().catch(() => undefined);
});

test('a second HIGH anomaly after a person let the intent go on is CRITICAL: the intent halts', async () => {
  const { handle, id } = await start('watched-critical', { triage: 0.5, lld: 0.5 });

  await atGate(handle, 'anomaly');
  await handle.signal(decideSignal, { gate: 'anomaly', decision: 'approve', by: 'tester' });

  const error = await handle.result().then(
    () => undefined,
    (e: unknown) => e,
  );
  let cause = error as { cause?: unknown } | undefined;
  while (cause && !(cause instanceof ApplicationFailure)) cause = cause.cause as typeof cause;
  expect(cause).toBeInstanceOf(ApplicationFailure);
  expect((cause as ApplicationFailure).type).toBe('SAFETY_HALT');
  expect((cause as ApplicationFailure).message).toMatch(/ANOMALY_DETECTED: critical cost-outlier in lld/);

  const found = await anomalies(id);
  expect(found.map((f) => [f.severity, f.metadata.kind])).toEqual([
    ['high', 'cost-outlier'],
    ['critical', 'cost-outlier'],
  ]);
  expect(found[1].reason).toMatch(/HIGH anomaly number 2 of this intent, after a person let it go on/);
  const state = await handle.query(stateQuery);
  expect(state.status).toBe('failed');
  expect(state.attempts.spec).toBeUndefined();
});
