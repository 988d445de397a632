import { ApplicationFailure } from '@temporalio/common';
import { callModel, retryAfterMs } from '../../src/activities/agents/model-http';
import { SpendMeter } from '../../src/gateway/spend-meter';
import { PROFILE_DEFAULTS } from '../../src/config/profiles';
import { AnthropicAgentProfileSchema, OpenAiAgentProfileSchema, type HttpAgentProfile } from '../../src/shared/intent';
import { startModelServer, type ModelServer } from '../helpers/model-server';

/** The HTTP model call against local servers speaking the Anthropic and OpenAI wire formats. */

let server: ModelServer;
beforeAll(async () => {
  server = await startModelServer();
});
afterAll(async () => {
  await server.close();
});
beforeEach(() => {
  server.requests.length = 0;
});

const anthropic = (extra: Record<string, unknown> = {}): HttpAgentProfile =>
  AnthropicAgentProfileSchema.parse({ kind: 'anthropic', model: 'claude-sonnet-4-5', baseUrl: server.url, apiKeyEnv: ['KEY_A', 'KEY_B'], maxTokens: 2048, ...extra });
const openai = (extra: Record<string, unknown> = {}): HttpAgentProfile =>
  OpenAiAgentProfileSchema.parse({ kind: 'openai', model: 'gpt-4.1', baseUrl: `${server.url}/v1`, apiKeyEnv: ['KEY_A'], ...extra });

const env = { KEY_A: 'sk-first', KEY_B: 'sk-second' };
/** A meter pricing by the default table, with no budgets behind it. */
const meter = (): SpendMeter => new SpendMeter({ pricing: PROFILE_DEFAULTS.default.worker.pricing, declaredCapUsd: '0.50' });
const call = (profile: HttpAgentProfile, environment: NodeJS.ProcessEnv = env, spend: SpendMeter = meter()) =>
  callModel(profile, '# Warden: triage (attempt 1)\n\nhello', { env: environment, signal: new AbortController().signal, heartbeat: () => undefined, maxRetryAfterMs: 5_000, meter: spend });

async function failure(promise: Promise<unknown>): Promise<ApplicationFailure> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApplicationFailure);
  return error as ApplicationFailure;
}

test('Anthropic: the request has the key, version, model, max tokens and the prompt; the answer and usage are read', async () => {
  server.respond = () => ({ text: 'answer', model: 'claude-sonnet-4-5-20250929', usage: { input: 1200, output: 340 } });
  expect(await call(anthropic())).toEqual({ text: 'answer', model: 'claude-sonnet-4-5-20250929', usage: { inputTokens: 1200, outputTokens: 340 } });
  const [request] = server.requests;
  expect(request!.path).toBe('/v1/messages');
  expect(request!.headers).toMatchObject({ 'x-api-key': 'sk-first', 'anthropic-version': '2023-06-01', 'content-type': 'application/json' });
  expect(request!.body).toEqual({ model: 'claude-sonnet-4-5', max_tokens: 2048, messages: [{ role: 'user', content: '# Warden: triage (attempt 1)\n\nhello' }] });
});

test('OpenAI-compatible: bearer key, /chat/completions under the base URL, usage from prompt/completion tokens', async () => {
  server.respond = () => ({ text: 'hi', usage: { input: 10, output: 5 } });
  expect(await call(openai())).toMatchObject({ text: 'hi', model: 'gpt-4.1', usage: { inputTokens: 10, outputTokens: 5 } });
  expect(server.requests[0]).toMatchObject({ path: '/v1/chat/completions', headers: { authorization: 'Bearer sk-first' }, body: { model: 'gpt-4.1', max_tokens: 8192 } });
});

test("a base URL in the other provider's form reaches the same paths: OpenAI's without /v1, Anthropic's with it", async () => {
  server.respond = () => ({ text: 'ok', usage: { input: 1, output: 1 } });
  await call(openai({ baseUrl: server.url }));
  await call(anthropic({ baseUrl: `${server.url}/v1` }));
  expect(server.requests.map((r) => r.path)).toEqual(['/v1/chat/completions', '/v1/messages']);
});

test('a local endpoint needs no key; a cloud one without a key stops at once', async () => {
  server.respond = () => ({ text: 'local' });
  expect((await call(openai({ apiKeyEnv: ['NOT_SET'] }), {})).text).toBe('local');
  expect(server.requests[0]!.headers.authorization).toBeUndefined();
  const err = await failure(call(AnthropicAgentProfileSchema.parse({ kind: 'anthropic', model: 'claude-sonnet-4-5' }), {}));
  expect(err).toMatchObject({ type: 'CREDENTIALS_EXHAUSTED', nonRetryable: true });
  expect(err.message).toMatch(/set ANTHROPIC_API_KEY/);
});

test('429 with retry-after: waits that long, then the answer', async () => {
  server.respond = (_r, i) => (i === 0 ? { raw: { status: 429, headers: { 'retry-after': '1' }, body: '{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}' } } : { text: 'after the wait' });
  const started = Date.now();
  expect((await call(anthropic())).text).toBe('after the wait');
  expect(Date.now() - started).toBeGreaterThanOrEqual(950);
  expect(server.requests).toHaveLength(2);
});

test('a retry-after longer than we wait ends the call with a retryable RATE_LIMITED carrying the delay', async () => {
  server.respond = () => ({ raw: { status: 429, headers: { 'retry-after': '120' }, body: '{}' } });
  const err = await failure(call(anthropic()));
  expect(err).toMatchObject({ type: 'RATE_LIMITED', nonRetryable: false });
  expect(err.nextRetryDelay).toBe(120_000);
});

test('5xx: retried; three in a row is a retryable MODEL_UNAVAILABLE (the circuit breaker counts it)', async () => {
  server.respond = (_r, i) => (i < 2 ? { raw: { status: 500, body: 'oops' } } : { text: 'third time' });
  expect((await call(anthropic())).text).toBe('third time');
  server.requests.length = 0;
  server.respond = () => ({ raw: { status: 529, body: '{"type":"error","error":{"type":"overloaded_error"}}' } });
  const err = await failure(call(anthropic()));
  expect(err).toMatchObject({ type: 'MODEL_UNAVAILABLE', nonRetryable: false });
  expect(server.requests).toHaveLength(3);
});

test('malformed JSON and non-provider bodies are retried, then MODEL_UNAVAILABLE', async () => {
  server.respond = () => ({ raw: { status: 200, body: '{"model": "claude-sonnet-4-5", "content": [' } });
  expect((await failure(call(anthropic()))).message).toMatch(/the answer is not JSON/);
  server.respond = () => ({ raw: { status: 200, body: '{"hello": "world"}' } });
  expect((await failure(call(anthropic()))).message).toMatch(/not a anthropic response/);
});

test('an answer from another model fails closed; an alias is accepted', async () => {
  server.respond = () => ({ text: 'cheaper', model: 'claude-haiku-3' });
  const err = await failure(call(anthropic()));
  expect(err).toMatchObject({ type: 'MODEL_MISMATCH', nonRetryable: true });
  expect(err.message).toBe('asked claude-sonnet-4-5, but claude-haiku-3 answered: refused (add it to modelAliases if it is the same model)');
  server.respond = () => ({ text: 'fine', model: 'sonnet-latest' });
  expect((await call(anthropic({ modelAliases: ['sonnet-latest'] }))).text).toBe('fine');
});

test('an answer slower than the timeout is abandoned and retried', async () => {
  server.respond = (_r, i) => (i === 0 ? { delayMs: 1500, text: 'too late' } : { text: 'in time' });
  expect((await call(anthropic({ timeout: '300ms' }))).text).toBe('in time');
  server.respond = () => ({ delayMs: 1500, text: 'too late' });
  expect((await failure(call(anthropic({ timeout: '300ms' })))).message).toMatch(/no answer within 300ms/);
});

test('a huge answer is refused', async () => {
  server.respond = () => ({ text: 'x'.repeat(300_000) });
  expect(await failure(call(anthropic({ maxResponseBytes: 100_000 })))).toMatchObject({ type: 'AGENT_OUTPUT_TOO_LARGE', nonRetryable: true });
});

test('keys in turn: an auth error moves to the next key; all refused (auth or quota) stops the stage', async () => {
  server.respond = (r) => (r.headers['x-api-key'] === 'sk-first' ? { raw: { status: 401, body: '{"type":"error","error":{"type":"authentication_error"}}' } } : { text: 'second key works' });
  expect((await call(anthropic())).text).toBe('second key works');
  expect(server.requests.map((r) => r.headers['x-api-key'])).toEqual(['sk-first', 'sk-second']);
  server.requests.length = 0;
  server.respond = () => ({ raw: { status: 429, body: '{"error":{"code":"insufficient_quota","message":"You exceeded your current quota"}}' } });
  const err = await failure(call(anthropic()));
  expect(err).toMatchObject({ type: 'CREDENTIALS_EXHAUSTED', nonRetryable: true });
  expect(err.message).toMatch(/every API key .* was refused \(key 1: HTTP 429.*; key 2: HTTP 429/);
  expect(JSON.stringify(err.message)).not.toContain('sk-');
});

test('retry-after: seconds or an HTTP date', () => {
  expect(retryAfterMs('2')).toBe(2000);
  expect(retryAfterMs(new Date(Date.now() + 3000).toUTCString(), Date.now())).toBeGreaterThan(1000);
  expect(retryAfterMs('soon')).toBeUndefined();
});

test('development mode: the worker refuses a cloud endpoint before any request; a local one runs', async () => {
  const { createHttpAgent } = await import('../../src/activities/agents/http-agent');
  const request = { intentId: 'x', stage: 'lld' as const, attempt: 1, prompt: '# Warden: lld', worktreePath: '/nonexistent', signal: new AbortController().signal, heartbeat: () => undefined, meter: meter() };
  const cloudProfile = AnthropicAgentProfileSchema.parse({ kind: 'anthropic', model: 'claude-sonnet-4-5', baseUrl: 'https://api.anthropic.com' });
  let fetched = false;
  const spy = (async () => {
    fetched = true;
    throw new Error('no network here');
  }) as unknown as typeof fetch;
  const err = await failure(createHttpAgent(cloudProfile, { mode: 'development', env, fetch: spy }).run(request));
  expect(err).toMatchObject({ type: 'MODE_VIOLATION', nonRetryable: true });
  expect(fetched).toBe(false);
  server.respond = () => ({ text: '# Design' });
  expect((await createHttpAgent(anthropic(), { mode: 'development', env }).run(request)).output).toBe('# Design');
});
