/**
 * The gateway's replay mode, against a real ledger database: an attempt is recorded through a real
 * gateway from a local scripted model server, the server is closed, and a second gateway answers
 * a replayed attempt from the recording alone; a request the recording has no answer for ends
 * the attempt with "diverged at …" naming the first difference.
 */
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { ModelGateway } from '../../src/gateway/gateway';
import type { Lease } from '../../src/gateway/lease';
import { SpendMeter } from '../../src/gateway/spend-meter';
import { ExchangeStore, type Recording } from '../../src/ledger/exchange-store';
import { Ledger } from '../../src/ledger/ledger';
import { migrate } from '../../src/ledger/migrate';
import type { PricingTable } from '../../src/safety/pricing';
import { createRedactor } from '../../src/shared/redact';
import { freshDatabase, type FreshDatabase } from '../helpers/database';
import { startModelServer, testUpstream, type ModelServer, TEST_GATEWAY_LIMITS } from '../helpers/model-server';
import { useKeptCascadeModel } from '../helpers/kept-cascade-model';

const pricing: PricingTable = { 'claude-test': { inputUsdPerMillion: '3', outputUsdPerMillion: '15' } };
const limits = TEST_GATEWAY_LIMITS;
const UPSTREAM_KEY = 'sk-upstream-real-key-0123456789';
const logger = pino({ level: 'silent' });

let db: FreshDatabase;
let ledger: Ledger;
let upstream: ModelServer;
let replayGateway: ModelGateway;
const gateways: ModelGateway[] = [];
const leases: Lease[] = [];

const original = `replay-src-${randomUUID()}`;
const first = { model: 'claude-test', max_tokens: 1000, messages: [{ role: 'user', content: `first question ${randomUUID()}` }], metadata: { user_id: 'device-1_session-a' } };
const second = { model: 'claude-test', max_tokens: 1000, stream: true, messages: [{ role: 'user', content: `second question ${randomUUID()}` }] };
/** What the agent got in the original run, as it got it. */
const got: string[] = [];
let upstreamCalls = 0;

async function startGateway(recording: boolean): Promise<ModelGateway> {
  const gateway = await ModelGateway.start({
    limits,
    logger,
    env: { ANTHROPIC_API_KEY: UPSTREAM_KEY },
    redact: createRedactor({ ANTHROPIC_API_KEY: UPSTREAM_KEY }),
    recordCall: (row) => ledger.modelCalls.record(row),
    ...(recording ? { exchanges: new ExchangeStore(db.pool) } : { recordings: new ExchangeStore(db.pool) }),
  });
  gateways.push(gateway);
  return gateway;
}

function lease(gateway: ModelGateway, intentId: string, meter: SpendMeter, replayOf?: string, stage = 'impl'): Lease {
  const issued = gateway.issue({
    intentId,
    stage,
    attempt: 1,
    agentId: 'replayed',
    upstream: testUpstream(upstream, 'anthropic'),
    meter,
    ...(replayOf ? { replayOf: { intentId: replayOf } } : {}),
  });
  leases.push(issued);
  return issued;
}

function post(gateway: ModelGateway, key: string, body: unknown): Promise<Response> {
  return fetch(`${gateway.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key, 'anthropic-version': '2023-06-01' }, body: JSON.stringify(body) });
}

const recordingOf = (intentId: string): Promise<Recording> => new ExchangeStore(db.pool).recordingOf(intentId, { bodies: true });

useKeptCascadeModel();

beforeAll(async () => {
  db = await freshDatabase(process.env.WARDEN_TEST_EMBEDDED_DATABASE_URL!);
  await migrate(db.pool);
  ledger = new Ledger(db.pool);
  upstream = await startModelServer((request) => ({ text: `the answer to ${request.prompt}`, usage: { input: 100, output: 20 } }));
  const recorder = await startGateway(true);
  const l = lease(recorder, original, new SpendMeter({ pricing, declaredCapUsd: '0.50' }));
  for (const body of [first, second]) {
    const response = await post(recorder, l.key, body);
    expect(response.status).toBe(200);
    got.push(await response.text());
  }
  await l.end();
  upstreamCalls = upstream.requests.length;
  expect(upstreamCalls).toBe(2);
  // From here on no model server runs: every answer must come from the recording.
  await upstream.close();
  replayGateway = await startGateway(false);
});
afterEach(async () => {
  for (const l of leases.splice(0)) await l.end();
});
afterAll(async () => {
  for (const g of gateways) await g.close();
  await db?.drop();
});

test('a replayed attempt gets the recorded answers, whole and streamed, with no model server, and spends nothing', async () => {
  const intentId = `replay-${original}-1`;
  const meter = new SpendMeter({ pricing, declaredCapUsd: '0.50' });
  const l = lease(replayGateway, intentId, meter, original);
  // The same requests as a CLI would send them again: another session id, another key order.
  const again = [{ ...first, metadata: { user_id: 'device-2_session-b' } }, Object.fromEntries(Object.entries(second).reverse())];
  const answers: string[] = [];
  for (const body of again) {
    const response = await post(replayGateway, l.key, body);
    expect(response.status).toBe(200);
    answers.push(await response.text());
  }
  await l.end();
  expect(answers).toEqual(got);
  expect(answers[1]).toMatch(/^event: message_start\n/);
  expect(l.halt).toBeUndefined();
  expect(meter.calls).toEqual([]);
  const { rows } = await db.pool.query<{ outcome: string; usd: string; input_tokens: number }>(`SELECT outcome, usd::text AS usd, input_tokens FROM model_calls WHERE intent_id = $1 ORDER BY "timestamp"`, [intentId]);
  expect(rows.map((r) => [r.outcome, Number(r.usd)])).toEqual([
    ['answered', 0],
    ['answered', 0],
  ]);
  // A replay's own calls are not recorded again.
  expect((await recordingOf(intentId)).exchanges).toEqual([]);
});

test('a changed request ends the attempt with "diverged at …" naming the first difference', async () => {
  const l = lease(replayGateway, `replay-${original}-2`, new SpendMeter({ pricing, declaredCapUsd: '0.50' }), original);
  expect((await post(replayGateway, l.key, first)).status).toBe(200);
  const changed = await post(replayGateway, l.key, { ...second, messages: [{ role: 'user', content: second.messages[0]!.content.replace('second', 'other') }] });
  expect(changed.status).not.toBe(200);
  const text = await changed.text();
  expect(text).toContain('diverged at stage impl attempt 1 call 2: the request differs from the recorded one: messages[0].content: recorded \\"second question');
  expect(text).toContain('now \\"other question');
  expect(l.halt?.failure.type).toBe('REPLAY_DIVERGED');
  expect(l.halt?.failure.nonRetryable).toBe(true);
});

test('a call the original never made diverges, saying how many it made', async () => {
  const l = lease(replayGateway, `replay-${original}-3`, new SpendMeter({ pricing, declaredCapUsd: '0.50' }), original);
  for (const body of [first, second]) expect((await post(replayGateway, l.key, body)).status).toBe(200);
  expect(await (await post(replayGateway, l.key, first)).text()).toContain('diverged at stage impl attempt 1 call 3: the original attempt made 2 calls; this one is call 3');
  const other = lease(replayGateway, `replay-${original}-4`, new SpendMeter({ pricing, declaredCapUsd: '0.50' }), original, 'review');
  expect(await (await post(replayGateway, other.key, first)).text()).toContain('diverged at stage review attempt 1 call 1: the original made no model call in the review stage');
});

test('an edited recording is not answered from: the replay reports where it differs', async () => {
  const recording = await recordingOf(original);
  const { rows } = await db.pool.query<{ request_hash: string }>(`SELECT request_hash FROM model_exchanges WHERE intent_id = $1 AND call_order = 1`, [original]);
  await db.pool.query(`UPDATE exchange_bodies SET body = replace(body, 'first question', 'first questlon') WHERE hash = $1`, [rows[0]!.request_hash]);
  const edited = await recordingOf(original);
  expect(edited.exchanges[0]!.request).not.toBe(recording.exchanges[0]!.request);
  const l = lease(replayGateway, `replay-${original}-5`, new SpendMeter({ pricing, declaredCapUsd: '0.50' }), original);
  const response = await post(replayGateway, l.key, first);
  expect(response.status).not.toBe(200);
  expect(await response.text()).toMatch(/diverged at stage impl attempt 1 call 1: the request differs from the recorded one: messages\[0\]\.content: recorded \\"first questlon.*now \\"first question/);
  expect(upstream.requests).toHaveLength(upstreamCalls);
});
