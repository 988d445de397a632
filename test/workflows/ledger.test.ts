import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import type { WardenActivities } from '../../src/activities';
import { intentHandle, startIntent } from '../../src/client/intents';
import { Ledger } from '../../src/ledger/ledger';
import { migrate } from '../../src/ledger/migrate';
import { openDatabase, startEmbeddedPostgres } from '../../src/ledger/database';
import type { IntentInput } from '../../src/shared/intent';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { TEST_CONFIG, demoScript, demoStages, git, makeSampleRepo, useTestWorld, waitFor } from '../helpers/env';
import { createLogger } from '../../src/runtime/logger';
import { answeringDesignStages } from '../../src/client/sample-repo';

const FAKE_KEY = 'sk-fake-0123456789abcdefghij-PLANTED';
process.env.WARDEN_FAKE_SERVICE_API_KEY = FAKE_KEY; // before any redactor is built

const logLines: string[] = [];
/** Fails `appendToLedger` once right after its rows were written: the retry must add nothing. */
let failAfterFirstAppend = true;

const fastScript = demoScript();

const world = useTestWorld('ledger', {
  // every log line of the worker, to look for the planted secret and the bound ids
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
  await waitFor(async () => ((await intentHandle(world().client, id).query(stateQuery)).pendingGate ? true : undefined), 60_000, 'the gate');
}

async function rows(sql: string, params: unknown[] = []): Promise<Record<string, unknown>[]> {
  return (await world().pool.query(sql, params)).rows;
}

test('a merged intent leaves its whole story in the ledger, each row once, spend exact', async () => {
  const intent = intentFor(makeSampleRepo());
  const handle = await startIntent(world().client, intent, world().taskQueue);
  await atGate(intent.id);
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'auditor' });
  await handle.result();
  expect(failAfterFirstAppend).toBe(false); // the retry-after-write fault fired

  const events = await rows('SELECT event_type, stage FROM safety_events WHERE intent_id = $1 ORDER BY timestamp, event_type', [intent.id]);
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
  expect(events).toHaveLength(20);

  const costs = await rows('SELECT stage, attempt, usd::text AS usd FROM cost_events WHERE intent_id = $1 ORDER BY timestamp', [intent.id]);
  expect(costs.map((c) => `${c.stage}#${c.attempt}`)).toEqual(['triage#1', 'lld#1', 'spec#1', 'impl#1', 'impl#2', 'review#1']);
  const [total] = await rows('SELECT sum(usd)::text AS total FROM cost_events WHERE intent_id = $1', [intent.id]);
  expect(total!.total).toBe('0.051000');

  const gates = await rows('SELECT gate, decision, decided_by AS "by", timed_out FROM gate_decisions WHERE intent_id = $1', [intent.id]);
  expect(gates).toEqual([{ gate: 'merge', decision: 'approve', by: 'auditor', timed_out: false }]);

  const timeline = await world().ledger.timeline(intent.id);
  expect(timeline[0]!.type).toBe('INTENT_STARTED');
  expect(timeline.at(-1)!.type).toBe('INTENT_MERGED');
  expect(timeline.map((e) => e.at.getTime())).toEqual([...timeline.map((e) => e.at.getTime())].sort((a, b) => a - b));
});

test('refused decisions and a gate timeout are safety events; the timeout escalates then rejects', async () => {
  const intent = intentFor(makeSampleRepo(), { limits: { gateTimeout: '3s' } });
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

test('a planted secret appears nowhere: not in logs, ledger rows, workflow history or lineage', async () => {
  const repo = makeSampleRepo();
  // The agent leaks the key on stdout (its artifact) and stderr, and review fails with it in the message.
  const command = answeringDesignStages(`if grep -q '^# Warden: review'; then echo "key=$WARDEN_FAKE_SERVICE_API_KEY ${FAKE_KEY}" >&2; exit 3; else echo "using ${FAKE_KEY} and Bearer abcdefghijklmnopqrstuvwxyz"; fi`);
  const intent = intentFor(repo, { agent: { kind: 'command', command }, testCommand: 'true' });
  const handle = await startIntent(world().client, intent, world().taskQueue);
  await handle.result().catch(() => undefined);
  const state = await handle.query(stateQuery);
  expect(state.status).toBe('failed');

  const history = JSON.stringify(await handle.fetchHistory());
  expect(history).not.toContain(FAKE_KEY);
  expect(history).toContain('[redacted]'); // it was there, and scrubbed
  const ledgerText = JSON.stringify(await rows("SELECT * FROM safety_events WHERE intent_id = $1", [intent.id])) + JSON.stringify(await rows('SELECT * FROM cost_events WHERE intent_id = $1', [intent.id]));
  expect(ledgerText).not.toContain(FAKE_KEY);
  expect(ledgerText).toContain('[redacted]');
  const logs = logLines.join('');
  expect(logs).toContain(intent.id);
  expect(logs).not.toContain(FAKE_KEY);
  const lineage = execFileSync('grep', ['-r', '-c', 'redacted', state.lineagePath!], { encoding: 'utf8' });
  expect(lineage).toMatch(/:[1-9]/);
  expect(() => execFileSync('grep', ['-r', '-l', FAKE_KEY, state.lineagePath!])).toThrow(); // grep exits 1: not found
  expect(git(repo, 'log', '--all', '-p').includes(FAKE_KEY)).toBe(false);
});

test('activity log lines carry the intent id, stage and attempt', () => {
  const stageLines = logLines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.activity === 'runAgentStage');
  expect(stageLines.length).toBeGreaterThan(0);
  for (const line of stageLines) {
    expect(line).toEqual(expect.objectContaining({ intentId: expect.any(String), stage: expect.any(String), attempt: expect.any(Number) }));
  }
  expect(stageLines.some((l) => l.msg === 'activity finished' && typeof l.durationMs === 'number' && l.outcome === 'completed')).toBe(true);
});

test('with PostgreSQL down mid-run the intent waits, then finishes when it is back, and no event is lost', async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'warden-pg-fault-'));
  const port = 15000 + Math.floor(Math.random() * 2000);
  let server = await startEmbeddedPostgres({ dataDir, port });
  const database = await openDatabase({ databaseUrl: server.url, dataDir });
  await migrate(database.pool);
  // lld takes 2.5 s, so the server goes down while it runs and its ledger rows cannot be written
  const slowLld = demoScript({ lld: [{ ...demoStages().lld![0], delayMs: 2500 }] });
  const intent = intentFor(makeSampleRepo(), { agent: { kind: 'scripted', scriptPath: slowLld } });
  // a worker of its own (own queue), whose ledger is the server this test stops
  const { createWardenWorker } = await import('../../src/workers/warden-worker');
  const { createRedactor } = await import('../../src/shared/redact');
  const queue = `${world().taskQueue}-pgfault`;
  const w = await createWardenWorker({
    connection: world().connection,
    taskQueue: queue,
    workflowBundle: world().bundle,
    worktreeRoot: world().worktreeRoot,
    lineageRoot: world().lineageRoot,
    ledger: new Ledger(database.pool),
    logger: pino({ level: 'silent' }),
    redact: createRedactor(process.env),
    safety: TEST_CONFIG.worker,
  });
  const wRunning = w.run();
  try {
    const handle = await startIntent(world().client, intent, queue);
    await waitFor(async () => ((await handle.query(stateQuery)).attempts.lld ? true : undefined), 60_000, 'lld to start');
    await server.stop();
    // the intent cannot write its ledger rows now: it must wait, not fail and not skip them
    await new Promise((r) => setTimeout(r, 5000));
    const waiting = await handle.query(stateQuery);
    expect(waiting.status).toBe('running');
    expect(waiting.stage).toBe('lld'); // lld is done, but the intent waits for its ledger rows
    expect(waiting.pendingGate).toBeUndefined();
    server = await startEmbeddedPostgres({ dataDir, port });
    await atGateOn(handle);
    await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
    expect((await handle.result()).status).toBe('merged');
    const { rows: counts } = await database.pool.query(
      "SELECT event_type, count(*)::int AS n FROM safety_events WHERE intent_id = $1 GROUP BY event_type ORDER BY event_type",
      [intent.id],
    );
    expect(Object.fromEntries(counts.map((r: { event_type: string; n: number }) => [r.event_type, r.n]))).toEqual({
      GATE_DECIDED: 1,
      GATE_REQUESTED: 1,
      INTENT_MERGED: 1,
      INTENT_STARTED: 1,
      RISK_ASSESSED: 1,
      STAGE_COMPLETED: 6,
      STAGE_STARTED: 7,
      TESTS_FAILED: 1,
      TESTS_PASSED: 1,
    });
    const { rows: costRows } = await database.pool.query('SELECT count(*)::int AS n FROM cost_events WHERE intent_id = $1', [intent.id]);
    expect(costRows[0].n).toBe(6);
  } finally {
    w.shutdown();
    await wRunning;
    await database.close();
    await server.stop();
  }
});

async function atGateOn(handle: ReturnType<typeof intentHandle>): Promise<void> {
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate ? true : undefined), 90_000, 'the gate');
}
