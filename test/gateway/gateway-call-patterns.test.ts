import pino from 'pino';
import { resolveConfig } from '../../src/config/load';
import { ModelGateway, type GatewayLimits } from '../../src/gateway/gateway';
import type { Lease } from '../../src/gateway/lease';
import { SpendMeter, type BudgetBook } from '../../src/gateway/spend-meter';
import type { PricingTable } from '../../src/safety/pricing';
import { startModelServer, testUpstream, type ModelServer, TEST_GATEWAY_LIMITS } from '../helpers/model-server';
import { useKeptCascadeModel } from '../helpers/kept-cascade-model';

/** The gateway's per-call pattern rules, through a real gateway and a fake model server. */

const pricing: PricingTable = {
  'gpt-test': { inputUsdPerMillion: '3', outputUsdPerMillion: '15' },
  'claude-test': { inputUsdPerMillion: '3', outputUsdPerMillion: '15' },
};
const limits = TEST_GATEWAY_LIMITS;
const UPSTREAM_KEY = 'sk-upstream-real-key-0123456789';
const book: BudgetBook = { reserve: async () => undefined, settle: async () => undefined, release: async () => undefined };

interface Recorded {
  readonly type: string;
  readonly severity: string;
  readonly reason: string;
  readonly key?: string;
}

let upstream: ModelServer;
let gateway: ModelGateway;
let leases: Lease[];

async function startGateway(extra: Partial<GatewayLimits> = {}): Promise<void> {
  await gateway?.close();
  gateway = await ModelGateway.start({ limits: { ...limits, ...extra }, logger: pino({ level: 'silent' }), env: { OPENAI_API_KEY: UPSTREAM_KEY, ANTHROPIC_API_KEY: UPSTREAM_KEY }, haltGraceMs: 100 });
}

function lease(kind: 'openai' | 'anthropic', eventDelayMs = 0) {
  const events: Recorded[] = [];
  const issued = gateway.issue({
    intentId: 'intent-patterns',
    stage: 'impl',
    attempt: 1,
    agentId: 'aider',
    upstream: testUpstream(upstream, kind),
    meter: new SpendMeter({ pricing, declaredCapUsd: '1', book }),
    event: async (type, severity, reason, details) => {
      if (eventDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, eventDelayMs));
      events.push({ type, severity, reason, key: details?.key });
      return 'event-id';
    },
  });
  leases.push(issued);
  const anomalies = () => events.filter((e) => e.type === 'ANOMALY_DETECTED');
  return { lease: issued, events, anomalies };
}

type Api = 'chat' | 'responses' | 'messages';
const PATHS: Record<Api, string> = { chat: '/v1/chat/completions', responses: '/v1/responses', messages: '/v1/messages' };

/** A request in the API's shape, offering a tool; `turn` makes it a different request. */
function body(api: Api, stream: boolean, turn = 'what is the state of the build?'): Record<string, unknown> {
  if (api === 'messages') return { model: 'claude-test', max_tokens: 1000, stream, tools: [{ name: 'run', input_schema: { type: 'object' } }], messages: [{ role: 'user', content: turn }] };
  if (api === 'responses') return { model: 'gpt-test', stream, tools: [{ type: 'function', name: 'run', parameters: { type: 'object' } }], input: turn };
  return { model: 'gpt-test', stream, tools: [{ type: 'function', function: { name: 'run', parameters: { type: 'object' } } }], messages: [{ role: 'user', content: turn }] };
}

/** One call as a client makes it; the status and the whole body read. */
async function call(l: Lease, api: Api, payload: Record<string, unknown>): Promise<{ status: number; text: string }> {
  const auth: Record<string, string> = api === 'messages' ? { 'x-api-key': l.key, 'anthropic-version': '2023-06-01' } : { authorization: `Bearer ${l.key}` };
  const res = await fetch(`${gateway.url}${PATHS[api]}`, { method: 'POST', headers: { 'content-type': 'application/json', ...auth }, body: JSON.stringify(payload) });
  return { status: res.status, text: await res.text() };
}

const kindOf = (api: Api): 'openai' | 'anthropic' => (api === 'messages' ? 'anthropic' : 'openai');

useKeptCascadeModel();

beforeAll(async () => {
  upstream = await startModelServer();
});
beforeEach(async () => {
  leases = [];
  upstream.requests.length = 0;
  upstream.respond = () => ({ text: 'the build is green', usage: { input: 1200, output: 300 } });
  await startGateway();
});
afterEach(async () => {
  for (const l of leases) await l.end();
});
afterAll(async () => {
  await gateway?.close();
  await upstream.close();
});

describe('the gateway judges each call of an attempt', () => {
  const cases: Array<[Api, boolean]> = [
    ['chat', false],
    ['chat', true],
    ['responses', true],
    ['messages', false],
    ['messages', true],
  ];

  it.each(cases)('halts a %s client (streamed: %s) that repeats the same call and gets the same answer, with one event', async (api, stream) => {
    const { lease: l, anomalies } = lease(kindOf(api));
    for (let i = 0; i < 4; i++) expect((await call(l, api, body(api, stream))).status).toBe(200);
    expect(anomalies()).toEqual([expect.objectContaining({ severity: 'high', key: 'call-pattern:identical-loop', reason: expect.stringContaining('answered the same way 4 times') })]);
    expect(l.halt?.failure.type).toBe('SAFETY_HALT');

    const fifth = await call(l, api, body(api, stream));
    expect(fifth.status).toBe(403);
    expect(fifth.text).toContain('this attempt is halted');
    expect(upstream.requests).toHaveLength(4);
    expect(anomalies()).toHaveLength(1);
    // The halted agent is stopped after the grace: waited for, not slept for.
    if (!l.stopSignal.aborted) await new Promise((resolve) => l.stopSignal.addEventListener('abort', resolve, { once: true }));
    expect(l.stopSignal.aborted).toBe(true);
  });

  it('refuses the next call at once, even while the loop’s event is still being written', async () => {
    const { lease: l, anomalies } = lease('openai', 500);
    for (let i = 0; i < 4; i++) expect((await call(l, 'chat', body('chat', false))).status).toBe(200);
    expect((await call(l, 'chat', body('chat', false))).status).toBe(403);
    expect(upstream.requests).toHaveLength(4);
    // The event lands once its (slow) write is done: waited for, not slept for.
    while (anomalies().length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(anomalies().map((e) => e.key)).toEqual(['call-pattern:identical-loop']);
  });

  it.each(cases)('lets a %s client (streamed: %s) poll with the same call while the answer changes', async (api, stream) => {
    upstream.respond = (_request, index) => ({ text: `build ${index} of 12 still running`, usage: { input: 1200, output: 300 } });
    const { lease: l, events } = lease(kindOf(api));
    for (let i = 0; i < 12; i++) expect((await call(l, api, body(api, stream))).status).toBe(200);
    expect(events).toEqual([]);
    expect(l.halt).toBeUndefined();
    expect(upstream.requests).toHaveLength(12);
  });

  it('tells apart answers that differ only in their tool call’s arguments', async () => {
    upstream.respond = (_request, index) => ({ toolCalls: [{ name: 'run', input: { poll: index } }], usage: { input: 1200, output: 30 } });
    const { lease: l, events } = lease('anthropic');
    for (let i = 0; i < 8; i++) expect((await call(l, 'messages', body('messages', true))).status).toBe(200);
    expect(events).toEqual([]);
    // The same tool call every time is the loop.
    upstream.respond = () => ({ toolCalls: [{ name: 'run', input: { poll: 'again' } }], usage: { input: 1200, output: 30 } });
    const other = lease('anthropic');
    for (let i = 0; i < 4; i++) expect((await call(other.lease, 'messages', body('messages', true))).status).toBe(200);
    expect(other.anomalies().map((e) => e.key)).toEqual(['call-pattern:identical-loop']);
  });

  it('stops an attempt whose calls get the same client error 4 times in a row, with one event', async () => {
    upstream.respond = () => ({ raw: { status: 400, body: '{"error":{"message":"tools.0.parameters: invalid schema","type":"invalid_request_error"}}' } });
    const { lease: l, anomalies } = lease('openai');
    for (let i = 0; i < 3; i++) expect((await call(l, 'chat', body('chat', false, `attempt ${i}`))).status).toBe(400);
    expect(anomalies()).toEqual([]);
    expect((await call(l, 'chat', body('chat', false, 'attempt 3'))).status).toBe(400);
    expect(anomalies()).toEqual([expect.objectContaining({ severity: 'high', key: 'call-pattern:error-loop', reason: expect.stringContaining('HTTP 400: tools.0.parameters: invalid schema') })]);
    expect(l.stopSignal.aborted).toBe(true);
    expect((await call(l, 'chat', body('chat', false, 'attempt 4'))).status).toBe(403);
    expect(upstream.requests).toHaveLength(4);
    expect(anomalies()).toHaveLength(1);
  });

  it('lets a client retry after a single transient error', async () => {
    upstream.respond = (_request, index) => (index === 0 ? { raw: { status: 500, body: '{"error":{"message":"overloaded"}}' } } : { text: 'done', usage: { input: 1200, output: 300 } });
    const { lease: l, events } = lease('openai');
    expect((await call(l, 'chat', body('chat', false))).status).toBe(500);
    expect((await call(l, 'chat', body('chat', false))).status).toBe(200);
    expect(events).toEqual([]);
    expect(l.halt).toBeUndefined();
  });

  it('records context churn from the answers’ usage without halting', async () => {
    upstream.respond = (_request, index) => ({ text: `step ${index}`, usage: { input: index % 2 ? 15_000 : 40_000, output: 100 } });
    const { lease: l, anomalies } = lease('openai');
    for (let i = 0; i < 5; i++) expect((await call(l, 'chat', body('chat', true, `step ${i}`))).status).toBe(200);
    expect(anomalies()).toEqual([]);
    expect((await call(l, 'chat', body('chat', true, 'step 5'))).status).toBe(200);
    expect(anomalies()).toEqual([expect.objectContaining({ severity: 'medium', key: 'call-pattern:context-churn' })]);
    expect((await call(l, 'chat', body('chat', true, 'step 6'))).status).toBe(200);
    expect(l.halt).toBeUndefined();
    expect(anomalies()).toHaveLength(1);
  });

  it('takes its thresholds from the worker config, and refuses a misspelt one', async () => {
    const { worker } = resolveConfig({ worker: { callPatterns: { identicalCalls: 2, rapidCalls: 3, rapidWindow: '1m' } } });
    expect(() => resolveConfig({ worker: { callPatterns: { identicalCall: 2 } } })).toThrow(/identicalCall/);
    await startGateway(worker);
    const { lease: l, anomalies } = lease('openai');
    for (let i = 0; i < 4; i++) expect((await call(l, 'chat', body('chat', false, `quick ${i}`))).status).toBe(200);
    expect(anomalies().map((e) => `${e.key}:${e.severity}`)).toEqual(['call-pattern:rapid-calls:medium']);
    expect((await call(l, 'chat', body('chat', false, 'quick 0'))).status).toBe(200);
    expect(anomalies().map((e) => e.key)).toEqual(['call-pattern:rapid-calls', 'call-pattern:identical-loop']);
    expect(l.halt?.failure.type).toBe('SAFETY_HALT');
  });
});
