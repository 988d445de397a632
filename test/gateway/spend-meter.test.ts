import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { createHttpAgent } from '../../src/activities/agents/http-agent';
import { createScriptedAgent } from '../../src/activities/agents/scripted-agent';
import { SpendMeter, type BudgetBook, type OpenCall, type PaidCall } from '../../src/gateway/spend-meter';
import type { AgentRequest } from '../../src/activities/agents';
import { costOf, inputTokenBound, maxCostOf, type PricingTable } from '../../src/safety/pricing';
import { AnthropicAgentProfileSchema, type HttpAgentProfile } from '../../src/shared/intent';
import { startModelServer, type ModelServer } from '../helpers/model-server';

/** Every paid call through the meter: its maximum reserved before it is sent, its cost counted after, also when the stage then fails. */

const PRICING: PricingTable = {
  'pricey-model': { inputUsdPerMillion: '10', outputUsdPerMillion: '30' },
  'other-model': { inputUsdPerMillion: '1', outputUsdPerMillion: '2' },
};

let server: ModelServer;
let worktree: string;
beforeAll(async () => {
  server = await startModelServer();
});
afterAll(async () => {
  await server.close();
});
beforeEach(() => {
  server.requests.length = 0;
  worktree = mkdtempSync(path.join(tmpdir(), 'warden-meter-'));
});
afterEach(() => {
  rmSync(worktree, { recursive: true, force: true });
});

/** A book that records what was reserved, settled and released, and refuses past `limitUsd` (when given). */
function recordingBook(limitUsd?: string) {
  const reserved: OpenCall[] = [];
  const settled: Array<{ call: OpenCall; paid: PaidCall }> = [];
  const released: OpenCall[] = [];
  const book: BudgetBook = {
    async reserve(call) {
      if (limitUsd !== undefined && Number(call.maxUsd) > Number(limitUsd)) {
        throw ApplicationFailure.create({ type: 'BUDGET_EXCEEDED', message: `$${call.maxUsd} is over $${limitUsd}`, nonRetryable: true });
      }
      reserved.push(call);
    },
    async settle(call, paid) {
      settled.push({ call, paid });
    },
    async release(call) {
      released.push(call);
    },
  };
  return { book, reserved, settled, released };
}

const profile = (extra: Record<string, unknown> = {}): HttpAgentProfile =>
  AnthropicAgentProfileSchema.parse({ kind: 'anthropic', model: 'pricey-model', baseUrl: server.url, maxTokens: 8000, ...extra });

function request(meter: SpendMeter, fields: Partial<AgentRequest> = {}): AgentRequest {
  return { intentId: 'meter-1', stage: 'lld', attempt: 1, prompt: '# Warden: lld\n\ndesign it', worktreePath: worktree, signal: new AbortController().signal, heartbeat: () => undefined, meter, ...fields };
}

async function failure(promise: Promise<unknown>): Promise<ApplicationFailure> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApplicationFailure);
  return error as ApplicationFailure;
}

test("an HTTP call reserves the prompt's token bound plus max_tokens at the model's price, and settles at the usage billed", async () => {
  const { book, reserved, settled } = recordingBook();
  const meter = new SpendMeter({ pricing: PRICING, declaredCapUsd: '0.01', book });
  server.respond = () => ({ text: '# Design', usage: { input: 1500, output: 700 } });
  await createHttpAgent(profile(), { mode: 'development', env: {} }).run(request(meter));
  const prompt = server.requests[0]!.prompt;
  const max = maxCostOf('pricey-model', inputTokenBound(prompt), 8000, PRICING);
  expect(inputTokenBound(prompt)).toBeGreaterThanOrEqual(Buffer.byteLength(prompt));
  // Not the declared $0.01: the real maximum of this call, known before it was sent.
  expect(reserved.map((c) => [c.maxUsd, c.bounded])).toEqual([[max, true]]);
  expect(settled.map((s) => s.paid.costUsd)).toEqual([costOf('pricey-model', { inputTokens: 1500, outputTokens: 700 }, PRICING)]);
  expect(meter.totalUsd()).toBe('0.036000');
});

test('triage that stays invalid after the repair attempt: both paid calls are counted though the stage fails', async () => {
  const { book, settled, released } = recordingBook();
  const meter = new SpendMeter({ pricing: PRICING, declaredCapUsd: '0.50', book });
  server.respond = () => ({ text: 'no JSON here', usage: { input: 200_000, output: 8_000 } });
  const err = await failure(createHttpAgent(profile(), { mode: 'development', env: {} }).run(request(meter, { stage: 'triage', prompt: '# Warden: triage' })));
  expect(err.type).toBe('INVALID_STRUCTURED_OUTPUT');
  expect(server.requests).toHaveLength(2);
  // $2.24 each: 200k × $10/M + 8k × $30/M.
  expect(settled.map((s) => s.paid.costUsd)).toEqual(['2.240000', '2.240000']);
  expect(released).toHaveLength(0);
  expect(meter.totalUsd()).toBe('4.480000');
  expect(meter.totalUsage()).toEqual({ inputTokens: 400_000, outputTokens: 16_000 });
});

test('a model mismatch after a paid answer: the answer is refused, its usage counted (at the answering model when priced)', async () => {
  const meter = new SpendMeter({ pricing: PRICING, declaredCapUsd: '0.50' });
  server.respond = () => ({ text: 'hi', model: 'other-model', usage: { input: 1000, output: 500 } });
  const err = await failure(createHttpAgent(profile(), { mode: 'development', env: {} }).run(request(meter)));
  expect(err.type).toBe('MODEL_MISMATCH');
  expect(meter.calls).toEqual([expect.objectContaining({ model: 'other-model', costUsd: '0.002000', usage: { inputTokens: 1000, outputTokens: 500 } })]);
});

test('an oversize answer is refused and counted at its maximum: its usage cannot be read', async () => {
  const meter = new SpendMeter({ pricing: PRICING, declaredCapUsd: '0.50' });
  server.respond = () => ({ text: 'x'.repeat(5000) });
  const err = await failure(createHttpAgent(profile({ maxResponseBytes: 1000 }), { mode: 'development', env: {} }).run(request(meter)));
  expect(err.type).toBe('AGENT_OUTPUT_TOO_LARGE');
  expect(meter.calls).toHaveLength(1);
  expect(meter.calls[0]).toMatchObject({ estimated: true, costUsd: meter.calls[0]!.maxUsd });
});

test('an error status is not billed: the reservation is released, nothing counted', async () => {
  const { book, released, settled } = recordingBook();
  const meter = new SpendMeter({ pricing: PRICING, declaredCapUsd: '0.50', book });
  server.respond = () => ({ raw: { status: 400, body: '{"error":"bad request"}' } });
  expect((await failure(createHttpAgent(profile(), { mode: 'development', env: {} }).run(request(meter)))).type).toBe('AGENT_FAILED');
  expect(released).toHaveLength(1);
  expect(settled).toHaveLength(0);
  expect(meter.totalUsd()).toBe('0.000000');
});

test('an unknown model is refused before any request is sent', async () => {
  const meter = new SpendMeter({ pricing: PRICING, declaredCapUsd: '0.50' });
  const err = await failure(createHttpAgent(profile({ model: 'local-qwen' }), { mode: 'development', env: {} }).run(request(meter)));
  expect(err).toMatchObject({ type: 'UNKNOWN_MODEL', nonRetryable: true });
  expect(err.message).toMatch(/no price for model "local-qwen".*no call was made/);
  expect(server.requests).toHaveLength(0);
});

test('refuseUnpriced: a model without a price is UNKNOWN_MODEL before the agent starts, naming the config to add it to; nothing is reserved', () => {
  const { book, reserved } = recordingBook();
  const meter = new SpendMeter({ pricing: PRICING, declaredCapUsd: '0.50', book });
  let thrown: unknown;
  try {
    meter.refuseUnpriced('gpt-unpriced');
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(ApplicationFailure);
  expect(thrown).toMatchObject({ type: 'UNKNOWN_MODEL', nonRetryable: true });
  expect((thrown as Error).message).toMatch(/^no price for model "gpt-unpriced": add it to the config's worker\.pricing, .*"gpt-unpriced": \{ "inputUsdPerMillion".*priced: other-model, pricey-model\); the agent was not started$/);
  expect(() => meter.refuseUnpriced('pricey-model')).not.toThrow();
  // A profile that names no model (a script, a bare command) has nothing to price up front.
  expect(() => meter.refuseUnpriced(undefined)).not.toThrow();
  expect(reserved).toHaveLength(0);
});

test('a budget that cannot take the next call refuses it before it is sent', async () => {
  const { book } = recordingBook('0.10');
  const meter = new SpendMeter({ pricing: PRICING, declaredCapUsd: '0.01', book });
  // max_tokens 8000 at $30/M alone is $0.24: over the $0.10 left, though the declared cap is $0.01.
  expect((await failure(createHttpAgent(profile(), { mode: 'development', env: {} }).run(request(meter)))).type).toBe('BUDGET_EXCEEDED');
  expect(server.requests).toHaveLength(0);
});

describe('scripted attempts', () => {
  function script(body: Record<string, unknown>): string {
    const file = path.join(worktree, '..', `script-${path.basename(worktree)}.json`);
    writeFileSync(file, JSON.stringify(body));
    return file;
  }

  test('usage of a priced model with no costUsd is priced from the table, not $0; the declared cap is reserved', async () => {
    const { book, reserved } = recordingBook();
    const meter = new SpendMeter({ pricing: PRICING, declaredCapUsd: '0.50', book });
    const scriptPath = script({ model: 'pricey-model', stages: { lld: [{ output: 'ok', usage: { inputTokens: 900, outputTokens: 120 } }] } });
    await createScriptedAgent(scriptPath).run(request(meter));
    expect(reserved.map((c) => [c.maxUsd, c.bounded])).toEqual([['0.500000', false]]);
    expect(meter.totalUsd()).toBe('0.012600');
  });

  test('usage of an unpriced model with no costUsd is UNKNOWN_MODEL before the attempt plays', async () => {
    const meter = new SpendMeter({ pricing: PRICING, declaredCapUsd: '0.50' });
    const scriptPath = script({ model: 'mystery-model-9', stages: { lld: [{ output: 'ok', edits: [{ path: 'a.txt', content: 'x' }], usage: { inputTokens: 900, outputTokens: 120 } }] } });
    expect((await failure(createScriptedAgent(scriptPath).run(request(meter)))).type).toBe('UNKNOWN_MODEL');
    expect(meter.calls).toHaveLength(0);
  });

  test('a step that reports more than the declared cap is counted at its real cost, marked as an overrun', async () => {
    const meter = new SpendMeter({ pricing: PRICING, declaredCapUsd: '0.50' });
    const scriptPath = script({ model: 'anything', stages: { lld: [{ output: 'ok', costUsd: 0.9 }] } });
    await createScriptedAgent(scriptPath).run(request(meter));
    expect(meter.calls).toEqual([expect.objectContaining({ costUsd: '0.900000', maxUsd: '0.500000', overrun: true })]);
  });
});
