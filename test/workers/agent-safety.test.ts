import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import pino from 'pino';
import type { WardenActivities } from '../../src/activities';
import { startIntent } from '../../src/client/intents';
import { resolveConfig } from '../../src/config/load';
import type { ConfigFile, WorkerSafetyConfig } from '../../src/config/schema';
import { Ledger } from '../../src/ledger/ledger';
import type { SafetyEventInput } from '../../src/ledger/types';
import { detectCascade } from '../../src/safety/cascade-detector';
import { addUsd, compareUsd, subUsd, sumUsd } from '../../src/shared/money';
import type { IntentInput } from '../../src/shared/intent';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { createRedactor } from '../../src/shared/redact';
import { agentEndpoint, safetyEventId, type KillSwitchOptions } from '../../src/workers/interceptors/agent-safety';
import { createWardenWorker } from '../../src/workers/warden-worker';
import type { intentWorkflow } from '../../src/workflows';
import { SAMPLE_LLD, SAMPLE_SPEC } from '../../src/client/sample-repo';
import { DEMO_SCRIPT, createTestWorld, makeSampleRepo, waitFor, writeScript, type TestWorld } from '../helpers/env';
import { stageOf, startModelServer, type ModelServer } from '../helpers/model-server';

type Handle = WorkflowHandle<typeof intentWorkflow>;

let world: TestWorld;

beforeAll(async () => {
  world = await createTestWorld('agent-safety');
});

afterAll(async () => {
  await world?.close();
});

/** The demo script with no delays; `model` names the endpoint, `costUsd` (if given) is every call's cost. */
function script(options: { model: string; costUsd?: number; triage?: Record<string, unknown> }): string {
  const demo = JSON.parse(readFileSync(DEMO_SCRIPT, 'utf8'));
  for (const attempts of Object.values(demo.stages) as Record<string, unknown>[][]) {
    for (const a of attempts) {
      a.delayMs = 0;
      if (options.costUsd !== undefined) a.costUsd = options.costUsd;
    }
  }
  if (options.triage) demo.stages.triage = [{ ...demo.stages.triage[0], ...options.triage }];
  return writeScript({ ...demo, model: options.model });
}

function failingScript(model: string): string {
  return writeScript({ model, stages: { triage: [{ output: '', fail: `${model} is down` }] } });
}

let n = 0;
function intentFor(scriptPath: string, limits: Record<string, unknown> = {}): IntentInput {
  n += 1;
  return {
    id: `as${n}-${Date.now()}`,
    goal: 'Add slugify',
    repoPath: makeSampleRepo(),
    paths: ['lib/**'],
    agent: { kind: 'scripted', scriptPath },
    limits: { cooldown: '0s', ...limits },
  } as IntentInput;
}

/** The default worker config with `overrides`, validated as a config file would be. */
function safety(overrides: NonNullable<ConfigFile['worker']> = {}): WorkerSafetyConfig {
  return resolveConfig({ limits: { cooldown: '0s' }, worker: overrides }).worker;
}

interface Harness {
  readonly queue: string;
  /** Agent calls that got past the interceptor (the activity itself ran). */
  readonly agentCalls: () => number;
  readonly logs: () => Record<string, unknown>[];
}

let queues = 0;
/** A worker of its own (own task queue) with this safety config, kill switches, ledger and faults. */
async function withWorker<T>(
  options: {
    safety?: WorkerSafetyConfig;
    killSwitch?: KillSwitchOptions;
    ledger?: Ledger;
    wrap?: (activities: WardenActivities) => WardenActivities;
  },
  fn: (h: Harness) => Promise<T>,
): Promise<T> {
  queues += 1;
  const queue = `${world.taskQueue}-${queues}`;
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  let calls = 0;
  const worker = await createWardenWorker({
    connection: world.connection,
    taskQueue: queue,
    workflowBundle: world.bundle,
    worktreeRoot: world.worktreeRoot,
    lineageRoot: world.lineageRoot,
    ledger: options.ledger ?? world.ledger,
    logger: pino({ level: 'info' }, sink),
    redact: createRedactor(process.env),
    safety: options.safety ?? safety(),
    // Never the repo's own .warden/EMERGENCY_STOP: tests must not depend on it.
    killSwitch: options.killSwitch ?? { enabled: true, emergencyStopFile: path.join(mkdtempSync(path.join(tmpdir(), 'warden-stop-')), 'EMERGENCY_STOP') },
    wrapActivities: (activities) => {
      const wrapped = options.wrap ? options.wrap(activities) : activities;
      return {
        ...wrapped,
        async runAgentStage(input) {
          calls += 1;
          return wrapped.runAgentStage(input);
        },
      };
    },
  });
  const running = worker.run();
  try {
    return await fn({
      queue,
      agentCalls: () => calls,
      logs: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>),
    });
  } finally {
    worker.shutdown();
    await running;
  }
}

/** Every ApplicationFailure type on the failure's cause chain (workflow → activity → application). */
function failureTypes(error: unknown): string[] {
  const types: string[] = [];
  for (let e = error as { cause?: unknown } | undefined; e; e = e.cause as typeof e) {
    if (e instanceof ApplicationFailure && e.type) types.push(e.type);
  }
  return types;
}

async function failureOf(handle: Handle): Promise<string[]> {
  const error = await handle.result().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeDefined();
  return failureTypes(error);
}

interface PendingActivity {
  activityType?: { name?: string };
  attempt?: number;
  lastFailure?: { message?: string; applicationFailureInfo?: { type?: string; nonRetryable?: boolean } };
  nextAttemptScheduleTime?: { seconds?: { toNumber(): number } | number };
}

/** Waits until the intent's pending agent activity last failed with `type`; returns it. */
async function pendingFailure(handle: Handle, type: string): Promise<PendingActivity> {
  return waitFor(
    async () => {
      const pending = ((await handle.describe()).raw.pendingActivities ?? []) as PendingActivity[];
      return pending.find((p) => p.activityType?.name === 'runAgentStage' && p.lastFailure?.applicationFailureInfo?.type === type);
    },
    30_000,
    `a runAgentStage attempt failing with ${type}`,
  );
}

async function cancel(handle: Handle): Promise<void> {
  await handle.cancel();
  await handle.result().catch(() => undefined);
}

async function events(intentId: string, type?: string): Promise<Record<string, unknown>[]> {
  const result = await world.pool.query(
    `SELECT id, event_type, severity, reason, suggestion, breaker_id, metadata FROM safety_events
      WHERE intent_id = $1 AND ($2::text IS NULL OR event_type = $2) ORDER BY recorded_at`,
    [intentId, type ?? null],
  );
  return result.rows;
}

const today = (): string => new Date().toISOString().slice(0, 10);

/** An agent's settled plus still-reserved spend of today: what its day budget is judged on. */
async function agentCommittedToday(agentId: string): Promise<string> {
  const { rows } = await world.pool.query(
    `SELECT round(coalesce(sum(coalesce(s.actual_usd, r.amount_usd)), 0), 6)::text AS usd
       FROM budget_reservations r LEFT JOIN budget_settlements s ON s.reservation_id = r.id
      WHERE r.granted AND r.day = $1 AND r.agent_id = $2`,
    [today(), agentId],
  );
  return rows[0].usd;
}

async function costRows(intentId: string): Promise<Array<{ stage: string; model_id: string; usd: string; input_tokens: string; output_tokens: string }>> {
  const { rows } = await world.pool.query(
    'SELECT stage, model_id, usd::text AS usd, input_tokens::text, output_tokens::text FROM cost_events WHERE intent_id = $1 ORDER BY timestamp, id',
    [intentId],
  );
  return rows;
}

/** Settled plus still-reserved spend of today, across everything this file ran so far. */
async function committedToday(): Promise<string> {
  const spend = await world.ledger.daySpend(today());
  return addUsd(spend.settledUsd, spend.reservedUsd);
}

describe('kill switches', () => {
  test('the global stop flag stops a running agent at once; with no cancellation after it the intent halts with KILL_SWITCH', async () => {
    // triage would take a minute: only the stop can end it sooner.
    const slow = script({ model: 'ks-global', triage: { delayMs: 60_000 } });
    await withWorker({}, async (h) => {
      const intent = intentFor(slow);
      const handle = await startIntent(world.client, intent, h.queue);
      await waitFor(async () => (h.agentCalls() === 1 ? true : undefined), 30_000, 'triage to start');
      const stoppedAt = Date.now();
      await world.ledger.setGlobalStop('tester', 'agent-safety test');
      try {
        expect(await failureOf(handle)).toContain('KILL_SWITCH');
      } finally {
        await world.ledger.clearGlobalStop('tester', 'agent-safety test done');
      }
      // One read of the flag (250 ms), then the 5 s wait for a cancellation that never comes.
      expect(Date.now() - stoppedAt).toBeLessThan(20_000);
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
    const slow = script({ model: 'ks-stop-all', triage: { delayMs: 60_000 } });
    await withWorker({}, async (h) => {
      const intent = intentFor(slow);
      const handle = await startIntent(world.client, intent, h.queue);
      await waitFor(async () => (h.agentCalls() === 1 ? true : undefined), 30_000, 'triage to start');
      const stoppedAt = Date.now();
      try {
        // What stopAll does, with the cancellation a moment late: the agent is already dead by then.
        await world.ledger.setGlobalStop('tester', 'stop --all drill');
        await waitFor(async () => ((await events(intent.id, 'INTENT_STOPPED')).length > 0 ? true : undefined), 10_000, 'the agent to be stopped');
        await handle.cancel();
        await handle.result().catch(() => undefined);
      } finally {
        await world.ledger.clearGlobalStop('tester', 'stop --all drill done');
      }
      expect((await handle.describe()).status.name).toBe('CANCELLED');
      expect(Date.now() - stoppedAt).toBeLessThan(10_000);
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
        await world.ledger.setGlobalStop('tester', 'agent-safety test');
        return prepared;
      },
    });
    await withWorker({ wrap: setAfterWorktree }, async (h) => {
      const intent = intentFor(script({ model: 'ks-global-before' }));
      try {
        const handle = await startIntent(world.client, intent, h.queue);
        expect(await failureOf(handle)).toContain('KILL_SWITCH');
      } finally {
        await world.ledger.clearGlobalStop('tester', 'agent-safety test done');
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
      const handle = await startIntent(world.client, intent, h.queue);
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
      const handle = await startIntent(world.client, intent, h.queue);
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
      expect(await failureOf(await startIntent(world.client, intent, h.queue))).toContain('AGENT_FAILED');
    }
    expect(h.agentCalls()).toBe(2);

    const intent = intentFor(broken);
    const handle = await startIntent(world.client, intent, h.queue);
    const pending = await pendingFailure(handle, 'CIRCUIT_OPEN');
    expect(pending.lastFailure?.applicationFailureInfo?.nonRetryable).toBeFalsy(); // retried after the cool-down
    expect(pending.lastFailure?.message).toContain('scripted/flaky-endpoint');
    expect(h.agentCalls()).toBe(2); // failed fast: the agent did not run
    await cancel(handle);

    const trips = await world.pool.query(`SELECT intent_id, severity, breaker_id, reason, suggestion FROM safety_events WHERE event_type = 'CIRCUIT_TRIPPED'`);
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
      expect(await failureOf(await startIntent(world.client, intent, h.queue))).toContain(type);
    }
    // Four refusals in a row and the circuit is still closed: the next intent's call runs.
    const handle = await startIntent(world.client, intentFor(endpoint), h.queue);
    await waitFor(async () => ((await handle.query(stateQuery)).attempts.lld ?? 0) > 0 || undefined, 30_000, 'the next intent past triage');
    await cancel(handle);
    const trips = await world.pool.query(`SELECT 1 FROM safety_events WHERE event_type = 'CIRCUIT_TRIPPED' AND breaker_id = 'scripted/policy-endpoint'`);
    expect(trips.rowCount).toBe(0);
  });
});

test('an open circuit with a short cool-down is waited for inside the attempt: no retry attempt is spent on it', async () => {
  const config = safety({ circuitBreaker: { consecutiveFailures: 2, halfOpenAfter: '3s', probes: 1 } });
  await withWorker({ safety: config }, async (h) => {
    for (let i = 0; i < 2; i++) {
      expect(await failureOf(await startIntent(world.client, intentFor(failingScript('recovering-endpoint')), h.queue))).toContain('AGENT_FAILED');
    }
    // The endpoint is back (same model name: same circuit); the circuit is OPEN for 3 s more.
    const intent = intentFor(script({ model: 'recovering-endpoint' }));
    const started = Date.now();
    const handle = await startIntent(world.client, intent, h.queue);
    await waitFor(async () => ((await handle.query(stateQuery)).attempts.lld ?? 0) > 0 || undefined, 30_000, 'triage done');
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
    await cancel(handle);
    const triage = (await world.ledger.activityRuns(`intent-${intent.id}`)).filter((r) => r.activityType === 'runAgentStage' && r.stage === 'triage');
    expect(triage.map((r) => [r.attempt, r.outcome])).toEqual([[1, 'completed']]);
    const reset = await events(intent.id, 'CIRCUIT_RESET');
    expect(reset).toEqual([expect.objectContaining({ breaker_id: 'scripted/recovering-endpoint' })]);
  });
});

test('a tiny requestsPerMinute blocks the 2nd call: RATE_LIMIT_BLOCK, retried after the wait', async () => {
  const config = safety({ rateLimits: { perAgent: { requestsPerMinute: 1, tokensPerMinute: 1_000_000 } } });
  await withWorker({ safety: config }, async (h) => {
    const intent = intentFor(script({ model: 'rate-limited' }));
    const handle = await startIntent(world.client, intent, h.queue);
    const pending = await pendingFailure(handle, 'RATE_LIMITED');
    expect(h.agentCalls()).toBe(1); // triage ran; lld waits for the bucket
    expect(pending.attempt).toBeGreaterThanOrEqual(2); // a retry is scheduled…
    const next = pending.nextAttemptScheduleTime?.seconds;
    const nextSeconds = typeof next === 'number' ? next : next?.toNumber();
    expect(nextSeconds! * 1000 - Date.now()).toBeGreaterThan(30_000); // …for when the bucket has refilled (about a minute)
    const blocks = await events(intent.id, 'RATE_LIMIT_BLOCK');
    expect(blocks).toHaveLength(1);
    expect(blocks[0]).toMatchObject({ metadata: expect.objectContaining({ refusals: [expect.objectContaining({ scope: 'agent', key: 'scripted', limit: 'requests' })] }) });
    await cancel(handle);
  });
});

describe('budgets', () => {
  test('the day budget: the call that would exceed it is denied with an event; settled spend stays within it', async () => {
    const before = await committedToday();
    const budget = addUsd(before, '0.25'); // two calls of at most $0.10 fit, the third does not
    await withWorker({ safety: safety({ dayBudgetUsd: budget, agentDayBudgetUsd: '0' }) }, async (h) => {
      const intent = intentFor(script({ model: 'day-budget', costUsd: 0.1 }), { maxCallUsd: '0.10' });
      const handle = await startIntent(world.client, intent, h.queue);
      expect(await failureOf(handle)).toContain('BUDGET_EXCEEDED');
      expect(h.agentCalls()).toBe(3); // the third stops at its reservation, before its agent runs
      expect(await costRows(intent.id)).toHaveLength(2);
      const denied = await events(intent.id, 'BUDGET_RESERVATION_DENIED');
      expect(denied).toHaveLength(1);
      expect(denied[0]).toMatchObject({ severity: 'high', breaker_id: 'day-budget' });
      const spend = await world.ledger.daySpend(today());
      expect(spend.reservedUsd).toBe('0.000000'); // every reservation settled or released
      expect(subUsd(spend.settledUsd, before)).toBe('0.200000');
      expect(compareUsd(spend.settledUsd, budget)).toBeLessThanOrEqual(0);
    });
  });

  test('several intents racing against one day budget never settle more than it', async () => {
    const before = await committedToday();
    const budget = addUsd(before, '0.55');
    await withWorker({ safety: safety({ dayBudgetUsd: budget, agentDayBudgetUsd: '0' }) }, async (h) => {
      const intents = Array.from({ length: 4 }, () => intentFor(script({ model: 'race', costUsd: 0.1 }), { maxCallUsd: '0.10' }));
      const handles = await Promise.all(intents.map((intent) => startIntent(world.client, intent, h.queue)));
      const outcomes = await Promise.all(handles.map(failureOf));
      for (const types of outcomes) expect(types).toContain('BUDGET_EXCEEDED');
      expect(h.agentCalls()).toBe(9); // 5 paid, 4 refused at their reservation
      expect((await world.pool.query('SELECT count(*)::int AS n FROM cost_events WHERE intent_id = ANY($1)', [intents.map((i) => i.id)])).rows[0].n).toBe(5);
      const spend = await world.ledger.daySpend(today());
      expect(spend.reservedUsd).toBe('0.000000');
      expect(subUsd(spend.settledUsd, before)).toBe('0.500000');
      expect(compareUsd(spend.settledUsd, budget)).toBeLessThanOrEqual(0);
      const denied = await world.pool.query(`SELECT count(*)::int AS n FROM safety_events WHERE event_type = 'BUDGET_RESERVATION_DENIED' AND intent_id = ANY($1)`, [intents.map((i) => i.id)]);
      expect(denied.rows[0].n).toBe(4);
    });
  });

  test("an agent's day budget across intents: the call that would exceed it is denied with COST_BUDGET_EXCEEDED", async () => {
    const before = await agentCommittedToday('scripted');
    await withWorker({ safety: safety({ dayBudgetUsd: '0', agentDayBudgetUsd: addUsd(before, '0.25') }) }, async (h) => {
      const intent = intentFor(script({ model: 'agent-budget', costUsd: 0.1 }), { maxCallUsd: '0.10' });
      const handle = await startIntent(world.client, intent, h.queue);
      expect(await failureOf(handle)).toContain('BUDGET_EXCEEDED');
      expect(h.agentCalls()).toBe(3);
      expect(subUsd(await agentCommittedToday('scripted'), before)).toBe('0.200000');
      const exceeded = await events(intent.id, 'COST_BUDGET_EXCEEDED');
      expect(exceeded).toHaveLength(1);
      expect(exceeded[0]).toMatchObject({ severity: 'high', breaker_id: 'agent-day-budget', reason: expect.stringContaining('agent scripted spent') });
    });
  });
});

describe('budgets against the real maximum of each call', () => {
  let server: ModelServer;
  beforeAll(async () => {
    server = await startModelServer();
  });
  afterAll(async () => {
    await server?.close();
  });
  beforeEach(() => {
    server.requests.length = 0;
  });

  const json = (value: unknown): string => `\n\`\`\`json\n${JSON.stringify(value)}\n\`\`\`\n`;
  const TRIAGE = `Adds slugify.${json({ risk: 'LOW', confidence: 0.9, affectedPaths: ['lib/strings.js'], rationale: 'one pure function', predicted: { files: 1, lines: 12 } })}`;
  const ANSWERS: Record<string, string> = { triage: TRIAGE, lld: SAMPLE_LLD, spec: SAMPLE_SPEC };
  /** $10 / $30 per million tokens: 40k output tokens cost $1.20. */
  const PRICEY = { 'pricey-model': { inputUsdPerMillion: '10', outputUsdPerMillion: '30' } };

  function httpIntent(maxTokens: number, limits: Record<string, unknown> = {}): IntentInput {
    n += 1;
    return {
      id: `as${n}-${Date.now()}`,
      goal: 'Add slugify',
      repoPath: makeSampleRepo(),
      paths: ['lib/**'],
      agent: { kind: 'anthropic', model: 'pricey-model', baseUrl: server.url, maxTokens },
      limits: { cooldown: '0s', ...limits },
    } as IntentInput;
  }

  const sumOf = (rows: Array<{ usd: string }>): string => sumUsd(rows.map((r) => r.usd));

  test('a $1 day budget, two intents racing, calls dearer than maxCallUsd: settled spend never passes $1, and cost_events agree', async () => {
    const before = await committedToday();
    const budget = addUsd(before, '1');
    // Each call really costs $0.46 (1k in, 15k out), far over maxCallUsd $0.10; its maximum (20k output) is over $0.60.
    server.respond = (request) => ({ text: ANSWERS[stageOf(request.prompt)] ?? 'ok', usage: { input: 1000, output: 15_000 } });
    await withWorker({ safety: safety({ dayBudgetUsd: budget, agentDayBudgetUsd: '0', pricing: PRICEY }) }, async (h) => {
      const intents = [httpIntent(20_000, { maxCallUsd: '0.10' }), httpIntent(20_000, { maxCallUsd: '0.10' })];
      const handles = await Promise.all(intents.map((intent) => startIntent(world.client, intent, h.queue)));
      for (const types of await Promise.all(handles.map(failureOf))) expect(types).toContain('BUDGET_EXCEEDED');
      const spend = await world.ledger.daySpend(today());
      expect(spend.reservedUsd).toBe('0.000000');
      expect(compareUsd(spend.settledUsd, budget)).toBeLessThanOrEqual(0);
      // Every settled call is in cost_events, at the same amount: the day budget and `warden costs` agree.
      const rows = (await Promise.all(intents.map((i) => costRows(i.id)))).flat();
      expect(rows.length).toBeGreaterThanOrEqual(1);
      expect(rows.every((r) => r.usd === '0.460000')).toBe(true);
      expect(sumOf(rows)).toBe(subUsd(spend.settledUsd, before));
      const denied = await world.pool.query(`SELECT reason FROM safety_events WHERE event_type = 'BUDGET_RESERVATION_DENIED' AND intent_id = ANY($1)`, [intents.map((i) => i.id)]);
      expect(denied.rows.length).toBeGreaterThanOrEqual(2);
      expect(denied.rows[0].reason).toMatch(/this call may cost up to \$0\.6\d{5}/);
    });
  });

  test('an intent budget of $5 with an expensive model: the 80% warning fires, and spend never passes $5', async () => {
    // Each call costs $1.37 (2k in, 45k out); its maximum (50k output) is over $1.50. Three fit, the fourth would pass $5.
    server.respond = (request) => ({ text: ANSWERS[stageOf(request.prompt)] ?? 'ok', usage: { input: 2000, output: 45_000 } });
    await withWorker({ safety: safety({ dayBudgetUsd: '0', agentDayBudgetUsd: '0', pricing: PRICEY }) }, async (h) => {
      const intent = { ...httpIntent(50_000, { budgetUsd: '5' }), gates: { 'cost-overrun': { enabled: false } } } as IntentInput;
      const handle = await startIntent(world.client, intent, h.queue);
      const error = await handle.result().then(
        () => undefined,
        (e: unknown) => e as Error & { cause?: Error },
      );
      expect(error?.cause?.message).toMatch(/^COST_BUDGET_EXCEEDED: spent \$4\.110000 of the intent's \$5\.000000 budget; this call may cost up to \$1\.5\d+, which would pass it/);
      expect(server.requests.filter((r) => r.body.model === 'pricey-model')).toHaveLength(3);
      const rows = await costRows(intent.id);
      expect(sumOf(rows)).toBe('4.110000');
      const types = (await events(intent.id)).map((e) => e.event_type);
      expect(types).toContain('COST_WARNING');
      expect(types.indexOf('COST_WARNING')).toBeLessThan(types.indexOf('COST_BUDGET_EXCEEDED'));
      expect((await events(intent.id, 'COST_BUDGET_EXCEEDED'))[0]).toMatchObject({ breaker_id: 'intent-budget', severity: 'high' });
    });
  });

  test('a paid call whose answer is then refused is counted: cost_events, the settled reservation and activity_runs agree', async () => {
    const before = await committedToday();
    // No JSON block, twice (the answer and its repair): $2.24 each at 200k in, 8k out.
    server.respond = () => ({ text: 'no JSON here', usage: { input: 200_000, output: 8000 } });
    await withWorker({ safety: safety({ dayBudgetUsd: '0', agentDayBudgetUsd: '0', pricing: PRICEY }) }, async (h) => {
      const intent = httpIntent(8000, { budgetUsd: '0' });
      const handle = await startIntent(world.client, intent, h.queue);
      expect(await failureOf(handle)).toContain('INVALID_STRUCTURED_OUTPUT');
      expect(server.requests).toHaveLength(2);
      const rows = await costRows(intent.id);
      expect(rows.map((r) => [r.stage, r.model_id, r.usd, r.input_tokens, r.output_tokens])).toEqual([
        ['triage', 'pricey-model', '2.240000', '200000', '8000'],
        ['triage', 'pricey-model', '2.240000', '200000', '8000'],
      ]);
      const spend = await world.ledger.daySpend(today());
      expect(subUsd(addUsd(spend.settledUsd, spend.reservedUsd), before)).toBe('4.480000');
      const runs = await world.ledger.activityRuns(handle.workflowId);
      expect(runs.filter((r) => r.activityType === 'runAgentStage').map((r) => [r.outcome, r.spendUsd])).toEqual([['failed', '4.480000']]);
    });
  });

  test('an unknown model is refused before any request: UNKNOWN_MODEL, nothing sent, nothing reserved', async () => {
    await withWorker({ safety: safety({ pricing: PRICEY }) }, async (h) => {
      const intent = httpIntent(1000);
      const handle = await startIntent(world.client, { ...intent, agent: { kind: 'anthropic', model: 'local-qwen', baseUrl: server.url } } as IntentInput, h.queue);
      expect(await failureOf(handle)).toContain('UNKNOWN_MODEL');
      expect(server.requests).toHaveLength(0);
      const reserved = await world.pool.query('SELECT count(*)::int AS n FROM budget_reservations WHERE intent_id = $1', [intent.id]);
      expect(reserved.rows[0].n).toBe(0);
    });
  });

  test('a script reporting more than its declared cap: recorded at its real cost, and the intent halts with COST_BUDGET_EXCEEDED', async () => {
    const before = await committedToday();
    await withWorker({ safety: safety({ dayBudgetUsd: '0', agentDayBudgetUsd: '0' }) }, async (h) => {
      const intent = intentFor(script({ model: 'scripted', costUsd: 0.9 }), { maxCallUsd: '0.50' });
      const handle = await startIntent(world.client, intent, h.queue);
      const error = await handle.result().then(
        () => undefined,
        (e: unknown) => e as Error & { cause?: Error },
      );
      expect(error?.cause?.message).toMatch(/^COST_BUDGET_EXCEEDED: the triage call reported \$0\.900000, more than the \$0\.500000 reserved for it/);
      expect((await costRows(intent.id)).map((r) => r.usd)).toEqual(['0.900000']);
      const spend = await world.ledger.daySpend(today());
      expect(subUsd(addUsd(spend.settledUsd, spend.reservedUsd), before)).toBe('0.900000');
      expect((await events(intent.id, 'COST_BUDGET_EXCEEDED'))[0]).toMatchObject({ breaker_id: 'call-cap', severity: 'high' });
    });
  });

  test('a command agent reports no usage: counted at its declared cap, with an "unmetered" COST_WARNING, never silently $0', async () => {
    await withWorker({ safety: safety({ dayBudgetUsd: '0', agentDayBudgetUsd: '0' }) }, async (h) => {
      const intent = { ...intentFor(script({ model: 'unused' }), { maxCallUsd: '0.05', totalAttempts: 1 }), agent: { kind: 'command', command: `cat >/dev/null; printf '%s' '${TRIAGE.replace(/'/g, '')}'` } } as IntentInput;
      const handle = await startIntent(world.client, intent, h.queue);
      expect(await failureOf(handle)).toContain('SAFETY_HALT'); // the attempt cap of 1 stops it after triage
      expect((await costRows(intent.id)).map((r) => [r.stage, r.model_id, r.usd])).toEqual([['triage', 'command', '0.050000']]);
      const warning = (await events(intent.id, 'COST_WARNING')).find((e) => (e.metadata as { unmetered?: boolean }).unmetered);
      expect(warning).toMatchObject({ severity: 'medium', reason: expect.stringMatching(/^unmetered: the triage agent reports no token usage; 1 call\(s\) counted at the declared \$0\.050000/) });
    });
  });
});

describe('cascade', () => {
  // A continuation offer plus a scope expansion.
  const HIGH =
    'The limiter is in `src/upload/limiter.ts`. Would you like me to add the same limiter to the download endpoint as well? ' +
    'While I was in `auth.ts` I also went ahead and replaced the hand-rolled JWT parsing with `jose`.';
  // Completion, scope expansion, a pivot and an offer.
  const CRITICAL =
    'All 31 tests pass ✅. While I was at it I took the liberty of upgrading express to v5 and converting the routes to async handlers. ' +
    "Next, I'll move on to the billing service refactor. Should I also migrate the remaining callback-style code there?";

  test('two categories of cascade phrases: one CASCADE_DETECTED high event, written once though its first write was retried', async () => {
    expect(detectCascade(HIGH).level).toBe('HIGH');
    // The ledger writes the event but the reply is lost once: the retry must add nothing.
    class LosesFirstReply extends Ledger {
      lost = false;
      override async recordSafetyEvent(input: SafetyEventInput): Promise<boolean> {
        const inserted = await super.recordSafetyEvent(input);
        if (!this.lost && input.eventType === 'CASCADE_DETECTED') {
          this.lost = true;
          throw new Error('Connection terminated unexpectedly');
        }
        return inserted;
      }
    }
    const ledger = new LosesFirstReply(world.pool);
    await withWorker({ ledger }, async (h) => {
      const intent = intentFor(script({ model: 'cascade-high', triage: { output: HIGH } }));
      const handle = await startIntent(world.client, intent, h.queue);
      const [event] = await waitFor(async () => {
        const found = await events(intent.id, 'CASCADE_DETECTED');
        return found.length ? found : undefined;
      });
      expect(ledger.lost).toBe(true);
      // HIGH does not halt: the intent waits at the human-only cascade gate, and goes on once approved.
      await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'cascade' ? true : undefined), 30_000, 'the cascade gate');
      expect(h.agentCalls()).toBe(1);
      await handle.signal(decideSignal, { gate: 'cascade', decision: 'approve', by: 'tester' });
      await waitFor(async () => (h.agentCalls() >= 2 ? true : undefined), 30_000, 'the intent to go on');
      await cancel(handle);
      expect(await events(intent.id, 'CASCADE_DETECTED')).toHaveLength(1);
      expect(event).toMatchObject({ severity: 'high', suggestion: expect.stringContaining('A human must decide the next gate') });
      const meta = event!.metadata as { workflowId: string; runId: string; activityId: string; attempt: number; level: string };
      expect(meta.level).toBe('HIGH');
      expect(event!.id).toBe(safetyEventId(meta, 'CASCADE_DETECTED'));
    });
  });

  test('three categories: CASCADE_DETECTED critical, and the intent halts with SAFETY_HALT', async () => {
    expect(detectCascade(CRITICAL).level).toBe('CRITICAL');
    await withWorker({}, async (h) => {
      const intent = intentFor(script({ model: 'cascade-critical', triage: { output: CRITICAL } }));
      const handle = await startIntent(world.client, intent, h.queue);
      expect(await failureOf(handle)).toContain('SAFETY_HALT');
      expect(h.agentCalls()).toBe(1);
      const found = await events(intent.id, 'CASCADE_DETECTED');
      expect(found).toEqual([expect.objectContaining({ severity: 'critical' })]);
      const runs = await world.ledger.activityRuns(`intent-${intent.id}`);
      // The halted call was paid for: its spend is in the audit.
      expect(runs.find((r) => r.activityType === 'runAgentStage')).toMatchObject({ outcome: 'failed', failureType: 'SAFETY_HALT', spendUsd: '0.004000' });
    });
  });
});

test('the error-rate breaker: warning once, then critical; new agent calls then fail fast with ERROR_RATE_CRITICAL', async () => {
  const config = safety({ errorRate: { minimumCalls: 4, window: '10m' } });
  await withWorker({ safety: config }, async (h) => {
    // Successful calls first, up to the merge gate.
    const good = intentFor(script({ model: 'healthy' }));
    const goodHandle = await startIntent(world.client, good, h.queue);
    await waitFor(async () => ((await goodHandle.query(stateQuery)).pendingGate ? true : undefined), 60_000, 'the merge gate');
    await cancel(goodHandle);
    const successes = h.agentCalls();

    // Then failures, on another endpoint (the circuit stays closed), until new calls fail fast.
    const broken = failingScript('error-rate');
    const failingIds: string[] = [];
    let blocked: Handle | undefined;
    for (let failures = 0; !blocked; ) {
      expect(failures).toBeLessThan(successes); // it trips at 25%, well before half the calls fail
      const intent = intentFor(broken);
      const handle = await startIntent(world.client, intent, h.queue);
      const calls = h.agentCalls();
      const outcome = await waitFor(async () => {
        if ((await handle.describe()).status.name !== 'RUNNING') return 'ended' as const;
        const pending = ((await handle.describe()).raw.pendingActivities ?? []) as PendingActivity[];
        return pending.some((p) => p.lastFailure?.applicationFailureInfo?.type === 'ERROR_RATE_CRITICAL') ? ('blocked' as const) : undefined;
      }, 30_000, 'the intent to fail or be blocked');
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

    const rows = await world.pool.query(
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
      const handle = await startIntent(world.client, intent, h.queue);
      await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 60_000, 'the merge gate');
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
      const runs = await world.ledger.activityRuns(`intent-${intent.id}`);
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
      const spend = await world.ledger.daySpend(today());
      expect(spend.reservedUsd).toBe('0.000000');
    },
  );
});

test("every safety event written by the worker's interceptor is one row per decision", async () => {
  const duplicates = await world.pool.query(
    `SELECT event_type, metadata->>'workflowId' AS w, metadata->>'runId' AS r, metadata->>'activityId' AS a, metadata->>'attempt' AS n,
            coalesce(breaker_id, '') AS b, count(*)::int AS copies
       FROM safety_events WHERE metadata ? 'activityId'
      GROUP BY 1, 2, 3, 4, 5, 6 HAVING count(*) > 1`,
  );
  expect(duplicates.rows).toEqual([]);
  const total = await world.pool.query(`SELECT count(*)::int AS n FROM safety_events WHERE metadata ? 'activityId'`);
  expect(total.rows[0].n).toBeGreaterThan(5);
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
  expect(await world.ledger.recordActivityRun(row)).toBe(true);
  expect(await world.ledger.recordActivityRun({ ...row, outcome: 'failed' })).toBe(false); // same attempt: no-op
  expect(await world.ledger.activityRuns('intent-old')).toEqual([expect.objectContaining({ durationMs: 1500, outcome: 'completed', spendUsd: '0.500000' })]);
  await expect(world.pool.query(`UPDATE activity_runs SET outcome = 'failed'`)).rejects.toThrow(/append-only/);
  await expect(world.pool.query('DELETE FROM activity_runs')).rejects.toThrow(/append-only/);
  const recent = (await world.pool.query('SELECT count(*)::int AS n FROM activity_runs')).rows[0].n - 1;
  const deleted = await world.ledger.cleanup(90);
  expect(deleted.activity_runs).toBe(1);
  expect(await world.ledger.activityRuns('intent-old')).toEqual([]);
  expect((await world.pool.query('SELECT count(*)::int AS n FROM activity_runs')).rows[0].n).toBe(recent);
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
    expect(await agentEndpoint({ kind: 'command', command: '/usr/bin/claude -p', promptVia: 'stdin', timeout: '30m', maxOutputBytes: 1000, sandbox: 'auto', network: false })).toEqual({
      agentId: 'command',
      modelId: 'command',
      endpoint: 'command/claude',
    });
  });
});
