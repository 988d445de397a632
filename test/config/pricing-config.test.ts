import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { intentFromFlags } from '../../src/client/intent-input';
import { resolveConfig } from '../../src/config/load';
import { PROFILE_DEFAULTS } from '../../src/config/profiles';
import { costOf, isPriced } from '../../src/safety/pricing';
import { UserError } from '../../src/shared/errors';
import { makeSampleRepo } from '../helpers/env';

/** Model prices: the table the profiles carry, what a config adds to it, and the check before an intent starts. */

const ROOT = path.resolve(__dirname, '../..');

test('the default table prices every model the README and the docs name with --model', () => {
  const documents = ['README.md', ...readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => path.join('docs', f))];
  const text = documents.map((file) => readFileSync(path.join(ROOT, file), 'utf8')).join('\n');
  const named = [...new Set([...text.matchAll(/--model\s+([a-z0-9][\w.-]*)/g)].map((m) => m[1]!))];
  expect(named).toEqual(expect.arrayContaining(['claude-sonnet-4-5', 'gpt-5-codex', 'gpt-4.1']));
  expect(named.filter((model) => !isPriced(model, PROFILE_DEFAULTS.default.worker.pricing))).toEqual([]);
});

test("a config's worker.pricing adds models and overrides the table's rows, keeping the others", () => {
  const { pricing } = resolveConfig({
    worker: { pricing: { 'my-model': { inputUsdPerMillion: '1', outputUsdPerMillion: '4' }, 'gpt-4.1': { inputUsdPerMillion: '1.5', outputUsdPerMillion: '6' } } },
  }).worker;
  expect(pricing['my-model']).toEqual({ inputUsdPerMillion: '1', outputUsdPerMillion: '4' });
  expect(pricing['gpt-4.1']).toEqual({ inputUsdPerMillion: '1.5', outputUsdPerMillion: '6' });
  expect(pricing['claude-sonnet-4-5']).toEqual(PROFILE_DEFAULTS.default.worker.pricing['claude-sonnet-4-5']);
  // 1000 input and 500 output tokens at the config's price.
  expect(costOf('gpt-4.1', { inputTokens: 1000, outputTokens: 500 }, pricing)).toBe('0.004500');
});

test('a bad price is named, field by field', () => {
  const bad = (row: unknown) => () => resolveConfig({ worker: { pricing: { 'my-model': row } } });
  expect(bad({ inputUsdPerMillion: '-1', outputUsdPerMillion: '4' })).toThrow(/worker\.pricing\.my-model\.inputUsdPerMillion: a USD amount/);
  expect(bad({ inputUsdPerMillion: 1, outputUsdPerMillion: '4' })).toThrow(/worker\.pricing\.my-model\.inputUsdPerMillion/);
  expect(bad({ inputUsdPerMillion: '1' })).toThrow(/worker\.pricing\.my-model\.outputUsdPerMillion/);
  expect(bad({ inputUsdPerMillion: '1', outputUsdPerMillion: '4', cachedUsdPerMillion: '0.1' })).toThrow(/worker\.pricing\.my-model: Unrecognized key: "cachedUsdPerMillion"/);
});

describe('warden run refuses a model without a price before anything starts', () => {
  const repo = makeSampleRepo();
  // --cmd: any program will do, the CLI does not run here; a local URL passes development mode.
  const codex = { repo, goal: 'Add slugify', agent: 'codex', cmd: '/bin/true', modelUrl: 'http://127.0.0.1:9' };
  const refusal = (run: () => unknown): UserError => {
    try {
      run();
    } catch (error) {
      expect(error).toBeInstanceOf(UserError);
      expect((error as UserError).exitCode).toBe(2);
      return error as UserError;
    }
    throw new Error('expected a UserError');
  };

  test("a CLI's --model: refused with how to price it; accepted once the config prices it", () => {
    const message = refusal(() => intentFromFlags({ ...codex, model: 'some-unpriced-model' }, process.cwd(), resolveConfig({}))).message;
    expect(message).toMatch(/^--model: no price for model "some-unpriced-model": add it to the config's worker\.pricing, e\.g\. "worker": \{ "pricing": \{ "some-unpriced-model": \{ "inputUsdPerMillion": .*"outputUsdPerMillion": .*USD per million tokens; priced: .*gpt-5-codex/);
    const priced = resolveConfig({ worker: { pricing: { 'some-unpriced-model': { inputUsdPerMillion: '0', outputUsdPerMillion: '0' } } } });
    expect(intentFromFlags({ ...codex, model: 'some-unpriced-model' }, process.cwd(), priced).agent).toMatchObject({ upstream: { model: 'some-unpriced-model' } });
    // The README's own example is priced.
    expect(intentFromFlags({ ...codex, model: 'gpt-5-codex' }, process.cwd(), resolveConfig({})).agent).toMatchObject({ upstream: { model: 'gpt-5-codex' } });
  });

  test("every model the config's routing puts on a stage, HTTP profiles and command upstreams alike", () => {
    const local = { kind: 'openai', model: 'qwen2.5-coder', baseUrl: 'http://127.0.0.1:8080/v1' };
    const coder = { kind: 'command', cli: 'codex', command: '/bin/true', upstream: { kind: 'openai', model: 'my-codex', baseUrl: 'http://127.0.0.1:8080' } };
    const agents = { local, coder, spare: { ...local, model: 'never-routed' } };
    const routed = (pricing: Record<string, { inputUsdPerMillion: string; outputUsdPerMillion: string }>) =>
      resolveConfig({ agents, routing: { default: 'local', impl: 'coder' }, worker: { pricing } });
    const free = { inputUsdPerMillion: '0', outputUsdPerMillion: '0' };
    expect(refusal(() => intentFromFlags({ repo, goal: 'x' }, process.cwd(), routed({ 'my-codex': free }))).message).toMatch(/^agent "local": no price for model "qwen2\.5-coder"/);
    expect(refusal(() => intentFromFlags({ repo, goal: 'x' }, process.cwd(), routed({ 'qwen2.5-coder': free }))).message).toMatch(/^agent "coder": no price for model "my-codex"/);
    // A profile no stage uses needs no price.
    const intent = intentFromFlags({ repo, goal: 'x' }, process.cwd(), routed({ 'qwen2.5-coder': free, 'my-codex': free }));
    expect(intent.stageAgents?.impl).toMatchObject({ name: 'coder' });
  });
});
