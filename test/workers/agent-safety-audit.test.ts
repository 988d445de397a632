import { startIntent } from '../../src/client/intents';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { agentEndpoint } from '../../src/workers/interceptors/agent-endpoint';
import { safetyEventId } from '../../src/workers/interceptors/safety-events';
import { waitFor } from '../helpers/env';
import { intentFor, script, today, useSafetyWorld, withWorker } from './agent-safety-harness';

// The activity_runs audit, and the pieces the layers share.
const world = useSafetyWorld('agent-safety-audit');

test('activity_runs: every activity attempt of a run is recorded once, a retried one once per attempt', async () => {
  let failLld = true;
  await withWorker(
    {
      wrap: (activities) => ({
        ...activities,
        async runAgentStage(input) {
          const result = await activities.runAgentStage(input);
          if (input.stage === 'lld' && failLld) {
            failLld = false;
            throw new Error('injected: reply lost after the agent ran');
          }
          return result;
        },
      }),
    },
    async (h) => {
      const intent = intentFor(script({ model: 'audited' }));
      const handle = await startIntent(world().client, intent, h.queue);
      await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
      await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
      expect((await handle.result()).status).toBe('merged');
      expect(failLld).toBe(false);

      // What the history says ran: each scheduled activity, up to the attempt that ended it.
      const history = (await handle.fetchHistory()).events ?? [];
      const scheduled = new Map<string, { id: string; type: string }>();
      const expected: string[] = [];
      for (const e of history) {
        const s = e.activityTaskScheduledEventAttributes;
        if (s) scheduled.set(String(e.eventId), { id: s.activityId!, type: s.activityType!.name! });
        const started = e.activityTaskStartedEventAttributes;
        if (started) {
          const activity = scheduled.get(String(started.scheduledEventId))!;
          for (let attempt = 1; attempt <= started.attempt!; attempt++) expected.push(`${activity.type}#${activity.id}#${attempt}`);
        }
        // Local activities (ledger writes, the cleanup) leave a marker with their last attempt.
        const marker = e.markerRecordedEventAttributes;
        if (marker?.markerName === 'core_local_activity') {
          const data = JSON.parse(Buffer.from(marker.details!.data!.payloads![0]!.data!).toString()) as { activity_id: string; activity_type: string; attempt: number };
          for (let attempt = 1; attempt <= data.attempt; attempt++) expected.push(`${data.activity_type}#${data.activity_id}#${attempt}`);
        }
      }
      expect(expected.filter((run) => run.startsWith('appendToLedger#')).length).toBeGreaterThan(0);
      const { runId } = await handle.describe();
      const runs = await world().ledger.activityRuns.ofWorkflow(`intent-${intent.id}`);
      expect(runs.every((r) => r.runId === runId)).toBe(true);
      const recorded = runs.map((r) => `${r.activityType}#${r.activityId}#${r.attempt}`);
      expect(recorded.sort()).toEqual(expected.sort()); // each exactly once
      expect(new Set(recorded).size).toBe(recorded.length);

      const lld = runs.filter((r) => r.activityType === 'runAgentStage' && r.stage === 'lld');
      expect(lld.map((r) => [r.attempt, r.outcome])).toEqual([
        [1, 'failed'],
        [2, 'completed'],
      ]);
      expect(lld[1]).toMatchObject({ spendUsd: '0.008000', agentId: 'scripted', modelId: 'audited' });
      for (const r of runs) {
        expect(r.durationMs).toBe(r.endedAt.getTime() - r.startedAt.getTime());
        expect(r.durationMs).toBeGreaterThanOrEqual(0);
      }
      expect(runs.some((r) => r.activityType === 'appendToLedger' && r.outcome === 'completed')).toBe(true);
      // The released reservation of the failed attempt and the settled one of the retry.
      const spend = await world().ledger.budget.daySpend(today());
      expect(spend.reservedUsd).toBe('0.000000');
    },
  );
});

test('an agent call reads the stop flag, the error window and its circuit in one round trip, and takes two locked steps: the rate buckets before it, its outcome in the circuit and the error window after it', async () => {
  // Every locked step opens with the INSERT … ON CONFLICT that locks its rows (shared-limits.ts).
  let lockedSteps = 0;
  let admissionReads = 0;
  const wrapped = new WeakSet<object>();
  const countSteps = (client: { query: (...args: unknown[]) => unknown }): void => {
    if (wrapped.has(client)) return;
    wrapped.add(client);
    const query = client.query.bind(client);
    client.query = (...args: unknown[]) => {
      const text = (typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string } | undefined)?.text) ?? '';
      if (text.includes('INSERT INTO shared_limits')) lockedSteps += 1;
      if (/FROM shared_limits\s+WHERE key IN/.test(text) && text.includes("control = 'global_stop'")) admissionReads += 1;
      return query(...args);
    };
  };
  world().pool.on('acquire', countSteps);
  try {
    await withWorker({}, async (h) => {
      const intent = intentFor(script({ model: 'stepped' }));
      const handle = await startIntent(world().client, intent, h.queue);
      await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
      await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
      expect((await handle.result()).status).toBe('merged');
      const calls = (await world().ledger.activityRuns.ofWorkflow(`intent-${intent.id}`)).filter((r) => r.activityType === 'runAgentStage');
      expect(calls.length).toBeGreaterThanOrEqual(5);
      expect(admissionReads).toBe(calls.length);
      expect(lockedSteps).toBe(2 * calls.length);
    });
  } finally {
    world().pool.off('acquire', countSteps);
  }
});

test('activity_runs is append-only, written once per attempt, and only retention cleanup deletes from it', async () => {
  const day = 86_400_000;
  const row = {
    workflowId: 'intent-old',
    runId: 'run-1',
    activityId: '1',
    attempt: 1,
    activityType: 'runAgentStage',
    taskQueue: 'q',
    startedAt: new Date(Date.now() - 100 * day),
    endedAt: new Date(Date.now() - 100 * day + 1500),
    outcome: 'completed' as const,
    spendUsd: '0.5',
  };
  expect(await world().ledger.activityRuns.record(row)).toBe(true);
  expect(await world().ledger.activityRuns.record({ ...row, outcome: 'failed' })).toBe(false); // same attempt: no-op
  expect(await world().ledger.activityRuns.ofWorkflow('intent-old')).toEqual([expect.objectContaining({ durationMs: 1500, outcome: 'completed', spendUsd: '0.500000' })]);
  await expect(world().pool.query(`UPDATE activity_runs SET outcome = 'failed'`)).rejects.toThrow(/append-only/);
  await expect(world().pool.query('DELETE FROM activity_runs')).rejects.toThrow(/append-only/);
  const recent = (await world().pool.query('SELECT count(*)::int AS n FROM activity_runs')).rows[0].n - 1;
  const deleted = await world().ledger.retention.cleanup(90);
  expect(deleted.activity_runs).toBe(1);
  expect(await world().ledger.activityRuns.ofWorkflow('intent-old')).toEqual([]);
  expect((await world().pool.query('SELECT count(*)::int AS n FROM activity_runs')).rows[0].n).toBe(recent);
});

describe('pieces', () => {
  test('event ids are deterministic UUIDs, different per attempt, type and key', () => {
    const call = { workflowId: 'intent-a', runId: 'r1', activityId: '7', attempt: 1 };
    const id = safetyEventId(call, 'RATE_LIMIT_BLOCK');
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(safetyEventId({ ...call }, 'RATE_LIMIT_BLOCK')).toBe(id);
    expect(safetyEventId({ ...call, attempt: 2 }, 'RATE_LIMIT_BLOCK')).not.toBe(id);
    expect(safetyEventId(call, 'CIRCUIT_TRIPPED')).not.toBe(id);
    expect(safetyEventId(call, 'RATE_LIMIT_BLOCK', 'x')).not.toBe(id);
  });

  test('endpoints of model profiles are kind, base URL and model: two servers of one model are two circuits', async () => {
    const profile = (baseUrl?: string) => ({ kind: 'openai' as const, model: 'gpt-4.1-mini', ...(baseUrl ? { baseUrl } : {}) }) as never;
    const a = await agentEndpoint(profile('http://127.0.0.1:18080/v1'));
    const b = await agentEndpoint(profile('http://127.0.0.1:18081/v1/'));
    expect(a).toEqual({ agentId: 'openai', modelId: 'gpt-4.1-mini', endpoint: 'openai http://127.0.0.1:18080/v1 gpt-4.1-mini' });
    expect(b.endpoint).toBe('openai http://127.0.0.1:18081/v1 gpt-4.1-mini');
    expect((await agentEndpoint(profile())).endpoint).toBe('openai https://api.openai.com/v1 gpt-4.1-mini');
  });

  test("endpoints: a script's model, a command's program", async () => {
    expect(await agentEndpoint({ kind: 'scripted', scriptPath: script({ model: 'm1' }) })).toEqual({ agentId: 'scripted', modelId: 'm1', endpoint: 'scripted/m1' });
    expect(await agentEndpoint({ kind: 'scripted', scriptPath: '/nonexistent.json' })).toEqual({ agentId: 'scripted', modelId: 'scripted', endpoint: 'scripted/scripted' });
    expect(await agentEndpoint({ kind: 'command', command: '/usr/bin/claude -p', promptVia: 'stdin', timeout: '30m', maxOutputBytes: 1000, sandbox: 'auto', network: 'none' })).toEqual({
      agentId: 'command',
      modelId: 'command',
      endpoint: 'command/claude',
    });
  });
});
