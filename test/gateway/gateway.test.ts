import { ApplicationFailure } from '@temporalio/common';
import pino from 'pino';
import { ModelGateway, type GatewayOptions } from '../../src/gateway/gateway';
import type { Lease, LeaseSpec } from '../../src/gateway/lease';
import { SpendMeter, type BudgetBook, type OpenCall, type PaidCall } from '../../src/gateway/spend-meter';
import type { ModelCallInput, SafetyEventInput } from '../../src/ledger/types';
import { costOf, type PricingTable } from '../../src/safety/pricing';
import { compareUsd, addUsd, subUsd, ZERO_USD } from '../../src/shared/money';
import { createRedactor } from '../../src/shared/redact';
import { startModelServer, testUpstream, type ModelServer, TEST_GATEWAY_LIMITS } from '../helpers/model-server';
import { useKeptCascadeModel } from '../helpers/kept-cascade-model';

const pricing: PricingTable = {
  'gpt-test': { inputUsdPerMillion: '3', outputUsdPerMillion: '15' },
  'claude-test': { inputUsdPerMillion: '3', outputUsdPerMillion: '15' },
  'other-model': { inputUsdPerMillion: '1', outputUsdPerMillion: '1' },
};

const limits = TEST_GATEWAY_LIMITS;

const UPSTREAM_KEY = 'sk-upstream-real-key-0123456789';

let upstream: ModelServer;
let gateway: ModelGateway;
let rows: ModelCallInput[];
let strayEvents: SafetyEventInput[];
let leases: Lease[];

/** A budget book with one limit, refusing a call whose maximum would pass it. */
function book(limitUsd = '1000') {
  const open = new Map<number, OpenCall>();
  let committed = ZERO_USD;
  const settled: PaidCall[] = [];
  const released: OpenCall[] = [];
  const b: BudgetBook = {
    async reserve(call) {
      // Like the ledger: a shrinkable call gets what is left when that is at least its minimum.
      const left = subUsd(limitUsd, committed);
      if (compareUsd(call.maxUsd, left) > 0 && call.minUsd !== undefined && compareUsd(left, call.minUsd) >= 0) {
        open.set(call.index, call);
        committed = limitUsd;
        return left;
      }
      if (compareUsd(addUsd(committed, call.maxUsd), limitUsd) > 0) {
        throw ApplicationFailure.create({ type: 'BUDGET_EXCEEDED', message: `intent budget: this call may cost up to $${call.maxUsd}, over the $${limitUsd} limit`, nonRetryable: true });
      }
      open.set(call.index, call);
    },
    async settle(call, paid) {
      open.delete(call.index);
      committed = addUsd(committed, paid.costUsd);
      settled.push(paid);
    },
    async release(call) {
      open.delete(call.index);
      released.push(call);
    },
  };
  return { book: b, open, settled, released };
}

async function startGateway(extra: Partial<GatewayOptions> = {}): Promise<void> {
  await gateway?.close();
  gateway = await ModelGateway.start({
    limits,
    logger: pino({ level: 'silent' }),
    env: { OPENAI_API_KEY: UPSTREAM_KEY, ANTHROPIC_API_KEY: UPSTREAM_KEY },
    redact: createRedactor({ OPENAI_API_KEY: UPSTREAM_KEY }),
    recordCall: async (row) => {
      rows.push(row);
    },
    recordEvent: async (event) => {
      strayEvents.push(event);
    },
    haltGraceMs: 100,
    ...extra,
  });
}

function lease(kind: 'openai' | 'anthropic', fields: Partial<LeaseSpec> & { limitUsd?: string } = {}) {
  const budget = book(fields.limitUsd);
  const events: Array<{ type: string; severity: string; reason: string }> = [];
  const meter = new SpendMeter({ pricing, declaredCapUsd: '0.50', book: budget.book });
  const issued = gateway.issue({
    intentId: 'intent-gw',
    stage: 'impl',
    attempt: 1,
    agentId: 'aider',
    upstream: testUpstream(upstream, kind),
    meter,
    event: async (type, severity, reason) => {
      events.push({ type, severity, reason });
      return 'event-id';
    },
    ...fields,
  });
  leases.push(issued);
  return { lease: issued, meter, budget, events };
}

function post(path: string, key: string | undefined, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  const auth: Record<string, string> = key === undefined ? {} : path.includes('messages') ? { 'x-api-key': key, 'anthropic-version': '2023-06-01' } : { authorization: `Bearer ${key}` };
  return fetch(`${gateway.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...auth, ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
}

const chat = (extra: Record<string, unknown> = {}) => ({ model: 'gpt-test', messages: [{ role: 'user', content: 'hello' }], ...extra });
const messages = (extra: Record<string, unknown> = {}) => ({ model: 'claude-test', max_tokens: 1000, messages: [{ role: 'user', content: 'hello' }], ...extra });

/** The data lines of a streamed answer. */
function dataOf(text: string): string[] {
  return text
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => line.slice(6));
}

useKeptCascadeModel();

beforeAll(async () => {
  upstream = await startModelServer();
});
beforeEach(async () => {
  rows = [];
  strayEvents = [];
  leases = [];
  upstream.requests.length = 0;
  upstream.respond = () => ({ text: 'the answer', usage: { input: 1200, output: 300 } });
  await startGateway();
});
afterEach(async () => {
  for (const l of leases) await l.end();
});
afterAll(async () => {
  await gateway?.close();
  await upstream.close();
});

describe('the model gateway forwards and meters', () => {
  it('streams a Chat Completions answer, asks the upstream for its usage, and counts it to the token', async () => {
    const { lease: l, meter } = lease('openai');
    const res = await post('/v1/chat/completions', l.key, chat({ stream: true }));
    expect(res.status).toBe(200);
    const text = await res.text();
    const data = dataOf(text);
    expect(data.at(-1)).toBe('[DONE]');
    const content = data.slice(0, -1).map((d) => (JSON.parse(d) as { choices: Array<{ delta: { content?: string } }> }).choices[0]?.delta.content ?? '').join('');
    expect(content).toBe('the answer');
    // The client did not ask for the usage chunk: it is kept from it.
    expect(text).not.toContain('prompt_tokens');

    const sent = upstream.requests[0]!;
    expect(sent.path).toBe('/v1/chat/completions');
    expect(sent.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(JSON.stringify(sent.headers)).not.toContain(l.key);
    expect(sent.body.stream_options).toEqual({ include_usage: true });

    await l.end();
    expect(meter.totalUsage()).toEqual({ inputTokens: 1200, outputTokens: 300 });
    expect(meter.totalUsd()).toBe(costOf('gpt-test', { inputTokens: 1200, outputTokens: 300 }, pricing));
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ api: 'chat', modelId: 'gpt-test', streamed: true, status: 200, outcome: 'answered', inputTokens: 1200, outputTokens: 300, estimated: false, intentId: 'intent-gw', stage: 'impl' });
    expect(rows[0]!.usd).toBe(meter.totalUsd());
  });

  it('passes a whole Chat answer, and keeps the usage chunk for a client that asked for it', async () => {
    const { lease: l, meter } = lease('openai');
    const whole = await post('/v1/chat/completions', l.key, chat());
    expect(((await whole.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content).toBe('the answer');
    const streamed = await post('/v1/chat/completions', l.key, chat({ stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'again' }] }));
    expect(await streamed.text()).toContain('"prompt_tokens":1200');
    await l.end();
    expect(meter.totalUsage()).toEqual({ inputTokens: 2400, outputTokens: 600 });
  });

  it('streams a Responses answer and reads its usage from response.completed', async () => {
    const { lease: l, meter } = lease('openai');
    const res = await post('/v1/responses', l.key, { model: 'gpt-test', input: 'hello', stream: true });
    const text = await res.text();
    expect(text).toContain('event: response.completed');
    expect(upstream.requests[0]!.path).toBe('/v1/responses');
    expect(upstream.requests[0]!.body.max_output_tokens).toBe(4096);
    await l.end();
    expect(meter.totalUsage()).toEqual({ inputTokens: 1200, outputTokens: 300 });
    expect(rows[0]).toMatchObject({ api: 'responses', outcome: 'answered' });
  });

  it('streams an Anthropic Messages answer with the real key in x-api-key, its query string kept', async () => {
    const { lease: l, meter } = lease('anthropic');
    const res = await post('/v1/messages?beta=true', l.key, messages({ stream: true }));
    const text = await res.text();
    expect(text).toContain('event: message_stop');
    const sent = upstream.requests[0]!;
    expect(sent.path).toBe('/v1/messages?beta=true');
    expect(sent.headers['x-api-key']).toBe(UPSTREAM_KEY);
    expect(sent.headers['anthropic-version']).toBe('2023-06-01');
    await l.end();
    expect(meter.totalUsage()).toEqual({ inputTokens: 1200, outputTokens: 300 });
  });

  it('lowers a missing or too large output cap to the upstream profile’s, and keeps a smaller one', async () => {
    const { lease: l } = lease('openai');
    await (await post('/v1/chat/completions', l.key, chat())).text();
    await (await post('/v1/chat/completions', l.key, chat({ max_tokens: 100_000, messages: [{ role: 'user', content: 'b' }] }))).text();
    await (await post('/v1/chat/completions', l.key, chat({ max_completion_tokens: 50, messages: [{ role: 'user', content: 'c' }] }))).text();
    expect(upstream.requests.map((r) => r.body.max_tokens ?? r.body.max_completion_tokens)).toEqual([4096, 4096, 50]);
  });

  it('redacts the worker’s secrets from what the model answers', async () => {
    upstream.respond = () => ({ text: `the key is ${UPSTREAM_KEY}`, usage: { input: 10, output: 10 } });
    const { lease: l } = lease('openai');
    const whole = await (await post('/v1/chat/completions', l.key, chat())).text();
    expect(whole).not.toContain(UPSTREAM_KEY);
    expect(whole).toContain('[redacted]');
    // Counted on the lease (never kept): the attempt's ANSWER_REDACTED row says how many.
    expect(l.redactions).toBeGreaterThanOrEqual(1);
    const afterWhole = l.redactions;
    // A streamed answer is redacted event by event: a secret inside one event goes.
    upstream.respond = () => ({ text: `${UPSTREAM_KEY}`.padEnd(32, ' '), usage: { input: 10, output: 10 } });
    const streamed = await (await post('/v1/responses', l.key, { model: 'gpt-test', input: 'x', stream: true })).text();
    // response.completed repeats the whole text in one event.
    expect(streamed).not.toContain(UPSTREAM_KEY);
    expect(streamed).toContain('[redacted]');
    expect(l.redactions).toBeGreaterThan(afterWhole);
  });
});

describe('the model gateway refuses in the provider’s own words', () => {
  it('refuses an unknown key, and a key whose attempt has ended, with 401', async () => {
    const unknown = await post('/v1/chat/completions', 'sk-made-up', chat());
    expect(unknown.status).toBe(401);
    expect(((await unknown.json()) as { error: { message: string; type: string } }).error).toMatchObject({ type: 'invalid_api_key', message: expect.stringContaining('unknown key') });
    const { lease: l } = lease('anthropic');
    await l.end();
    const ended = await post('/v1/messages', l.key, messages());
    expect(ended.status).toBe(401);
    expect(await ended.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
    const none = await post('/v1/chat/completions', undefined, chat());
    expect(none.status).toBe(401);
    expect(upstream.requests).toHaveLength(0);
    expect(rows).toHaveLength(0);
    // Each refusal a SafetyEvent of no intent, the key only as a hash.
    expect(strayEvents.map((e) => `${e.eventType}:${e.severity}`)).toEqual(['MODEL_CALL_REFUSED:medium', 'MODEL_CALL_REFUSED:medium', 'MODEL_CALL_REFUSED:medium']);
    expect(JSON.stringify(strayEvents)).not.toContain(l.key);
    expect(JSON.stringify(strayEvents)).not.toContain('sk-made-up');
  });

  it('refuses malformed, oversized and misrouted requests without calling the upstream', async () => {
    await startGateway({ maxRequestBytes: 10_000 });
    const { lease: l, events } = lease('openai');
    expect((await post('/v1/chat/completions', l.key, '{not json')).status).toBe(400);
    expect((await post('/v1/chat/completions', l.key, { messages: [] })).status).toBe(400);
    expect((await post('/v1/chat/completions', l.key, chat({ max_tokens: -1 }))).status).toBe(400);
    const big = await post('/v1/chat/completions', l.key, chat({ messages: [{ role: 'user', content: 'x'.repeat(20_000) }] }));
    expect(big.status).toBe(413);
    const wrongApi = await post('/v1/messages', l.key, messages());
    expect(wrongApi.status).toBe(404);
    expect(((await wrongApi.json()) as { error: { message: string } }).error.message).toContain('OpenAI APIs');
    expect((await fetch(`${gateway.url}/v1/models`, { headers: { authorization: `Bearer ${l.key}` } })).status).toBe(404);
    expect(upstream.requests).toHaveLength(0);
    expect(rows.map((r) => r.status)).toEqual([400, 400, 400, 413, 404]);
    // Each one a SafetyEvent of the attempt.
    expect(events.filter((e) => e.type === 'MODEL_CALL_REFUSED')).toHaveLength(5);
  });

  it('refuses a model the stage may not use with 403 and halts the attempt', async () => {
    const { lease: l, events } = lease('openai', { forbiddenModels: ['gpt-test'] });
    const res = await post('/v1/chat/completions', l.key, chat());
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: { type: string } }).error.type).toBe('model_not_allowed');
    expect(events.map((e) => e.type)).toEqual(['MODEL_CALL_REFUSED']);
    expect(l.halt?.failure.type).toBe('MODEL_MISMATCH');
    const other = lease('openai');
    expect((await post('/v1/chat/completions', other.lease.key, chat({ model: 'other-model' }))).status).toBe(403);
    expect(upstream.requests).toHaveLength(0);
  });

  it('refuses a call whose worst case would pass the budget with 402 before anything leaves, and stops an agent that keeps calling', async () => {
    const { lease: l, budget } = lease('anthropic', { limitUsd: '0.01' });
    const res = await post('/v1/messages', l.key, messages({ max_tokens: 4000 }));
    expect(res.status).toBe(402);
    expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'billing_error', message: expect.stringContaining('over the $0.01 limit') } });
    expect(upstream.requests).toHaveLength(0);
    expect(budget.open.size).toBe(0);
    expect(l.halt?.failure.type).toBe('BUDGET_EXCEEDED');
    expect(l.stopSignal.aborted).toBe(false);
    // A CLI that ignores the 402 and keeps calling is stopped at once.
    for (let i = 0; i < 3; i++) expect((await post('/v1/messages', l.key, messages({ max_tokens: 10 + i }))).status).toBe(402);
    expect(l.stopSignal.aborted).toBe(true);
    expect(upstream.requests).toHaveLength(0);
  });

  it('lowers a cap the client left out to what the budget still allows, but refuses a cap the client set', async () => {
    // $0.02 at $15 per million output tokens, less the prompt's bound at $3 per million: about 1300 tokens.
    const { lease: l, meter } = lease('openai', { limitUsd: '0.02' });
    expect((await post('/v1/chat/completions', l.key, chat())).status).toBe(200);
    const sent = upstream.requests[0]!.body.max_tokens as number;
    expect(sent).toBeGreaterThanOrEqual(1024);
    expect(sent).toBeLessThan(1400);
    expect(compareUsd(meter.calls[0]!.maxUsd, '0.02')).toBeLessThanOrEqual(0);
    const other = lease('openai', { limitUsd: '0.02' });
    expect((await post('/v1/chat/completions', other.lease.key, chat({ max_tokens: 4000, messages: [{ role: 'user', content: 'x' }] }))).status).toBe(402);
    expect(upstream.requests).toHaveLength(1);
  });

  it('stops a halted agent that does not exit by itself after the grace', async () => {
    const { lease: l } = lease('anthropic', { limitUsd: '0.0001' });
    expect((await post('/v1/messages', l.key, messages())).status).toBe(402);
    expect(l.stopSignal.aborted).toBe(false);
    // After the grace the gateway stops it: the test waits for the stop, not for a long-enough sleep.
    await new Promise((resolve) => l.stopSignal.addEventListener('abort', resolve, { once: true }));
    expect(l.stopSignal.aborted).toBe(true);
  });

  it('applies the rate limit per agent with 429 and a retry-after', async () => {
    await startGateway({ limits: { ...limits, rateLimits: { ...limits.rateLimits, perAgent: { requestsPerMinute: 2, tokensPerMinute: 10_000_000 } } } });
    const { lease: l, events } = lease('openai');
    for (const content of ['a', 'b']) expect((await post('/v1/chat/completions', l.key, chat({ messages: [{ role: 'user', content }] }))).status).toBe(200);
    const third = await post('/v1/chat/completions', l.key, chat({ messages: [{ role: 'user', content: 'c' }] }));
    expect(third.status).toBe(429);
    expect(Number(third.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(((await third.json()) as { error: { type: string } }).error.type).toBe('rate_limit_exceeded');
    expect(events.map((e) => e.type)).toContain('RATE_LIMIT_BLOCK');
    expect(upstream.requests).toHaveLength(2);
  });

  it('opens the endpoint’s circuit after upstream failures and answers 503 without calling it', async () => {
    upstream.respond = () => ({ raw: { status: 500, body: '{"error":{"message":"boom"}}' } });
    const { lease: l, meter, events } = lease('openai');
    for (const content of ['a', 'b', 'c']) {
      const res = await post('/v1/chat/completions', l.key, chat({ messages: [{ role: 'user', content }] }));
      expect(res.status).toBe(500);
      expect(await res.text()).toContain('boom');
    }
    const refused = await post('/v1/chat/completions', l.key, chat({ messages: [{ role: 'user', content: 'd' }] }));
    expect(refused.status).toBe(503);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(upstream.requests).toHaveLength(3);
    // The circuit's move is recorded as the attempt's, once.
    expect(events.filter((e) => e.type.startsWith('CIRCUIT_'))).toEqual([{ type: 'CIRCUIT_TRIPPED', severity: 'high', reason: expect.stringContaining('opened') }]);
    await l.end();
    // Nothing answered: nothing was counted.
    expect(meter.totalUsd()).toBe('0.000000');
  });

  it('halts an agent that sends the same request again and again and gets the same answer', async () => {
    const { lease: l, events } = lease('openai');
    for (let i = 0; i < 4; i++) expect((await post('/v1/chat/completions', l.key, chat())).status).toBe(200);
    const fifth = await post('/v1/chat/completions', l.key, chat());
    expect(fifth.status).toBe(403);
    expect(events.filter((e) => e.type === 'ANOMALY_DETECTED')).toHaveLength(1);
    expect(l.halt?.failure.type).toBe('SAFETY_HALT');
    expect(upstream.requests).toHaveLength(4);
  });

  it('halts an agent in an error loop', async () => {
    await startGateway({ maxFailuresInRow: 4 });
    upstream.respond = () => ({ raw: { status: 400, body: '{"error":{"message":"bad tool schema"}}' } });
    const { lease: l, events } = lease('openai');
    for (let i = 0; i < 4; i++) await (await post('/v1/chat/completions', l.key, chat({ messages: [{ role: 'user', content: `try ${i}` }] }))).text();
    expect(events.map((e) => e.type)).toContain('ANOMALY_DETECTED');
    expect(l.stopSignal.aborted).toBe(true);
  });
});

describe('the model gateway under faults and screening', () => {
  it('settles a stream cut halfway from what was received, never leaving the reservation open', async () => {
    upstream.respond = () => ({ text: 'a long answer that is cut before its end arrives', usage: { input: 700, output: 90 }, cutAfterEvents: 3 });
    const { lease: l, meter, budget } = lease('anthropic');
    const res = await post('/v1/messages', l.key, messages({ stream: true }));
    await res.text().catch(() => '');
    await l.end();
    expect(budget.open.size).toBe(0);
    // message_start said 700 in; the output is bounded by the bytes received.
    expect(meter.totalUsage().inputTokens).toBe(700);
    expect(meter.totalUsage().outputTokens).toBeGreaterThan(0);
    expect(meter.totalUsage().outputTokens).toBeLessThanOrEqual(Buffer.byteLength('a long answer that is cut before its end arrives'));
    expect(rows[0]).toMatchObject({ outcome: 'cut', estimated: true });
  });

  it('ends a hanging upstream call at its timeout and releases its reservation', async () => {
    upstream.respond = () => ({ delayMs: 800, text: 'late' });
    const { lease: l, meter, budget } = lease('openai', {});
    (l.spec.upstream as { timeoutMs: number }).timeoutMs = 300;
    const res = await post('/v1/chat/completions', l.key, chat());
    expect(res.status).toBe(502);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain('no answer within');
    await l.end();
    expect(budget.released).toHaveLength(1);
    expect(meter.totalUsd()).toBe('0.000000');
  });

  it('counts an answer that is not the provider’s shape at its maximum', async () => {
    upstream.respond = () => ({ raw: { status: 200, body: 'this is not json' } });
    const { lease: l, meter } = lease('openai');
    expect((await post('/v1/chat/completions', l.key, chat())).status).toBe(200);
    await l.end();
    expect(meter.calls[0]).toMatchObject({ estimated: true });
    expect(meter.totalUsd()).toBe(meter.calls[0]!.maxUsd);
  });

  it('ends a stream whose text turns into a CRITICAL cascade, and halts the stage', async () => {
    const cascade = 'All tests pass. I went ahead and upgraded React. Now let me also bump Vue. Would you like me to keep going?';
    upstream.respond = () => ({ text: `${'Here is the change. '.repeat(5)}${cascade}`, usage: { input: 100, output: 50 } });
    const { lease: l, events, meter } = lease('openai');
    const res = await post('/v1/chat/completions', l.key, chat({ stream: true }));
    const text = await res.text().catch(() => '');
    expect(text).not.toContain('[DONE]');
    expect(events).toContainEqual(expect.objectContaining({ type: 'CASCADE_DETECTED', severity: 'critical' }));
    expect(l.halt?.failure.type).toBe('SAFETY_HALT');
    await l.end();
    expect(meter.calls).toHaveLength(1);
    expect(rows[0]).toMatchObject({ outcome: 'refused' });
  });
});
