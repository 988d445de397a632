import { execFileSync } from 'node:child_process';
import { artifactName } from '../../src/activities/lineage';
import { startIntent } from '../../src/client/intents';
import { SAMPLE_LLD, SAMPLE_SPEC } from '../../src/client/sample-repo';
import type { IntentInput } from '../../src/shared/intent';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { AGENT_STAGES } from '../../src/shared/stages';
import { git, makeSampleRepo, useTestWorld, waitFor } from '../helpers/env';
import { fencedJson as json, GOOD_FILE, IMPL_ANSWER as IMPL, REVIEW_ANSWER as REVIEW, TRIAGE_ANSWER as TRIAGE } from '../helpers/stage-answers';
import { stageOf, useModelServer, type ModelServer, type Reply } from '../helpers/model-server';

/**
 * Intents on HTTP model agents, end to end through real workflows: triage, LLD, spec and review
 * on an Anthropic-speaking endpoint, impl on an OpenAI-speaking one, both local servers.
 */

const world = useTestWorld('http-agents');
const server = useModelServer();


/** Answers each stage with a valid document unless `overrides` says otherwise. */
function answering(overrides: Record<string, (n: number) => Reply> = {}): ModelServer['respond'] {
  const seen: Record<string, number> = {};
  const normal: Record<string, string> = { triage: TRIAGE, lld: SAMPLE_LLD, spec: SAMPLE_SPEC, impl: IMPL, review: REVIEW };
  return (request) => {
    const stage = stageOf(request.prompt);
    seen[stage] = (seen[stage] ?? 0) + 1;
    return overrides[stage]?.(seen[stage]) ?? { text: normal[stage] ?? 'ok' };
  };
}

let n = 0;
async function start(extra: Partial<IntentInput> = {}) {
  n += 1;
  const repo = makeSampleRepo();
  const id = `h${n}-${Date.now()}`;
  const claude = { kind: 'anthropic' as const, model: 'claude-sonnet-4-5', baseUrl: server().url, apiKeyEnv: ['WARDEN_TEST_MODEL_KEY'] };
  const gpt = { kind: 'openai' as const, model: 'gpt-4.1', baseUrl: `${server().url}/v1`, apiKeyEnv: ['WARDEN_TEST_MODEL_KEY'] };
  const handle = await startIntent(
    world().client,
    { id, goal: 'Add slugify', repoPath: repo, paths: ['lib/**'], agent: claude, stageAgents: { impl: gpt }, ...extra, limits: { cooldown: '0s', ...extra.limits } },
    world().taskQueue,
  );
  return { handle, repo, id };
}

async function costs(id: string): Promise<string[]> {
  const { rows } = await world().pool.query('SELECT stage, model_id, usd::text AS usd FROM cost_events WHERE intent_id = $1 ORDER BY timestamp', [id]);
  return rows.map((r: { stage: string; model_id: string; usd: string }) => `${r.stage}:${r.model_id}:${r.usd}`);
}

test('a whole intent on two HTTP models: routed per stage, the LLD and the files in the impl prompt, usage priced', async () => {
  server().respond = answering();
  const { handle, repo, id } = await start();
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');
  expect(git(repo, 'show', 'main:lib/strings.js')).toBe(GOOD_FILE.trimEnd()); // git() trims the output

  expect(server().requests.map((r) => `${stageOf(r.prompt)}→${r.path}`)).toEqual([
    'triage→/v1/messages',
    'lld→/v1/messages',
    'spec→/v1/messages',
    'impl→/v1/chat/completions',
    'review→/v1/messages',
  ]);
  expect(server().requests[0]!.headers['x-api-key']).toBe('sk-test-model-key-0123456789');
  const impl = server().requests[3]!.prompt;
  expect(impl).toContain('## Earlier artifact: 02-lld.md');
  expect(impl).toContain('### lib/strings.js');
  expect(impl).toContain('<<<<<<< SEARCH');
  // The lineage keeps each prompt as the model received it: impl's with the files and the edit format the agent added.
  server().requests.forEach((request, i) => {
    const recorded = execFileSync('git', ['show', `refs/warden/lineage/${id}:${artifactName(AGENT_STAGES[i]!, 1, '.prompt.md')}`], { cwd: repo, encoding: 'utf8' });
    expect(recorded).toBe(request.prompt);
  });
  // 1000 input + 200 output tokens a call: Sonnet $3/$15 per million, GPT-4.1 $2/$8.
  expect(await costs(id)).toEqual(['triage:claude-sonnet-4-5:0.006000', 'lld:claude-sonnet-4-5:0.006000', 'spec:claude-sonnet-4-5:0.006000', 'impl:gpt-4.1:0.003600', 'review:claude-sonnet-4-5:0.006000']);
  // the key appears nowhere in the ledger
  const { rows } = await world().pool.query("SELECT count(*)::int AS n FROM safety_events WHERE metadata::text LIKE '%sk-test-model-key%' OR reason LIKE '%sk-test-model-key%'");
  expect(rows[0].n).toBe(0);
  // Every call went through the model gateway: one model_calls row each, the same spend.
  const calls = await world().ledger.modelCalls.ofIntent(id);
  expect(calls.map((c) => `${c.stage}:${c.api}:${c.modelId}:${c.outcome}:${c.usd}`)).toEqual([
    'triage:messages:claude-sonnet-4-5:answered:0.006000',
    'lld:messages:claude-sonnet-4-5:answered:0.006000',
    'spec:messages:claude-sonnet-4-5:answered:0.006000',
    'impl:chat:gpt-4.1:answered:0.003600',
    'review:messages:claude-sonnet-4-5:answered:0.006000',
  ]);
});

test('impl edits outside the declared paths are refused before anything is written', async () => {
  server().respond = answering({ impl: () => ({ text: `${IMPL}\n\`\`\`file:package.json\n{"scripts": {"test": "true"}}\n\`\`\`\n` }) });
  const { handle, repo, id } = await start();
  await expect(handle.result()).rejects.toThrow();
  const state = await handle.query(stateQuery);
  expect(state.error).toMatch(/edits refused before anything was written: package.json is outside the declared paths \(lib\/\*\*\)/);
  expect(git(repo, 'show', `warden/${id}:package.json`)).toBe(git(repo, 'show', 'main:package.json'));
  expect(git(repo, 'show', `warden/${id}:lib/strings.js`)).toBe(git(repo, 'show', 'main:lib/strings.js'));
});

test('a triage answer without its JSON gets one repair attempt with the validation error', async () => {
  server().respond = answering({ triage: (k) => ({ text: k === 1 ? 'Looks low risk to me.' : TRIAGE }) });
  const { handle } = await start();
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
  const triage = server().requests.filter((r) => stageOf(r.prompt) === 'triage');
  expect(triage).toHaveLength(2);
  expect(triage[1]!.prompt).toMatch(/## Your previous answer\nLooks low risk to me\.[\s\S]*## Why it was refused\nno JSON object found/);
  expect((await handle.query(stateQuery)).risk).toEqual({ class: 'LOW', confidence: 0.9, structured: true });
  await handle.signal(decideSignal, { gate: 'merge', decision: 'reject', by: 'tester', reason: 'seen enough' });
  await handle.result();
});

test('a review that stays invalid after the repair fails the stage, its raw answer kept', async () => {
  server().respond = answering({ review: () => ({ text: `Fine.${json({ verdict: 'MAYBE' })}` }) });
  const { handle } = await start();
  await expect(handle.result()).rejects.toThrow();
  const state = await handle.query(stateQuery);
  expect(state.error).toMatch(/the review answer did not validate after one repair attempt \(verdict: .*\); the raw answer is in docs\/lineage\/active\/.*\/05-review\.invalid\.md/);
  expect(server().requests.filter((r) => stageOf(r.prompt) === 'review')).toHaveLength(2);
});

test('cross-model review: the same family for impl and review stops the intent before review', async () => {
  server().respond = answering();
  const { handle } = await start({ stageAgents: {}, reviewPolicy: { requireDifferentFamily: true } });
  await expect(handle.result()).rejects.toThrow();
  expect((await handle.query(stateQuery)).error).toBe('REVIEW_POLICY_VIOLATION: review would run on anthropic/claude, the family that built the change; the policy asks for another');
  expect(server().requests.map((r) => stageOf(r.prompt))).not.toContain('review');

  server().requests.length = 0;
  const forbidden = await start({ reviewPolicy: { forbiddenReviewers: ['claude-sonnet-4-5'] } });
  await expect(forbidden.handle.result()).rejects.toThrow();
  expect((await forbidden.handle.query(stateQuery)).error).toMatch(/claude-sonnet-4-5 is never allowed to review/);
});
