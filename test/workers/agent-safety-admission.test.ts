import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import type { WardenActivities } from '../../src/activities';
import { startIntent } from '../../src/client/intents';
import { breakerHistory } from '../../src/ledger/breaker-history';
import { stateQuery } from '../../src/shared/messages';
import { waitFor } from '../helpers/env';
import { cancel, events, expectOneRowPerDecision, failingScript, failureOf, intentFor, pendingFailure, safety, script, useSafetyWorld, withWorker, type Handle, type PendingActivity } from './agent-safety-harness';

// Before the agent runs: kill switches, endpoint circuits, rate limits and the error-rate breaker.
const world = useSafetyWorld('agent-safety-admission');

describe('kill switches', () => {
  test('the global stop flag stops a running agent at once; with no cancellation after it the intent halts with KILL_SWITCH', async () => {
    // triage would take ten minutes, past the test's own timeout: only the stop can end it sooner.
    const slow = script({ model: 'ks-global', triage: { delayMs: 600_000 } });
    await withWorker({}, async (h) => {
      const intent = intentFor(slow);
      const handle = await startIntent(world().client, intent, h.queue);
      await waitFor(async () => (h.agentCalls() === 1 ? true : undefined), 120_000, 'triage to start');
      await world().ledger.globalStop.set('tester', 'agent-safety test');
      try {
        // One read of the flag (250 ms), then the 5 s wait for a cancellation that never comes.
        expect(await failureOf(handle)).toContain('KILL_SWITCH');
      } finally {
        await world().ledger.globalStop.clear('tester', 'agent-safety test done');
      }
      expect(h.agentCalls()).toBe(1); // triage was stopped; lld never started
      const stopped = await events(intent.id, 'INTENT_STOPPED');
      expect(stopped).toHaveLength(1);
      expect(stopped[0]).toMatchObject({ severity: 'high', metadata: expect.objectContaining({ killSwitch: 'global_stop', midRun: true }) });
      expect(stopped[0]!.reason).toContain('global stop set by tester');
      expect(stopped[0]!.reason).toContain('(triage stage)');
      expect(stopped[0]!.suggestion).toBeTruthy();
      expect(h.logs().some((l) => l.msg === 'kill switch is on: stopped the running agent')).toBe(true);
    });
  });

  test('warden stop --all: the global stop kills the running agent, and the cancellation that follows ends the intent cancelled', async () => {
    // triage would take ten minutes, past the test's own timeout: only the stop can end it sooner.
    const slow = script({ model: 'ks-stop-all', triage: { delayMs: 600_000 } });
    await withWorker({}, async (h) => {
      const intent = intentFor(slow);
      const handle = await startIntent(world().client, intent, h.queue);
      await waitFor(async () => (h.agentCalls() === 1 ? true : undefined), 120_000, 'triage to start');
      try {
        // What stopAll does, with the cancellation a moment late: the agent is already dead by then.
        await world().ledger.globalStop.set('tester', 'stop --all drill');
        await waitFor(async () => ((await events(intent.id, 'INTENT_STOPPED')).length > 0 ? true : undefined), 120_000, 'the agent to be stopped');
        await handle.cancel();
        await handle.result().catch(() => undefined);
      } finally {
        await world().ledger.globalStop.clear('tester', 'stop --all drill done');
      }
      expect((await handle.describe()).status.name).toBe('CANCELLED');
      expect(h.agentCalls()).toBe(1);
      expect(await events(intent.id, 'INTENT_CANCELLED')).toHaveLength(1);
      expect(await events(intent.id, 'INTENT_FAILED')).toEqual([]);
    });
  });

  test('the global stop flag set before an agent call: the call is not started, the intent halts with KILL_SWITCH', async () => {
    // Set once the worktree is made (a stage activity, which the flag would stop first): triage's call is next.
    const setAfterWorktree = (activities: WardenActivities): WardenActivities => ({
      ...activities,
      async prepareWorktree(input) {
        const prepared = await activities.prepareWorktree(input);
        await world().ledger.globalStop.set('tester', 'agent-safety test');
        return prepared;
      },
    });
    await withWorker({ wrap: setAfterWorktree }, async (h) => {
      const intent = intentFor(script({ model: 'ks-global-before' }));
      try {
        const handle = await startIntent(world().client, intent, h.queue);
        expect(await failureOf(handle)).toContain('KILL_SWITCH');
      } finally {
        await world().ledger.globalStop.clear('tester', 'agent-safety test done');
      }
      expect(h.agentCalls()).toBe(0);
      const stopped = await events(intent.id, 'INTENT_STOPPED');
      expect(stopped).toHaveLength(1);
      expect(stopped[0]).toMatchObject({ severity: 'high', metadata: expect.objectContaining({ killSwitch: 'global_stop' }) });
      expect(stopped[0]!.reason).toContain('call was not started');
      expect(h.logs().some((l) => l.msg === 'kill switch is on: refusing to start agent work' && l.killSwitch === 'global_stop')).toBe(true);
    });
  });

  test('WARDEN_ENABLED=false: no agent runs, the intent halts with KILL_SWITCH', async () => {
    const stopFile = path.join(mkdtempSync(path.join(tmpdir(), 'warden-stop-')), 'EMERGENCY_STOP');
    await withWorker({ killSwitch: { enabled: false, emergencyStopFile: stopFile } }, async (h) => {
      const intent = intentFor(script({ model: 'ks-disabled' }));
      const handle = await startIntent(world().client, intent, h.queue);
      expect(await failureOf(handle)).toContain('KILL_SWITCH');
      expect(h.agentCalls()).toBe(0);
      expect(await events(intent.id, 'INTENT_STOPPED')).toEqual([expect.objectContaining({ metadata: expect.objectContaining({ killSwitch: 'WARDEN_ENABLED' }) })]);
      // Not even the worktree is made: the first stage activity is refused.
      expect(h.logs().some((l) => l.msg === 'kill switch is on: refusing to start prepareWorktree')).toBe(true);
    });
  });

  test('an EMERGENCY_STOP file: no agent runs, the intent halts with KILL_SWITCH', async () => {
    const stopFile = path.join(mkdtempSync(path.join(tmpdir(), 'warden-stop-')), 'EMERGENCY_STOP');
    writeFileSync(stopFile, 'incident 42\n');
    await withWorker({ killSwitch: { enabled: true, emergencyStopFile: stopFile } }, async (h) => {
      const intent = intentFor(script({ model: 'ks-file' }));
      const handle = await startIntent(world().client, intent, h.queue);
      expect(await failureOf(handle)).toContain('KILL_SWITCH');
      expect(h.agentCalls()).toBe(0);
      const [stopped] = await events(intent.id, 'INTENT_STOPPED');
      expect(stopped).toMatchObject({ metadata: expect.objectContaining({ killSwitch: 'EMERGENCY_STOP' }) });
      expect(stopped!.reason).toContain(stopFile);
    });
  });
});

test('repeated failures trip the endpoint circuit: later calls fail fast with CIRCUIT_OPEN, one CIRCUIT_TRIPPED event', async () => {
  const config = safety({ circuitBreaker: { consecutiveFailures: 2, halfOpenAfter: '10m' } });
  const broken = failingScript('flaky-endpoint');
  await withWorker({ safety: config }, async (h) => {
    const failed: string[] = [];
    for (let i = 0; i < 2; i++) {
      const intent = intentFor(broken);
      failed.push(intent.id);
      expect(await failureOf(await startIntent(world().client, intent, h.queue))).toContain('AGENT_FAILED');
    }
    expect(h.agentCalls()).toBe(2);

    const intent = intentFor(broken);
    const handle = await startIntent(world().client, intent, h.queue);
    const pending = await pendingFailure(handle, 'CIRCUIT_OPEN');
    expect(pending.lastFailure?.applicationFailureInfo?.nonRetryable).toBeFalsy(); // retried after the cool-down
    expect(pending.lastFailure?.message).toContain('scripted/flaky-endpoint');
    expect(h.agentCalls()).toBe(2); // failed fast: the agent did not run
    await cancel(handle);

    const trips = await world().pool.query(`SELECT intent_id, severity, breaker_id, reason, suggestion FROM safety_events WHERE event_type = 'CIRCUIT_TRIPPED'`);
    expect(trips.rows).toEqual([
      expect.objectContaining({ intent_id: failed[1], severity: 'high', breaker_id: 'scripted/flaky-endpoint', reason: expect.stringContaining('2 consecutive failures') }),
    ]);
  });
});

test('policy refusals of an answer (MODEL_MISMATCH, SAFETY_HALT…) do not count against the endpoint', async () => {
  const config = safety({ circuitBreaker: { consecutiveFailures: 2, halfOpenAfter: '10m' } });
  const refusals = ['MODEL_MISMATCH', 'INVALID_STRUCTURED_OUTPUT', 'MODE_VIOLATION', 'SAFETY_HALT'];
  let next = 0;
  const refusing = (activities: WardenActivities): WardenActivities => ({
    ...activities,
    async runAgentStage(input) {
      if (input.stage === 'triage' && next < refusals.length) {
        throw ApplicationFailure.create({ type: refusals[next++], message: 'refused by policy', nonRetryable: true });
      }
      return activities.runAgentStage(input);
    },
  });
  const endpoint = script({ model: 'policy-endpoint' });
  await withWorker({ safety: config, wrap: refusing }, async (h) => {
    const failed: string[] = [];
    for (const type of refusals) {
      const intent = intentFor(endpoint);
      failed.push(intent.id);
      expect(await failureOf(await startIntent(world().client, intent, h.queue))).toContain(type);
    }
    // Four refusals in a row and the circuit is still closed: the next intent's call runs.
    const handle = await startIntent(world().client, intentFor(endpoint), h.queue);
    await waitFor(async () => ((await handle.query(stateQuery)).attempts.lld ?? 0) > 0 || undefined, 120_000, 'the next intent past triage');
    await cancel(handle);
    const trips = await world().pool.query(`SELECT 1 FROM safety_events WHERE event_type = 'CIRCUIT_TRIPPED' AND breaker_id = 'scripted/policy-endpoint'`);
    expect(trips.rowCount).toBe(0);
  });
});

test('an open circuit with a short cool-down is waited for inside the attempt: no retry attempt is spent on it', async () => {
  // Long enough that the next intent's triage starts while the circuit is open, however slow the machine.
  const COOL_DOWN_MS = 10_000;
  const config = safety({ circuitBreaker: { consecutiveFailures: 2, halfOpenAfter: `${COOL_DOWN_MS / 1000}s`, probes: 1 } });
  await withWorker({ safety: config }, async (h) => {
    for (let i = 0; i < 2; i++) {
      expect(await failureOf(await startIntent(world().client, intentFor(failingScript('recovering-endpoint')), h.queue))).toContain('AGENT_FAILED');
    }
    // The endpoint is back (same model name: same circuit); the circuit stays OPEN for the cool-down.
    const intent = intentFor(script({ model: 'recovering-endpoint' }));
    const handle = await startIntent(world().client, intent, h.queue);
    await waitFor(async () => ((await handle.query(stateQuery)).attempts.lld ?? 0) > 0 || undefined, 120_000, 'triage done');
    await cancel(handle);
    const triage = (await world().ledger.activityRuns.ofWorkflow(`intent-${intent.id}`)).filter((r) => r.activityType === 'runAgentStage' && r.stage === 'triage');
    expect(triage.map((r) => [r.attempt, r.outcome])).toEqual([[1, 'completed']]);
    // That one attempt began while the circuit was open: it waited out the cool-down inside.
    const { rows: trips } = await world().pool.query<{ at: Date }>(
      "SELECT timestamp AS at FROM safety_events WHERE event_type = 'CIRCUIT_TRIPPED' AND breaker_id = 'scripted/recovering-endpoint' ORDER BY timestamp DESC LIMIT 1",
    );
    expect(triage[0]!.startedAt.getTime()).toBeLessThan(trips[0]!.at.getTime() + COOL_DOWN_MS);
    const reset = await events(intent.id, 'CIRCUIT_RESET');
    expect(reset).toEqual([expect.objectContaining({ breaker_id: 'scripted/recovering-endpoint' })]);
    // The breaker's history has each move in order, with its reason: the half-open probe too.
    const history = await breakerHistory(world().pool);
    expect(history.changes.filter((c) => c.endpoint === 'scripted/recovering-endpoint').map((c) => [c.from, c.to, c.cause])).toEqual([
      ['CLOSED', 'OPEN', 'consecutive-failures'],
      ['OPEN', 'HALF_OPEN', 'cool-down-elapsed'],
      ['HALF_OPEN', 'CLOSED', 'probes-succeeded'],
    ]);
    expect(history.changes.filter((c) => c.endpoint === 'scripted/recovering-endpoint').slice(1).map((c) => c.intentId)).toEqual([intent.id, intent.id]);
  });
});

test('a tiny requestsPerMinute blocks the 2nd call: RATE_LIMIT_BLOCK, retried after the wait', async () => {
  const config = safety({ rateLimits: { perAgent: { requestsPerMinute: 1, tokensPerMinute: 1_000_000 } } });
  await withWorker({ safety: config }, async (h) => {
    const intent = intentFor(script({ model: 'rate-limited' }));
    const handle = await startIntent(world().client, intent, h.queue);
    const pending = await pendingFailure(handle, 'RATE_LIMITED');
    expect(h.agentCalls()).toBe(1); // triage ran; lld waits for the bucket
    expect(pending.attempt).toBeGreaterThanOrEqual(2); // a retry is scheduled…
    // …for when the bucket has refilled (about a minute after triage took from it), by Temporal's
    // clock from the refused attempt: however late this test looks, the gap is the same.
    const seconds = (time: PendingActivity['nextAttemptScheduleTime']): number => {
      const value = time?.seconds;
      return typeof value === 'number' ? value : (value?.toNumber() ?? 0);
    };
    expect((seconds(pending.nextAttemptScheduleTime) - seconds(pending.lastAttemptCompleteTime)) * 1000).toBeGreaterThan(30_000);
    const blocks = await events(intent.id, 'RATE_LIMIT_BLOCK');
    expect(blocks).toHaveLength(1);
    // The breaker history counts the refusal against its agent and model.
    expect((await breakerHistory(world().pool)).rateLimits).toContainEqual(expect.objectContaining({ agentId: 'scripted', modelId: 'rate-limited', refusals: 1 }));
    expect(blocks[0]).toMatchObject({ metadata: expect.objectContaining({ refusals: [expect.objectContaining({ scope: 'agent', key: 'scripted', limit: 'requests' })] }) });
    await cancel(handle);
  });
});

test('the error-rate breaker: warning once, then critical; new agent calls then fail fast with ERROR_RATE_CRITICAL', async () => {
  const config = safety({ errorRate: { minimumCalls: 4, window: '10m' } });
  await withWorker({ safety: config }, async (h) => {
    // Successful calls first, up to the merge gate.
    const good = intentFor(script({ model: 'healthy' }));
    const goodHandle = await startIntent(world().client, good, h.queue);
    await waitFor(async () => ((await goodHandle.query(stateQuery)).pendingGate ? true : undefined), 120_000, 'the merge gate');
    await cancel(goodHandle);
    const successes = h.agentCalls();

    // Then failures, on another endpoint (the circuit stays closed), until new calls fail fast.
    const broken = failingScript('error-rate');
    const failingIds: string[] = [];
    let blocked: Handle | undefined;
    for (let failures = 0; !blocked; ) {
      expect(failures).toBeLessThan(successes); // it trips at 25%, well before half the calls fail
      const intent = intentFor(broken);
      const handle = await startIntent(world().client, intent, h.queue);
      const calls = h.agentCalls();
      const outcome = await waitFor(async () => {
        if ((await handle.describe()).status.name !== 'RUNNING') return 'ended' as const;
        const pending = ((await handle.describe()).raw.pendingActivities ?? []) as PendingActivity[];
        return pending.some((p) => p.lastFailure?.applicationFailureInfo?.type === 'ERROR_RATE_CRITICAL') ? ('blocked' as const) : undefined;
      }, 120_000, 'the intent to fail or be blocked');
      if (outcome === 'blocked') {
        expect(h.agentCalls()).toBe(calls); // failed fast
        blocked = handle;
      } else {
        expect(await failureOf(handle)).toContain('AGENT_FAILED');
        failures += 1;
        failingIds.push(intent.id);
      }
    }
    await cancel(blocked);

    const rows = await world().pool.query(
      `SELECT intent_id, severity, metadata->>'pattern' AS pattern FROM safety_events
        WHERE event_type = 'ANOMALY_DETECTED' AND breaker_id = 'error-rate' ORDER BY recorded_at`,
    );
    expect(rows.rows.map((r) => [r.severity, r.pattern])).toEqual([
      ['medium', 'ERROR_RATE_WARNING'],
      ['critical', 'ERROR_RATE_CRITICAL'],
    ]);
    expect(rows.rows[1].intent_id).toBe(failingIds.at(-1)); // the failure that crossed 25%
  });
});

test("every safety event written by the worker's interceptor is one row per decision", async () => {
  await expectOneRowPerDecision();
});
