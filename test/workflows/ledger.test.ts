import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { WardenWorker } from '../../src/workers/host-worker';
import type pg from 'pg';
import pino from 'pino';
import type { WardenActivities } from '../../src/activities';
import { intentHandle, startIntent } from '../../src/client/intents';
import { Ledger } from '../../src/ledger/ledger';
import { migrate } from '../../src/ledger/migrate';
import { LEDGER_TIMEOUTS, openDatabase, startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/ledger/database';
import { findFreePort } from '../../src/shared/ports';
import { parseProcStat } from '../../src/shared/proc-stat';
import type { IntentInput } from '../../src/shared/intent';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { freshDatabase, describeOnBackends, type FreshDatabase } from '../helpers/database';
import { demoScript, demoStages, git, makeSampleRepo, useTestWorld, waitFor } from '../helpers/env';
import { createLogger } from '../../src/runtime/logger';
import { answeringDesignStages } from '../../src/client/sample-repo';

/** Secrets the agent leaks; every one holds PLANTED, which no other text of a run contains. */
const FAKE_KEY = 'sk-fake-0123456789abcdefghij-PLANTED';
const SECRET_ENV = {
  WARDEN_FAKE_SERVICE_API_KEY: FAKE_KEY,
  // A name with a KEY segment that does not end in it, and a value of no known shape.
  OTHER_API_KEY_2: 'plainkeyPLANTED9876',
  WARDEN_FAKE_TOKEN: 'tokenvaluePLANTED4321',
  // Quotes and backslashes: escaped in JSON, so matching the raw value alone misses them.
  WARDEN_FAKE_PASSWORD: 'pa"ss\\wordPLANTED-777',
};
Object.assign(process.env, SECRET_ENV); // before any redactor is built
/** Credentials Warden is not told of, known by their shape only. */
const SHAPED = ['Authorization: Token rawtokenPLANTED5555', '"X-Api-Key": "xapikeyPLANTED1234"', 'Bearer abcdefghijklmnopqrstuvwxyzPLANTED'];
const MARKER = 'PLANTED';

const fastScript = demoScript();

const world = useTestWorld('ledger');

let n = 0;
function intentFor(repoPath: string, overrides: Partial<IntentInput> = {}): IntentInput {
  n += 1;
  return {
    id: `l${n}-${Date.now()}`,
    goal: 'Add slugify',
    repoPath,
    paths: ['lib/**'],
    agent: { kind: 'scripted', scriptPath: fastScript },
    ...overrides,
    limits: { cooldown: '0s', ...overrides.limits },
  };
}

async function atGate(id: string): Promise<void> {
  await waitFor(async () => ((await intentHandle(world().client, id).query(stateQuery)).pendingGate ? true : undefined), 120_000, 'the gate');
}

async function rows(sql: string, params: unknown[] = []): Promise<Record<string, unknown>[]> {
  return (await world().pool.query(sql, params)).rows;
}

/** The history as text, payloads decoded (fetchHistory leaves them as bytes, which a search would miss). */
function historyText(history: unknown): string {
  return JSON.stringify(history, (key, value: unknown) => {
    // protobufjs's toJSON gives bytes as base64
    if (key === 'data' && typeof value === 'string') return Buffer.from(value, 'base64').toString('utf8');
    if (value instanceof Uint8Array) return Buffer.from(value).toString('utf8');
    const buffer = value as { type?: unknown; data?: unknown };
    if (buffer && buffer.type === 'Buffer' && Array.isArray(buffer.data)) return Buffer.from(buffer.data as number[]).toString('utf8');
    return value;
  });
}

/** A shell word that prints `text` without the text itself being in the command (nor the intent's input). */
function printed(text: string): string {
  return `"$(printf %s ${Buffer.from(text).toString('base64')} | base64 -d)"`;
}

// The ledger-level workflow tests run on every test backend; the rest of the file on the default.
describeOnBackends('the ledger on the %s PostgreSQL', (baseUrl, backend) => {
  const logLines: string[] = [];
  /** Fails `appendToLedger` once right after its rows were written: the retry must add nothing. */
  let failAfterFirstAppend = true;
  let database: FreshDatabase;
  let worker: WardenWorker;
  let running: Promise<void>;
  const queue = `ledger-${backend}-${process.pid}-${Date.now()}`;

  beforeAll(async () => {
    database = await freshDatabase(baseUrl);
    await migrate(database.pool);
    worker = await world().worker({
      taskQueue: queue,
      ledger: new Ledger(database.pool),
      // every log line of the worker, to look for the planted secrets and the bound ids
      logger: createLogger({
        level: 'debug',
        destination: new Writable({
          write(chunk: Buffer, _enc, done) {
            logLines.push(chunk.toString());
            done();
          },
        }),
      }),
      wrap: (activities: WardenActivities) => ({
        ...activities,
        async appendToLedger(batch) {
          const result = await activities.appendToLedger(batch);
          if (failAfterFirstAppend) {
            failAfterFirstAppend = false;
            throw new Error('injected: reply lost after the rows were written');
          }
          return result;
        },
      }),
    });
    running = worker.run();
  });
  afterAll(async () => {
    worker?.shutdown();
    await running;
    await database?.drop();
  });

  async function query(sql: string, params: unknown[] = []): Promise<Record<string, unknown>[]> {
    return (await database.pool.query(sql, params)).rows;
  }

  test('a merged intent leaves its whole story in the ledger, each row once, spend exact', async () => {
    const intent = intentFor(makeSampleRepo());
    const handle = await startIntent(world().client, intent, queue);
    await waitFor(async () => ((await handle.query(stateQuery)).pendingGate ? true : undefined), 120_000, 'the gate');
    await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'auditor' });
    await handle.result();
    expect(failAfterFirstAppend).toBe(false); // the retry-after-write fault fired

    const events = await query('SELECT event_type, stage FROM safety_events WHERE intent_id = $1 ORDER BY timestamp, event_type', [intent.id]);
    const types = events.map((e) => e.event_type);
    expect(types.filter((t) => t === 'INTENT_STARTED')).toHaveLength(1);
    expect(types.filter((t) => t === 'STAGE_COMPLETED')).toHaveLength(6); // triage, lld, spec, impl ×2, review
    expect(types.filter((t) => t === 'GATE_REQUESTED')).toHaveLength(1);
    expect(types.filter((t) => t === 'GATE_DECIDED')).toHaveLength(1);
    expect(types.filter((t) => t === 'INTENT_MERGED')).toHaveLength(1);
    expect(types.filter((t) => t === 'RISK_ASSESSED')).toHaveLength(1);
    expect(types.filter((t) => t === 'STAGE_STARTED')).toHaveLength(7); // the six above, and merge
    expect(types.filter((t) => t === 'TESTS_FAILED')).toHaveLength(1);
    expect(types.filter((t) => t === 'TESTS_PASSED')).toHaveLength(1);
    expect(types.filter((t) => t === 'TEST_PLAN_CHECKED')).toHaveLength(1); // after the passing run
    expect(events).toHaveLength(21);

    const costs = await query('SELECT stage, attempt, usd::text AS usd FROM cost_events WHERE intent_id = $1 ORDER BY timestamp', [intent.id]);
    expect(costs.map((c) => `${c.stage}#${c.attempt}`)).toEqual(['triage#1', 'lld#1', 'spec#1', 'impl#1', 'impl#2', 'review#1']);
    const [total] = await query('SELECT sum(usd)::text AS total FROM cost_events WHERE intent_id = $1', [intent.id]);
    expect(total!.total).toBe('0.051000');

    const gates = await query('SELECT gate, decision, decided_by AS "by", timed_out FROM gate_decisions WHERE intent_id = $1', [intent.id]);
    expect(gates).toEqual([{ gate: 'merge', decision: 'approve', by: 'auditor', timed_out: false }]);

    const timeline = await new Ledger(database.pool).queries.timeline(intent.id);
    expect(timeline[0]!.type).toBe('INTENT_STARTED');
    expect(timeline.at(-1)!.type).toBe('INTENT_MERGED');
    // In the ledger's order, each agent call's cost comes after the start of its own stage, and the gate's request before its decision.
    let startedStage: string | undefined;
    const costStages = timeline.flatMap((e) => {
      if (e.type === 'STAGE_STARTED') startedStage = e.stage;
      return e.type === 'COST' ? [{ stage: e.stage, startedStage }] : [];
    });
    expect(costStages).toHaveLength(6);
    for (const cost of costStages) expect(cost.startedStage).toBe(cost.stage);
    const order = timeline.map((e) => e.type);
    expect(order.indexOf('GATE_REQUESTED')).toBeLessThan(order.indexOf('GATE_DECISION'));

    // Every line written inside an activity of this run names the intent, and its attempt.
    const lines = logLines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.activity !== undefined && l.workflowId === `intent-${intent.id}`);
    const activities = new Set(lines.map((l) => l.activity));
    for (const name of ['checkIntent', 'appendToLedger', 'readLadder', 'prepareWorktree', 'runAgentStage', 'runTests', 'mergeIntent', 'recordLadderRun']) {
      expect(activities).toContain(name);
    }
    for (const line of lines) expect(line).toEqual(expect.objectContaining({ intentId: intent.id, attempt: expect.any(Number), activityAttempt: expect.any(Number) }));
    for (const line of lines.filter((l) => l.activity === 'runAgentStage')) expect(line).toEqual(expect.objectContaining({ stage: expect.any(String) }));
    // the injected failure: its retry is attempt 2
    expect(lines.some((l) => l.activity === 'appendToLedger' && l.attempt === 2)).toBe(true);
    expect(lines.some((l) => l.activity === 'runAgentStage' && l.msg === 'activity finished' && typeof l.durationMs === 'number' && l.outcome === 'completed')).toBe(true);
  });

  test('planted secrets appear nowhere: not in any ledger table, the logs, the workflow history, the lineage or git', async () => {
    const repo = makeSampleRepo();
    const leaks = [...Object.values(SECRET_ENV), ...SHAPED].map(printed).join(' ');
    // The agent leaks them on stdout (its artifact: lineage, later prompts, git) and stderr, and
    // review fails with them in its message.
    const command = answeringDesignStages(`if grep -q '^# Warden: review'; then echo ${leaks} >&2; exit 3; else echo using ${leaks}; fi`);
    const intent = intentFor(repo, { agent: { kind: 'command', command }, testCommand: 'true' });
    const handle = await startIntent(world().client, intent, queue);
    await handle.result().catch(() => undefined);
    const state = await handle.query(stateQuery);
    expect(state.status).toBe('failed');

    const history = historyText(await handle.fetchHistory());
    expect(history).not.toContain(MARKER);
    expect(history).toContain('[redacted]'); // it was there, and scrubbed

    const tables = await query(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1`);
    expect(tables.length).toBeGreaterThanOrEqual(9);
    let ledgerText = '';
    for (const { table_name: table } of tables) ledgerText += JSON.stringify(await query(`SELECT * FROM "${String(table)}"`));
    expect(ledgerText).toContain(intent.id);
    expect(ledgerText).not.toContain(MARKER);
    expect(ledgerText).toContain('[redacted]');

    const logs = logLines.join('');
    expect(logs).toContain(intent.id);
    expect(logs).not.toContain(MARKER);

    const lineage = execFileSync('grep', ['-r', '-c', 'redacted', state.lineagePath!], { encoding: 'utf8' });
    expect(lineage).toMatch(/:[1-9]/);
    expect(() => execFileSync('grep', ['-r', '-l', MARKER, state.lineagePath!])).toThrow(); // grep exits 1: not found
    const gitText = git(repo, 'log', '--all', '-p');
    expect(gitText).not.toContain(MARKER);
  });
});

test('refused decisions and a gate timeout are safety events; the timeout escalates then rejects', async () => {
  // Long enough that the two decisions below reach the gate before it times out, however slow the machine.
  const intent = intentFor(makeSampleRepo(), { limits: { gateTimeout: '15s' } });
  const handle = await startIntent(world().client, intent, world().taskQueue);
  await atGate(intent.id);
  await handle.signal(decideSignal, { gate: 'merge', decision: 'maybe', by: 'x' });
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve' });
  const outcome = await handle.result();
  expect(outcome.status).toBe('rejected');
  const events = await rows('SELECT event_type, severity, reason FROM safety_events WHERE intent_id = $1', [intent.id]);
  expect(events.filter((e) => e.event_type === 'DECISION_REFUSED')).toHaveLength(2);
  expect(events.find((e) => e.event_type === 'GATE_ESCALATED')).toMatchObject({ severity: 'high' });
  expect(events.filter((e) => e.event_type === 'INTENT_REJECTED')).toHaveLength(1);
  const gates = await rows('SELECT decision, decided_by AS "by", timed_out FROM gate_decisions WHERE intent_id = $1', [intent.id]);
  expect(gates).toEqual([{ decision: 'reject', by: 'warden', timed_out: true }]);
});

/**
 * An embedded PostgreSQL of its own, with a worker (own task queue) whose ledger it is, for the
 * tests that take the server away. The pool is Warden's own (openDatabase), timeouts included.
 */
async function withOwnLedgerServer(fn: (ctx: { server: EmbeddedPostgres; restart(): Promise<void>; pool: pg.Pool; queue: string }) => Promise<void>): Promise<void> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'warden-pg-fault-'));
  const port = await findFreePort();
  let server = await startEmbeddedPostgres({ dataDir, port });
  const database = await openDatabase({ databaseUrl: server.url, dataDir });
  const queue = `${world().taskQueue}-pgfault-${Date.now()}`;
  const worker = await world().worker({ taskQueue: queue, ledger: new Ledger(database.pool), logger: pino({ level: 'silent' }) });
  const running = worker.run();
  try {
    await fn({
      get server() {
        return server;
      },
      restart: async () => {
        server = await startEmbeddedPostgres({ dataDir, port });
      },
      pool: database.pool,
      queue,
    });
  } finally {
    worker.shutdown();
    await running;
    await database.close();
    await server.stop();
  }
}

/** The intent's safety events by type, and its cost rows: each must be there exactly once. */
async function countsOf(pool: pg.Pool, intentId: string): Promise<{ events: Record<string, number>; costs: number }> {
  const { rows: counts } = await pool.query<{ event_type: string; n: number }>(
    'SELECT event_type, count(*)::int AS n FROM safety_events WHERE intent_id = $1 GROUP BY event_type ORDER BY event_type',
    [intentId],
  );
  const { rows: costRows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM cost_events WHERE intent_id = $1', [intentId]);
  return { events: Object.fromEntries(counts.map((r) => [r.event_type, r.n])), costs: costRows[0]!.n };
}

const MERGED_STORY = {
  events: { GATE_DECIDED: 1, GATE_REQUESTED: 1, INTENT_MERGED: 1, INTENT_STARTED: 1, RISK_ASSESSED: 1, STAGE_COMPLETED: 6, STAGE_STARTED: 7, TESTS_FAILED: 1, TESTS_PASSED: 1, TEST_PLAN_CHECKED: 1 },
  costs: 6,
};

/** An intent whose lld takes 2.5 s, so the server can be taken away while it runs. */
function slowLldIntent(): IntentInput {
  const slowLld = demoScript({ lld: [{ ...demoStages().lld![0], delayMs: 2500 }] });
  return intentFor(makeSampleRepo(), { agent: { kind: 'scripted', scriptPath: slowLld } });
}

test('with PostgreSQL down mid-run the intent waits, then finishes when it is back, and no event is lost', async () => {
  await withOwnLedgerServer(async (own) => {
    const intent = slowLldIntent();
    const handle = await startIntent(world().client, intent, own.queue);
    await waitFor(async () => ((await handle.query(stateQuery)).attempts.lld ? true : undefined), 120_000, 'lld to start');
    await own.server.stop();
    // The intent cannot write its ledger rows now: it must wait, not fail and not skip them. The
    // server stays away 5 s (at least: a busy machine only makes it longer), time enough for an
    // intent that failed or went on without its rows to show it; what is checked then holds
    // however far the intent got meanwhile.
    await new Promise((r) => setTimeout(r, 5000));
    const waiting = await handle.query(stateQuery);
    expect(waiting.status).toBe('running');
    expect(waiting.stage).toBe('lld'); // lld cannot end without its ledger rows: the intent waits
    expect(waiting.pendingGate).toBeUndefined();
    await own.restart();
    await atGateOn(handle);
    await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
    expect((await handle.result()).status).toBe('merged');
    expect(await countsOf(own.pool, intent.id)).toEqual(MERGED_STORY);
  });
});

/** The server's processes: the postmaster and its children (backends, checkpointer, …). */
function serverProcesses(postmasterPid: number): number[] {
  const children = readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8')).ppid === postmasterPid;
      } catch {
        return false; // gone meanwhile
      }
    })
    .map(Number);
  return [postmasterPid, ...children];
}

const HEARTBEAT_TIMEOUT_MS = 10_000; // runAgentStage's, in intent-workflow.ts

test('with PostgreSQL frozen mid-run (answering nothing, refusing nothing) the intent waits, then continues, each event once', async () => {
  await withOwnLedgerServer(async (own) => {
    const intent = slowLldIntent();
    const handle = await startIntent(world().client, intent, own.queue);
    await waitFor(async () => ((await handle.query(stateQuery)).attempts.lld ? true : undefined), 120_000, 'lld to start');
    // SIGSTOP: connections are still accepted by the kernel, but nothing is ever answered.
    const frozen = serverProcesses(own.server.pid);
    for (const pid of frozen) process.kill(pid, 'SIGSTOP');
    try {
      // Longer than the stage's heartbeat timeout and the pool's query timeout together.
      await new Promise((r) => setTimeout(r, HEARTBEAT_TIMEOUT_MS + LEDGER_TIMEOUTS.queryMs));
      const waiting = await handle.query(stateQuery);
      expect(waiting.status).toBe('running');
      expect(waiting.stage).toBe('lld');
    } finally {
      for (const pid of frozen) process.kill(pid, 'SIGCONT');
    }
    await atGateOn(handle);
    await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
    expect((await handle.result()).status).toBe('merged');
    expect(await countsOf(own.pool, intent.id)).toEqual(MERGED_STORY);
    // The lld attempt stayed alive through the freeze (it heartbeat while it waited for the
    // ledger): no attempt of any activity timed out, so no agent ran its stage twice.
    const events = (await handle.fetchHistory()).events ?? [];
    expect(events.filter((e) => e.activityTaskTimedOutEventAttributes)).toEqual([]);
    const lldStarts = events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runAgentStage');
    expect(lldStarts).toHaveLength(6); // triage, lld, spec, impl ×2, review: one schedule each
    expect(events.filter((e) => e.activityTaskStartedEventAttributes && (e.activityTaskStartedEventAttributes.attempt ?? 1) > 1)).toEqual([]);
  });
});

async function atGateOn(handle: ReturnType<typeof intentHandle>): Promise<void> {
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate ? true : undefined), 180_000, 'the gate');
}
