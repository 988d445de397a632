import { startIntent } from '../../src/client/intents';
import { SAMPLE_LLD, SAMPLE_SPEC } from '../../src/client/sample-repo';
import { ExchangeStore } from '../../src/ledger/exchange-store';
import type { IntentInput } from '../../src/shared/intent';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { makeSampleRepo, useTestWorld, waitFor } from '../helpers/env';
import { IMPL_ANSWER as IMPL, REVIEW_ANSWER as REVIEW, TRIAGE_ANSWER as TRIAGE } from '../helpers/stage-answers';
import { stageOf, useModelServer, type ModelServer, type Reply } from '../helpers/model-server';

/**
 * The scope judge end to end: real workflows, the worker's gateway, and a local server that
 * speaks the providers' wire formats for the stages' models and for the judge's. What is checked
 * is the mechanics (what the judge is asked, through what, at what cost, and what its verdict
 * does), not how well a model would judge.
 */

const world = useTestWorld('scope-judge');
const server = useModelServer();

const JUDGE_MODEL = 'gpt-4.1-mini';

const isJudge = (prompt: string): boolean => prompt.startsWith('You judge whether a coding agent stayed within its task.');

/** Stages answer with valid documents; the judge as `judge` says. */
function answering(judge: () => Reply): ModelServer['respond'] {
  const normal: Record<string, string> = { triage: TRIAGE, lld: SAMPLE_LLD, spec: SAMPLE_SPEC, impl: IMPL, review: REVIEW };
  return (request) => (isJudge(request.prompt) ? judge() : { text: normal[stageOf(request.prompt)] ?? 'ok' });
}

let n = 0;
async function start(judgeAt: string = `${server().url}/v1`, extra: Partial<IntentInput> = {}) {
  n += 1;
  const id = `judge${n}-${Date.now()}`;
  const claude = { kind: 'anthropic' as const, model: 'claude-sonnet-4-5', baseUrl: server().url, apiKeyEnv: ['WARDEN_TEST_MODEL_KEY'] };
  const gpt = { kind: 'openai' as const, model: 'gpt-4.1', baseUrl: `${server().url}/v1`, apiKeyEnv: ['WARDEN_TEST_MODEL_KEY'] };
  const judge = { agent: { kind: 'openai' as const, name: 'judge', model: JUDGE_MODEL, baseUrl: judgeAt, apiKeyEnv: ['WARDEN_TEST_MODEL_KEY'] }, stages: ['impl' as const] };
  const handle = await startIntent(
    world().client,
    { id, goal: 'Add slugify', repoPath: makeSampleRepo(), paths: ['lib/**'], agent: claude, stageAgents: { impl: gpt }, judge, ...extra, limits: { cooldown: '0s' } },
    world().taskQueue,
  );
  return { handle, id };
}

const gateAfterImpl = async (handle: Awaited<ReturnType<typeof start>>['handle']) =>
  waitFor(async () => {
    const state = await handle.query(stateQuery);
    return state.pendingGate && state.stage !== 'triage' && state.stage !== 'lld' && state.stage !== 'spec' ? state.pendingGate : undefined;
  }, 120_000, 'the gate after impl');

async function cascadeRows(id: string): Promise<Array<{ level: string; judge?: { verdict: string; reason: string; model: string } }>> {
  const { rows } = await world().pool.query("SELECT metadata FROM safety_events WHERE intent_id = $1 AND event_type = 'CASCADE_DETECTED' ORDER BY seq", [id]);
  return rows.map((r: { metadata: { level: string; judge?: { verdict: string; reason: string; model: string } } }) => ({ level: r.metadata.level, ...(r.metadata.judge ? { judge: r.metadata.judge } : {}) }));
}

test('a judge that finds impl went beyond the goal puts a person at the cascade gate; its call is metered, recorded and never on the stage\'s model', async () => {
  server().respond = answering(() => ({ text: '{"verdict": "beyond", "reason": "it also rewrites the logging module"}', model: JUDGE_MODEL }));
  const { handle, id } = await start();
  const gate = await gateAfterImpl(handle);
  expect(gate.gate).toBe('cascade');
  expect(gate.prompt).toContain(`the scope judge (${JUDGE_MODEL}) finds the answer goes beyond the goal: it also rewrites the logging module`);

  const judged = server().requests.filter((r) => isJudge(r.prompt));
  expect(judged).toHaveLength(1);
  expect(judged[0]!.body.model).toBe(JUDGE_MODEL);
  expect(judged[0]!.prompt).toContain('## Goal\nAdd slugify');
  expect(judged[0]!.prompt).toContain('slugify lower-cases, then dashes.');
  // Through the gateway, with the attempt's key, never the provider's key or the stage's model.
  expect(judged[0]!.headers.authorization).toBe('Bearer sk-test-model-key-0123456789');
  const calls = await world().ledger.modelCalls.ofIntent(id);
  expect(calls.filter((c) => c.modelId === JUDGE_MODEL).map((c) => `${c.stage}:${c.attempt}:${c.outcome}`)).toEqual(['impl-judge:1:answered']);
  const { rows: costs } = await world().pool.query("SELECT stage, agent_id, usd::text AS usd FROM cost_events WHERE intent_id = $1 AND model_id = $2", [id, JUDGE_MODEL]);
  // Part of the attempt's spend (under the stage's agent, here the unnamed openai profile), at the
  // judge's model's price: 1000 input and 200 output tokens at $0.40 / $1.60 per million.
  expect(costs).toEqual([{ stage: 'impl', agent_id: 'openai', usd: '0.000720' }]);
  expect(await cascadeRows(id)).toEqual([{ level: 'HIGH', judge: { verdict: 'beyond', reason: 'it also rewrites the logging module', model: JUDGE_MODEL } }]);
  // Recorded with the intent's exchanges, apart from impl's own calls of the attempt.
  const recording = await new ExchangeStore(world().pool).recordingOf(id);
  expect(recording.exchanges.filter((e) => e.stage.startsWith('impl')).map((e) => `${e.stage}:${e.attempt}:${e.order}:${e.modelId}`)).toEqual(['impl:1:1:gpt-4.1', `impl-judge:1:1:${JUDGE_MODEL}`]);

  await handle.signal(decideSignal, { gate: 'cascade', decision: 'reject', by: 'tester', reason: 'out of scope' });
  expect((await handle.result()).status).toBe('rejected');
});

test('a judge that finds the answer within the goal lets the intent go on to its merge gate', async () => {
  server().respond = answering(() => ({ text: 'Checked.\n{"verdict": "within", "reason": "only slugify was added"}', model: JUDGE_MODEL }));
  const { handle, id } = await start();
  const gate = await gateAfterImpl(handle);
  expect(gate.gate).toBe('merge');
  expect(server().requests.filter((r) => isJudge(r.prompt))).toHaveLength(1);
  expect(await cascadeRows(id)).toEqual([]);
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');
});

test('no verdict is no pass: an answer without one, or a judge that cannot be reached, sends impl to a person', async () => {
  server().respond = answering(() => ({ text: 'I think it is probably fine.', model: JUDGE_MODEL }));
  const first = await start();
  const unclear = await gateAfterImpl(first.handle);
  expect(unclear.gate).toBe('cascade');
  expect(unclear.prompt).toContain("gave no verdict: the judge's answer names no verdict: I think it is probably fine.");
  await first.handle.signal(decideSignal, { gate: 'cascade', decision: 'reject', by: 'tester', reason: 'r' });
  await first.handle.result();

  // A port nothing listens on: the call fails, the stage does not (it is not run again), a person decides.
  const second = await start('http://127.0.0.1:9/v1');
  const unreachable = await gateAfterImpl(second.handle);
  expect(unreachable.gate).toBe('cascade');
  expect(unreachable.prompt).toContain(`the scope judge (${JUDGE_MODEL}) gave no verdict`);
  expect((await cascadeRows(second.id))[0]!.judge!.verdict).toBe('unavailable');
  expect(server().requests.filter((r) => stageOf(r.prompt) === 'impl')).toHaveLength(2);
  await second.handle.signal(decideSignal, { gate: 'cascade', decision: 'reject', by: 'tester', reason: 'r' });
  await second.handle.result();
});

test('a judge on the stage\'s own model is not asked, and the stage goes to a person', async () => {
  server().respond = answering(() => ({ text: '{"verdict": "within", "reason": "fine"}', model: 'gpt-4.1' }));
  const { handle, id } = await start(undefined, {
    judge: { agent: { kind: 'openai', name: 'judge', model: 'gpt-4.1', baseUrl: `${server().url}/v1`, apiKeyEnv: ['WARDEN_TEST_MODEL_KEY'], modelAliases: [], maxTokens: 4096, timeout: '5m', maxResponseBytes: 8_388_608 }, stages: ['impl'] },
  });
  const gate = await gateAfterImpl(handle);
  expect(gate.gate).toBe('cascade');
  expect(gate.prompt).toContain('gpt-4.1 wrote the answer, and a model never judges its own answer');
  expect(server().requests.filter((r) => isJudge(r.prompt))).toHaveLength(0);
  expect((await cascadeRows(id))[0]!.judge!.verdict).toBe('unavailable');
  await handle.signal(decideSignal, { gate: 'cascade', decision: 'reject', by: 'tester', reason: 'r' });
  await handle.result();
});
