import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import pino from 'pino';
import type { WardenActivities } from '../../src/activities';
import { resolveConfig } from '../../src/config/load';
import type { ConfigFile, WorkerSafetyConfig } from '../../src/config/schema';
import type { Ledger } from '../../src/ledger/ledger';
import { addUsd } from '../../src/shared/money';
import type { IntentInput } from '../../src/shared/intent';
import { createRedactor } from '../../src/shared/redact';
import type { KillSwitchOptions } from '../../src/workers/interceptors/agent-safety';
import { createWardenWorker } from '../../src/workers/warden-worker';
import type { intentWorkflow } from '../../src/workflows';
import { DEMO_SCRIPT, createTestWorld, makeSampleRepo, waitFor, writeScript, type TestWorld } from '../helpers/env';

/*
 * What the agent-safety tests share: a test world of their own per file (its own ledger
 * database, so budgets and event counts see only that file's runs), workers with a given safety
 * config, and readers of what the interceptor wrote.
 */

export type Handle = WorkflowHandle<typeof intentWorkflow>;

let world: TestWorld | undefined;

/** Starts this file's test world before its tests and closes it after them; returns a reader of it. */
export function useSafetyWorld(name: string): () => TestWorld {
  beforeAll(async () => {
    world = await createTestWorld(name);
  });
  afterAll(async () => {
    await world?.close();
  });
  return currentWorld;
}

function currentWorld(): TestWorld {
  if (!world) throw new Error('no test world: call useSafetyWorld() at the top of the test file');
  return world;
}

/** The demo script with no delays; `model` names the endpoint, `costUsd` (if given) is every call's cost. */
export function script(options: { model: string; costUsd?: number; triage?: Record<string, unknown> }): string {
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

export function failingScript(model: string): string {
  return writeScript({ model, stages: { triage: [{ output: '', fail: `${model} is down` }] } });
}

let n = 0;
/** A fresh intent id. */
export function nextIntentId(): string {
  n += 1;
  return `as${n}-${Date.now()}`;
}

export function intentFor(scriptPath: string, limits: Record<string, unknown> = {}): IntentInput {
  return {
    id: nextIntentId(),
    goal: 'Add slugify',
    repoPath: makeSampleRepo(),
    paths: ['lib/**'],
    agent: { kind: 'scripted', scriptPath },
    limits: { cooldown: '0s', ...limits },
  } as IntentInput;
}

/** The default worker config with `overrides`, validated as a config file would be. */
export function safety(overrides: NonNullable<ConfigFile['worker']> = {}): WorkerSafetyConfig {
  return resolveConfig({ limits: { cooldown: '0s' }, worker: overrides }).worker;
}

export interface Harness {
  readonly queue: string;
  /** Agent calls that got past the interceptor (the activity itself ran). */
  readonly agentCalls: () => number;
  readonly logs: () => Record<string, unknown>[];
}

let queues = 0;
/** A worker of its own (own task queue) with this safety config, kill switches, ledger and faults. */
export async function withWorker<T>(
  options: {
    safety?: WorkerSafetyConfig;
    killSwitch?: KillSwitchOptions;
    ledger?: Ledger;
    wrap?: (activities: WardenActivities) => WardenActivities;
  },
  fn: (h: Harness) => Promise<T>,
): Promise<T> {
  const world = currentWorld();
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
    sweepSchedule: false,
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
export function failureTypes(error: unknown): string[] {
  const types: string[] = [];
  for (let e = error as { cause?: unknown } | undefined; e; e = e.cause as typeof e) {
    if (e instanceof ApplicationFailure && e.type) types.push(e.type);
  }
  return types;
}

/** Every message on the failure's cause chain, outermost first. */
export function failureMessages(error: unknown): string[] {
  const messages: string[] = [];
  for (let e = error as { cause?: unknown; message?: unknown } | undefined; e; e = e.cause as typeof e) {
    if (typeof e.message === 'string') messages.push(e.message);
  }
  return messages;
}

export async function failureOf(handle: Handle): Promise<string[]> {
  const error = await handle.result().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeDefined();
  return failureTypes(error);
}

export interface PendingActivity {
  activityType?: { name?: string };
  attempt?: number;
  lastFailure?: { message?: string; applicationFailureInfo?: { type?: string; nonRetryable?: boolean } };
  nextAttemptScheduleTime?: { seconds?: { toNumber(): number } | number };
  lastAttemptCompleteTime?: { seconds?: { toNumber(): number } | number };
}

/** Waits until the intent's pending agent activity last failed with `type`; returns it. */
export async function pendingFailure(handle: Handle, type: string): Promise<PendingActivity> {
  return waitFor(
    async () => {
      const pending = ((await handle.describe()).raw.pendingActivities ?? []) as PendingActivity[];
      return pending.find((p) => p.activityType?.name === 'runAgentStage' && p.lastFailure?.applicationFailureInfo?.type === type);
    },
    120_000, // a hang guard: seconds on an idle machine
    `a runAgentStage attempt failing with ${type}`,
  );
}

export async function cancel(handle: Handle): Promise<void> {
  await handle.cancel();
  await handle.result().catch(() => undefined);
}

export async function events(intentId: string, type?: string): Promise<Record<string, unknown>[]> {
  const result = await currentWorld().pool.query(
    `SELECT id, event_type, severity, reason, suggestion, breaker_id, metadata FROM safety_events
      WHERE intent_id = $1 AND ($2::text IS NULL OR event_type = $2) ORDER BY recorded_at`,
    [intentId, type ?? null],
  );
  return result.rows;
}

export const today = (): string => new Date().toISOString().slice(0, 10);

/** An agent's settled plus still-reserved spend of today: what its day budget is judged on. */
export async function agentCommittedToday(agentId: string): Promise<string> {
  const { rows } = await currentWorld().pool.query(
    `SELECT round(coalesce(sum(coalesce(s.actual_usd, r.amount_usd)), 0), 6)::text AS usd
       FROM budget_reservations r LEFT JOIN budget_settlements s ON s.reservation_id = r.id
      WHERE r.granted AND r.day = $1 AND r.agent_id = $2`,
    [today(), agentId],
  );
  return rows[0].usd;
}

export async function costRows(intentId: string): Promise<Array<{ stage: string; model_id: string; usd: string; input_tokens: string; output_tokens: string }>> {
  const { rows } = await currentWorld().pool.query(
    'SELECT stage, model_id, usd::text AS usd, input_tokens::text, output_tokens::text FROM cost_events WHERE intent_id = $1 ORDER BY timestamp, id',
    [intentId],
  );
  return rows;
}

/** Settled plus still-reserved spend of today, across everything this file ran so far. */
export async function committedToday(): Promise<string> {
  const spend = await currentWorld().ledger.budget.daySpend(today());
  return addUsd(spend.settledUsd, spend.reservedUsd);
}

/**
 * No decision of the interceptor was written twice, and this file's tests made enough of them to
 * tell. A budget's warnings are one decision per share of it reached: one settlement that passes
 * both 80 % and 90 % writes two.
 */
export async function expectOneRowPerDecision(): Promise<void> {
  const duplicates = await currentWorld().pool.query(
    `SELECT event_type, metadata->>'workflowId' AS w, metadata->>'runId' AS r, metadata->>'activityId' AS a, metadata->>'attempt' AS n,
            coalesce(breaker_id, '') AS b, coalesce(metadata->>'share', '') AS s, count(*)::int AS copies
       FROM safety_events WHERE metadata ? 'activityId'
      GROUP BY 1, 2, 3, 4, 5, 6, 7 HAVING count(*) > 1`,
  );
  expect(duplicates.rows).toEqual([]);
  const total = await currentWorld().pool.query(`SELECT count(*)::int AS n FROM safety_events WHERE metadata ? 'activityId'`);
  expect(total.rows[0].n).toBeGreaterThan(5);
}
