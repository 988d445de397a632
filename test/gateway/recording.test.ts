/**
 * The gateway's recording of model exchanges, against a real ledger database: Warden's HTTP agent
 * and wire-format clients call a local scripted model server through a real gateway, and what the
 * gateway kept is read back from the tables and with `recordingOf`.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { createLedgerActivities } from '../../src/activities/ledger-activities';
import { createAgent } from '../../src/activities/agents';
import { ModelGateway } from '../../src/gateway/gateway';
import type { Lease } from '../../src/gateway/lease';
import { SpendMeter } from '../../src/gateway/spend-meter';
import { requestKeyOf } from '../../src/gateway/exchange';
import { ExchangeStore } from '../../src/ledger/exchange-store';
import type { PricingTable } from '../../src/safety/pricing';
import { AnthropicAgentProfileSchema, IntentSchema } from '../../src/shared/intent';
import { recordingContextOf } from '../../src/activities/recording-context';
import { createRedactor } from '../../src/shared/redact';
import { STAGE_DOCUMENTS } from '../helpers/cli-scripts';
import { freshDatabase, type FreshDatabase } from '../helpers/database';
import { startModelServer, testUpstream, type ModelServer, TEST_GATEWAY_LIMITS } from '../helpers/model-server';
import { useKeptCascadeModel } from '../helpers/kept-cascade-model';
import { PLANTED } from '../helpers/planted-secrets';
import { migrate } from '../../src/ledger/migrate';
import { Ledger } from '../../src/ledger/ledger';

const pricing: PricingTable = {
  'claude-test': { inputUsdPerMillion: '3', outputUsdPerMillion: '15' },
  'gpt-test': { inputUsdPerMillion: '3', outputUsdPerMillion: '15' },
};
const limits = TEST_GATEWAY_LIMITS;
const UPSTREAM_KEY = 'sk-upstream-real-key-0123456789';
const SECRETS = PLANTED.filter(([name]) => name === 'GitHub token' || name === 'model key').map(([, secret]) => secret);
const logger = pino({ level: 'silent' });

let db: FreshDatabase;
let ledger: Ledger;
let upstream: ModelServer;
const gateways: ModelGateway[] = [];
const leases: Lease[] = [];

async function gatewayRecording(maxPerIntentMb = 20): Promise<ModelGateway> {
  const gateway = await ModelGateway.start({
    limits,
    logger,
    env: { ANTHROPIC_API_KEY: UPSTREAM_KEY, OPENAI_API_KEY: UPSTREAM_KEY },
    redact: createRedactor({ ANTHROPIC_API_KEY: UPSTREAM_KEY }),
    recordCall: (row) => ledger.modelCalls.record(row),
    exchanges: new ExchangeStore(db.pool, { maxPerIntentMb }),
  });
  gateways.push(gateway);
  return gateway;
}

function lease(gateway: ModelGateway, intentId: string, kind: 'anthropic' | 'openai' = 'anthropic') {
  const events: string[] = [];
  const issued = gateway.issue({
    intentId,
    stage: 'impl',
    attempt: 1,
    agentId: 'recorded',
    upstream: testUpstream(upstream, kind),
    meter: new SpendMeter({ pricing, declaredCapUsd: '0.50' }),
    event: async (type) => {
      events.push(type);
      return randomUUID();
    },
  });
  leases.push(issued);
  return { lease: issued, events };
}

function post(gateway: ModelGateway, key: string, body: unknown): Promise<Response> {
  return fetch(`${gateway.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key, 'anthropic-version': '2023-06-01' }, body: JSON.stringify(body) });
}

const ask = (content: string, extra: Record<string, unknown> = {}) => ({ model: 'claude-test', max_tokens: 1000, messages: [{ role: 'user', content }], ...extra });

async function callsOf(intentId: string): Promise<Array<{ id: string; request_hash: string | null; answer_hash: string | null; stored: boolean | null; request: string | null; answer: string | null }>> {
  const { rows } = await db.pool.query(
    `SELECT c.id, e.request_hash, e.answer_hash, e.stored, rq.body AS request, an.body AS answer
       FROM model_calls c LEFT JOIN model_exchanges e ON e.call_id = c.id
       LEFT JOIN exchange_bodies rq ON rq.hash = e.request_hash LEFT JOIN exchange_bodies an ON an.hash = e.answer_hash
      WHERE c.intent_id = $1 ORDER BY c."timestamp"`,
    [intentId],
  );
  return rows;
}

/** Waits until the gateway has kept `count` exchanges of the intent (a hang guard of two minutes). */
async function exchangesKept(intentId: string, count: number): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM model_exchanges WHERE intent_id = $1`, [intentId]);
    if (rows[0].n >= count) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${count} kept exchanges of ${intentId}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

useKeptCascadeModel();

beforeAll(async () => {
  db = await freshDatabase(process.env.WARDEN_TEST_EMBEDDED_DATABASE_URL!);
  await migrate(db.pool);
  ledger = new Ledger(db.pool);
  upstream = await startModelServer();
});
afterEach(async () => {
  for (const l of leases.splice(0)) await l.end();
});
afterAll(async () => {
  for (const g of gateways) await g.close();
  await upstream?.close();
  await db?.drop();
});

test("Warden's HTTP agent: every model_calls row of its attempt has its request and answer, a planted secret in neither", async () => {
  const intentId = `rec-agent-${randomUUID()}`;
  const gateway = await gatewayRecording();
  // The triage answer carries a secret the model leaked; the prompt carries another.
  upstream.respond = () => ({ text: `${STAGE_DOCUMENTS.triage}\nI found ${SECRETS[0]} in the repo.`, usage: { input: 900, output: 120 } });
  const profile = AnthropicAgentProfileSchema.parse({ kind: 'anthropic', model: 'claude-test', baseUrl: upstream.url, apiKeyEnv: ['ANTHROPIC_API_KEY'], maxTokens: 2048 });
  const agent = createAgent(profile, { mode: 'development', env: {}, gateway });
  const worktreePath = await mkdtemp(path.join(os.tmpdir(), 'warden-recording-'));
  try {
    await agent.run({
      intentId,
      stage: 'triage',
      attempt: 1,
      prompt: `# Warden: triage (attempt 1)\n\nAdd slugify. The deploy key is ${SECRETS[1]}.`,
      worktreePath,
      signal: new AbortController().signal,
      heartbeat: () => undefined,
      meter: new SpendMeter({ pricing, declaredCapUsd: '0.50' }),
    });
  } finally {
    await rm(worktreePath, { recursive: true, force: true });
  }
  const calls = await callsOf(intentId);
  expect(calls.length).toBeGreaterThanOrEqual(1);
  for (const call of calls) {
    expect(call).toMatchObject({ stored: true, request_hash: expect.stringMatching(/^[0-9a-f]{64}$/), answer_hash: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(call.request).toContain('Add slugify');
    expect(call.answer).toContain('"type":"message"');
  }
  // The model really got the secret in the prompt; the recording did not keep it, nor the leaked one.
  expect(JSON.stringify(upstream.requests.at(-1)!.body)).toContain(SECRETS[1]);
  const { rows } = await db.pool.query<{ body: string }>(`SELECT body FROM exchange_bodies`);
  for (const secret of SECRETS) expect(rows.filter((r) => r.body.includes(secret))).toEqual([]);
  expect(calls[0]!.request).toContain('[redacted]');
  // Read back as the later replay reads it: in order, with the call's model and the matching key.
  const recording = await new ExchangeStore(db.pool).recordingOf(intentId, { bodies: true });
  expect(recording.exchanges.map((e) => [e.stage, e.attempt, e.order, e.modelId, e.stored])).toEqual(calls.map((_, i) => ['triage', 1, i + 1, 'claude-test', true]));
  expect(recording.exchanges[0]!.requestKey).toBe(requestKeyOf(recording.exchanges[0]!.request!));
});

test('two identical requests are stored once; a streamed answer is kept as its events, in the order the agent got them', async () => {
  const intentId = `rec-wire-${randomUUID()}`;
  const gateway = await gatewayRecording();
  const { lease: l } = lease(gateway, intentId);
  upstream.respond = () => ({ text: 'the same answer', usage: { input: 100, output: 20 } });
  for (let i = 0; i < 2; i++) expect((await post(gateway, l.key, ask('the same question'))).status).toBe(200);
  upstream.respond = () => ({ text: 'streamed words, one by one', usage: { input: 100, output: 20 } });
  const streamed = await post(gateway, l.key, ask('stream it', { stream: true }));
  const got = await streamed.text();
  await l.end();
  const calls = await callsOf(intentId);
  expect(calls).toHaveLength(3);
  expect(calls[0]!.request_hash).toBe(calls[1]!.request_hash);
  expect(calls[0]!.answer_hash).not.toBeNull();
  const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM exchange_bodies WHERE hash = $1`, [calls[0]!.request_hash]);
  expect(rows[0].n).toBe(1);
  const recording = await new ExchangeStore(db.pool).recordingOf(intentId, { bodies: true });
  expect(recording.exchanges.map((e) => e.order)).toEqual([1, 2, 3]);
  const stream = recording.exchanges[2]!;
  expect(stream.answerKind).toBe('events');
  const events = stream.answer!.kind === 'events' ? stream.answer!.events : [];
  expect(events.length).toBeGreaterThan(3);
  expect(events.join('')).toBe(got);
  expect(events[0]).toMatch(/^event: message_start\n/);
  expect(events.at(-1)).toMatch(/^event: message_stop\n/);
});

test('past the per-intent cap calls go on and rows are written, bodies are not stored, and the recording says capped once', async () => {
  const intentId = `rec-cap-${randomUUID()}`;
  // About 1 KB: the first exchange (some 700 bytes) fits, the second does not.
  const gateway = await gatewayRecording(0.001);
  const { lease: l, events } = lease(gateway, intentId);
  upstream.respond = () => ({ text: 'a short answer', usage: { input: 100, output: 20 } });
  // The gateway keeps an exchange after its answer is sent, so the next call waits until the last
  // one is kept: calls in flight together may each pass the cap check (the store says so).
  for (const n of [1, 2, 3]) {
    expect((await post(gateway, l.key, ask(`question ${n} ${'x'.repeat(400)}`))).status).toBe(200);
    await exchangesKept(intentId, n);
  }
  await l.end();
  const calls = await callsOf(intentId);
  expect(calls.map((c) => c.stored)).toEqual([true, false, false]);
  expect(calls.slice(1).map((c) => [c.request_hash, c.answer_hash])).toEqual([
    [null, null],
    [null, null],
  ]);
  const recording = await new ExchangeStore(db.pool).recordingOf(intentId);
  expect(recording.cappedAt).toBeInstanceOf(Date);
  expect(recording.exchanges.map((e) => e.stored)).toEqual([true, false, false]);
  expect(events.filter((e) => e === 'RECORDING_CAPPED')).toHaveLength(1);
});

test('retention removes expired exchanges and the bodies no kept exchange points at', async () => {
  const old = `rec-old-${randomUUID()}`;
  const kept = `rec-kept-${randomUUID()}`;
  const gateway = await gatewayRecording();
  upstream.respond = (request) => ({ text: `answer to ${request.prompt}`, usage: { input: 100, output: 20 } });
  const shared = ask(`shared question ${randomUUID()}`);
  for (const [intentId, own] of [
    [old, `old question ${randomUUID()}`],
    [kept, `kept question ${randomUUID()}`],
  ] as const) {
    const { lease: l } = lease(gateway, intentId);
    expect((await post(gateway, l.key, shared)).status).toBe(200);
    expect((await post(gateway, l.key, ask(own))).status).toBe(200);
    await l.end();
  }
  await db.pool.query(`UPDATE model_exchanges SET recorded_at = now() - interval '40 days' WHERE intent_id = $1`, [old]);
  const oldCalls = await callsOf(old);
  const keptCalls = await callsOf(kept);
  const reportsDir = await mkdtemp(path.join(os.tmpdir(), 'warden-recording-reports-'));
  const activities = createLedgerActivities({ ledger, redact: (t) => t, logger, reportsDir, recordingKeep: '30d' });
  const deleted = await activities.cleanupLedger({ retentionDays: 3650 });
  await rm(reportsDir, { recursive: true, force: true });
  expect(deleted).toMatchObject({ model_exchanges: 2 });
  const left = new Set((await db.pool.query<{ hash: string }>(`SELECT hash FROM exchange_bodies`)).rows.map((r) => r.hash));
  // The old intent's own request and answer are gone; the request it shared with a kept call stays.
  expect(left.has(oldCalls[1]!.request_hash!)).toBe(false);
  expect(left.has(oldCalls[1]!.answer_hash!)).toBe(false);
  expect(oldCalls[0]!.request_hash).toBe(keptCalls[0]!.request_hash);
  for (const call of keptCalls) for (const hash of [call.request_hash!, call.answer_hash!]) expect(left.has(hash)).toBe(true);
  expect((await new ExchangeStore(db.pool).recordingOf(old)).exchanges).toEqual([]);
  expect((await new ExchangeStore(db.pool).recordingOf(kept)).exchanges).toHaveLength(2);
});

test('the matching key leaves out what varies run to run and ignores key order', () => {
  const a = requestKeyOf(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], metadata: { user_id: 'device-1_session-a' } }));
  const b = requestKeyOf(JSON.stringify({ metadata: { user_id: 'device-2_session-b' }, messages: [{ content: 'hi', role: 'user' }], model: 'm' }));
  const c = requestKeyOf(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hello' }] }));
  expect(a).toMatch(/^[0-9a-f]{64}$/);
  expect(a).toBe(b);
  expect(c).not.toBe(a);
  expect(requestKeyOf('not json')).toBeUndefined();
});

test("the recording context names the version of each agent CLI the intent's profiles run, asked of the program itself", async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'warden-recording-cli-'));
  const program = path.join(dir, 'codex');
  await writeFile(program, '#!/bin/sh\necho "codex-cli 9.8.7"\n', { mode: 0o755 });
  try {
    const upstreamProfile = { kind: 'openai', model: 'gpt-test', baseUrl: `${upstream.url}/v1`, maxTokens: 4096 };
    const intent = IntentSchema.parse({
      id: `rec-context-${randomUUID()}`,
      goal: 'Add slugify',
      repoPath: dir,
      agent: { kind: 'anthropic', model: 'claude-test', baseUrl: upstream.url },
      stageAgents: { impl: { kind: 'command', cli: 'codex', command: program, upstream: upstreamProfile } },
      limits: {},
    });
    const context = await recordingContextOf(intent, 'a'.repeat(40));
    expect(context).toMatchObject({ baseCommit: 'a'.repeat(40), cliVersions: { codex: 'codex-cli 9.8.7' }, agents: { default: { kind: 'anthropic' }, impl: { kind: 'command', cli: 'codex' } } });
    // The hash is the intent's: the same intent gives the same hash, another limit another.
    expect((await recordingContextOf(intent, 'b'.repeat(40))).configHash).toBe(context.configHash);
    expect((await recordingContextOf({ ...intent, limits: { ...intent.limits, budgetUsd: '1.23' } }, 'a'.repeat(40))).configHash).not.toBe(context.configHash);
    const store = new ExchangeStore(db.pool);
    await store.recordContext(intent.id, context);
    await store.recordContext(intent.id, { ...context, baseCommit: 'c'.repeat(40) });
    expect((await store.recordingOf(intent.id)).context).toEqual(context);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
