import type { WorkflowHandle } from '@temporalio/client';
import { startIntent } from '../../src/client/intents';
import type { intentWorkflow } from '../../src/workflows';
import { renderPendingGate } from '../../src/client/gate-prompt';
import { intentStatus, renderIntentStatus } from '../../src/client/intent-status';
import { SAMPLE_LLD, SAMPLE_SPEC } from '../../src/client/sample-repo';
import type { IntentInput } from '../../src/shared/intent';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { readFileSync } from 'node:fs';
import { DEMO_AGENT_SCRIPT } from '../../src/client/demo';
import { demoStages, git, makeSampleRepo, startSampleIntent, useTestWorld, waitFor, writeScript } from '../helpers/env';
import { stageOf, useModelServer, type ModelServer, type Reply } from '../helpers/model-server';

/**
 * Cross-model design review, through real workflows: the lld and spec, written on one model
 * (an Anthropic-speaking local server), are reviewed on another (OpenAI-speaking) before their
 * gates; a BLOCK sends the document back, the verdict and findings reach the gate.
 */

const world = useTestWorld('design-review');
const server = useModelServer();

const json = (value: unknown): string => `\n\`\`\`json\n${JSON.stringify(value)}\n\`\`\`\n`;
const TRIAGE = `Adds slugify.${json({ risk: 'LOW', confidence: 0.9, affectedPaths: ['lib/strings.js'], rationale: 'one pure function', predicted: { files: 1, lines: 12 } })}`;
const REVIEW = `APPROVE${json({ verdict: 'APPROVE', summary: 'matches the design', findings: [], scores: { strategicAlignment: 5, autonomyAppropriateness: 4, outputQuality: 4, resourceEfficiency: 4, learningApplication: 4 } })}`;
const GOOD_FILE = String((demoStages().impl![1]!.edits as Array<{ content: string }>)[0]!.content);
const IMPL = `slugify.\n\n\`\`\`file:lib/strings.js\n${GOOD_FILE}\`\`\`\n`;
const BLOCK = `BLOCK${json({ verdict: 'BLOCK', summary: 'the design leaves out empty strings', findings: [{ severity: 'high', category: 'correctness', message: 'say what slugify returns for an empty string', path: 'lib/strings.js' }] })}`;
const APPROVE = `APPROVE${json({ verdict: 'APPROVE', summary: 'the design reaches the goal', findings: [{ severity: 'low', category: 'tests', message: 'name the empty-string case in the tests' }] })}`;
const REQUEST_CHANGES = `REQUEST_CHANGES${json({ verdict: 'REQUEST_CHANGES', summary: 'one case is untested', findings: [{ severity: 'medium', category: 'tests', message: 'no test for a string of only dashes' }] })}`;

/** Answers each call in turn: the design reviews (their prompts start "# Warden: design review of lld") by `reviews`. */
function answering(reviews: { lld: (n: number) => string; spec: (n: number) => string }): ModelServer['respond'] {
  const seen: Record<string, number> = {};
  const normal: Record<string, string> = { triage: TRIAGE, lld: SAMPLE_LLD, spec: SAMPLE_SPEC, impl: IMPL, review: REVIEW };
  return (request): Reply => {
    const reviewed = /^# Warden: design review of (lld|spec)/.exec(request.prompt)?.[1] as 'lld' | 'spec' | undefined;
    const key = reviewed ? `review-of-${reviewed}` : stageOf(request.prompt);
    seen[key] = (seen[key] ?? 0) + 1;
    return { text: reviewed ? reviews[reviewed](seen[key]) : (normal[key] ?? 'ok') };
  };
}

const claude = () => ({ kind: 'anthropic' as const, model: 'claude-sonnet-4-5', baseUrl: server().url, apiKeyEnv: ['WARDEN_TEST_MODEL_KEY'] });
const gpt = () => ({ kind: 'openai' as const, model: 'gpt-4.1', baseUrl: `${server().url}/v1`, apiKeyEnv: ['WARDEN_TEST_MODEL_KEY'] });

let n = 0;
async function start(extra: Partial<IntentInput> = {}) {
  n += 1;
  const repo = makeSampleRepo();
  const id = `dr${n}-${Date.now()}`;
  const input: IntentInput = {
    id,
    goal: 'Add slugify',
    repoPath: repo,
    paths: ['lib/**'],
    agent: claude(),
    stageAgents: { impl: gpt(), review: gpt() },
    reviewPolicy: { design: true },
    ...extra,
    limits: { cooldown: '0s', ...extra.limits },
  };
  const handle = await startIntent(world().client, input, world().taskQueue);
  return { handle, repo, id };
}

async function gate(handle: WorkflowHandle<typeof intentWorkflow>, name: string) {
  return waitFor(async () => {
    const pending = (await handle.query(stateQuery)).pendingGate;
    return pending?.gate === name ? pending : undefined;
  }, 120_000, `the ${name} gate`);
}

test('a BLOCK sends the LLD back with the findings; the second passes, and the gates show the reviews', async () => {
  server().respond = answering({ lld: (i) => (i === 1 ? BLOCK : APPROVE), spec: () => REQUEST_CHANGES });
  const { handle, repo, id } = await start({ gates: { lld: { minRisk: 'LOW' }, spec: { minRisk: 'LOW' } } });

  const lldGate = await gate(handle, 'lld');
  expect(lldGate.document?.review).toEqual({
    verdict: 'APPROVE',
    reviewer: 'openai',
    model: 'gpt-4.1',
    summary: 'the design reaches the goal',
    findings: [{ severity: 'low', category: 'tests', message: 'name the empty-string case in the tests' }],
    total: 1,
  });
  expect(lldGate.document?.attempts).toBe(2);
  expect(renderPendingGate(id, lldGate)).toContain('Design review: APPROVE by openai (gpt-4.1) — the design reaches the goal\n- [low/tests] name the empty-string case in the tests');
  // The second LLD was told what the reviewer found.
  const second = server().requests.find((r) => r.prompt.startsWith('# Warden: lld (attempt 2)'));
  expect(second?.prompt).toContain('The design reviewer (openai, gpt-4.1) blocked this design: the design leaves out empty strings');
  expect(second?.prompt).toContain('- [high/correctness] say what slugify returns for an empty string (lib/strings.js)');
  // The reviewer read the document it reviewed, and went to its own model.
  const firstReview = server().requests.find((r) => r.prompt.startsWith('# Warden: design review of lld (attempt 1)'));
  expect(firstReview?.path).toBe('/v1/chat/completions');
  expect(firstReview?.prompt).toContain('## Earlier artifact: 02-lld.md');
  await handle.signal(decideSignal, { gate: 'lld', decision: 'approve', by: 'tester' });

  const specGate = await gate(handle, 'spec');
  expect(specGate.document?.review?.verdict).toBe('REQUEST_CHANGES');
  expect(renderPendingGate(id, specGate)).toContain('- [medium/tests] no test for a string of only dashes');
  expect((await handle.query(stateQuery)).attempts.spec).toBe(1);
  await handle.signal(decideSignal, { gate: 'spec', decision: 'approve', by: 'tester' });

  await gate(handle, 'merge');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');

  const { rows } = await world().pool.query("SELECT stage, severity, reason, metadata FROM safety_events WHERE intent_id = $1 AND event_type = 'DESIGN_REVIEWED' ORDER BY timestamp", [id]);
  expect(rows.map((r: { stage: string; severity: string; metadata: { verdict: string; attempt: number } }) => `${r.stage}:${r.metadata.attempt}:${r.metadata.verdict}:${r.severity}`)).toEqual([
    'lld:1:BLOCK:medium',
    'lld:2:APPROVE:info',
    'spec:1:REQUEST_CHANGES:low',
  ]);
  expect(rows[0].reason).toContain('lld attempt 1 reviewed by openai (gpt-4.1): BLOCK — the design leaves out empty strings\n- [high/correctness] say what slugify returns for an empty string');
  // Each review went through the gateway on the reviewer's model, priced like any call (1000 in + 200 out: GPT-4.1 $2/$8).
  const calls = await world().ledger.modelCalls.ofIntent(id);
  expect(calls.map((c) => `${c.stage}:${c.attempt}:${c.api}:${c.modelId}:${c.outcome}:${c.usd}`)).toEqual([
    'triage:1:messages:claude-sonnet-4-5:answered:0.006000',
    'lld:1:messages:claude-sonnet-4-5:answered:0.006000',
    'lld:1:chat:gpt-4.1:answered:0.003600',
    'lld:2:messages:claude-sonnet-4-5:answered:0.006000',
    'lld:2:chat:gpt-4.1:answered:0.003600',
    'spec:1:messages:claude-sonnet-4-5:answered:0.006000',
    'spec:1:chat:gpt-4.1:answered:0.003600',
    'impl:1:chat:gpt-4.1:answered:0.003600',
    'review:1:chat:gpt-4.1:answered:0.003600',
  ]);
  const costs = await world().pool.query('SELECT stage, model_id, usd::text AS usd FROM cost_events WHERE intent_id = $1 ORDER BY timestamp', [id]);
  expect(costs.rows.filter((r: { model_id: string; stage: string }) => r.model_id === 'gpt-4.1' && r.stage !== 'impl' && r.stage !== 'review')).toHaveLength(3);
  // warden status lists each review, from the ledger.
  const status = renderIntentStatus(await intentStatus(world().client, world().ledger, id));
  expect(status.filter((l) => l.startsWith('  design review: '))).toEqual([
    '  design review: lld attempt 1 reviewed by openai (gpt-4.1): BLOCK — the design leaves out empty strings',
    '  design review: lld attempt 2 reviewed by openai (gpt-4.1): APPROVE — the design reaches the goal',
    '  design review: spec attempt 1 reviewed by openai (gpt-4.1): REQUEST_CHANGES — one case is untested',
  ]);
  // The reviews are in the lineage beside their documents.
  expect(git(repo, 'show', `refs/warden/lineage/${id}:02-lld.review.md`)).toContain('"verdict":"BLOCK"');
  expect(git(repo, 'show', `refs/warden/lineage/${id}:02-lld-attempt-2.review.md`)).toContain('"verdict":"APPROVE"');
});

test("a reviewer that blocks every LLD stops the intent at the lld's attempt cap, before the spec", async () => {
  server().respond = answering({ lld: () => BLOCK, spec: () => APPROVE });
  const { handle, id } = await start({ limits: { attempts: { lld: 2 } } });
  await expect(handle.result()).rejects.toThrow();
  const state = await handle.query(stateQuery);
  expect(state.error).toMatch(/MAX_ITERATIONS_EXCEEDED/);
  expect(state.attempts).toEqual({ triage: 1, lld: 3 }); // the third was refused by the cap
  expect(server().requests.map((r) => /^# Warden: ([a-z ]+ of lld|[a-z]+)/.exec(r.prompt)?.[1])).toEqual(['triage', 'lld', 'design review of lld', 'lld', 'design review of lld']);
  const { rows } = await world().pool.query("SELECT metadata->>'verdict' AS verdict FROM safety_events WHERE intent_id = $1 AND event_type = 'DESIGN_REVIEWED'", [id]);
  expect(rows.map((r: { verdict: string }) => r.verdict)).toEqual(['BLOCK', 'BLOCK']);
});

test('a design reviewer on the model that writes the documents is refused before anything runs', async () => {
  server().respond = answering({ lld: () => APPROVE, spec: () => APPROVE });
  const { handle } = await start({ stageAgents: { impl: gpt() } });
  await expect(handle.result()).rejects.toThrow();
  expect((await handle.query(stateQuery)).error).toBe(
    'REVIEW_POLICY_VIOLATION: the design review of lld would run on claude-sonnet-4-5, the model that writes it (route review to another model)',
  );
  expect(server().requests).toHaveLength(0);
});

test("the demo's scripted agent answers the design reviews, as `npm start` asks for them: its intent merges", async () => {
  const script = JSON.parse(readFileSync(DEMO_AGENT_SCRIPT, 'utf8')) as { stages: Record<string, Array<{ delayMs?: number }>>; designReview: Record<string, Array<{ delayMs?: number }>> };
  for (const attempts of [...Object.values(script.stages), ...Object.values(script.designReview)]) for (const attempt of attempts) attempt.delayMs = 0;
  const { handle, id } = await startSampleIntent(world(), 'drd', { agent: { kind: 'scripted', scriptPath: writeScript(script) }, reviewPolicy: { design: true } });
  await gate(handle, 'merge');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');
  const { rows } = await world().pool.query("SELECT stage, metadata->>'verdict' AS verdict FROM safety_events WHERE intent_id = $1 AND event_type = 'DESIGN_REVIEWED' ORDER BY timestamp", [id]);
  expect(rows).toEqual([
    { stage: 'lld', verdict: 'APPROVE' },
    { stage: 'spec', verdict: 'APPROVE' },
  ]);
});
