/**
 * `warden replay` with a real agent CLI: an intent is run by Claude Code, Codex CLI or aider in
 * bubblewrap against a local scripted model server and merged; the server is closed; the intent
 * is replayed on a scratch clone, every model call answered from its recording by the worker's
 * gateway. It must end as the original did, take the original's gate decisions, spend nothing,
 * and leave the user's repository as it was. With Claude Code, more: replayed against a config
 * with one more gate, it reports that gate at its stage; replayed from impl, the stages before
 * are the original's; replayed from an edited recording, it reports where it diverged.
 */
import { existsSync } from 'node:fs';
import { compareReplay } from '../../src/client/replay-comparison';
import { replayIntent } from '../../src/client/replay-intent';
import { replayPeriod } from '../../src/client/replay-period';
import { resolveConfig } from '../../src/config/load';
import { startIntent } from '../../src/client/intents';
import type { PricingTable } from '../../src/safety/pricing';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { cliAgentProfile, scriptFileEdit, STAGE_DOCUMENTS, type AgentCli } from '../helpers/cli-scripts';
import { demoStages, git, makeSampleRepo, TEST_CONFIG, useTestWorld, waitFor } from '../helpers/env';
import { startModelServer, type ModelServer, type RecordedRequest, type Reply } from '../helpers/model-server';
import { describeWith } from '../setup/prerequisites';
import type { AgentStage } from '../../src/shared/stages';

/** Per CLI: the API it speaks and the model it is told to use (as test/e2e/real-clis.test.ts has them). */
const MODELS: Record<AgentCli, { kind: 'openai' | 'anthropic'; model: string }> = {
  aider: { kind: 'openai', model: 'gpt-4.1' },
  codex: { kind: 'openai', model: 'gpt-5.5' },
  claude: { kind: 'anthropic', model: 'claude-sonnet-4-5' },
};
const PRICE = { inputUsdPerMillion: '3', outputUsdPerMillion: '15' };
const pricing: PricingTable = { ...TEST_CONFIG.worker.pricing, ...Object.fromEntries(Object.values(MODELS).map((m) => [m.model, PRICE])) };
const GOOD_FILE = String((demoStages().impl![1]!.edits as Array<{ content: string }>)[0]!.content);
const world = useTestWorld('replay-clis', { safety: { ...TEST_CONFIG.worker, pricing } });

function stageOfRequest(request: RecordedRequest): string {
  return /# Warden: ([a-z]+)/.exec(JSON.stringify(request.body))?.[1] ?? '';
}

/** Each stage's document written to the answer file, impl's edit of lib/strings.js. */
function stagesFor(cli: AgentCli): ModelServer['respond'] {
  const scripts = new Map<string, ModelServer['respond']>();
  return (request, index): Reply => {
    const stage = stageOfRequest(request);
    let script = scripts.get(stage);
    if (!script) {
      script =
        stage === 'impl'
          ? scriptFileEdit({ cli, path: 'lib/strings.js', content: GOOD_FILE, finalText: 'slugify added.' })
          : scriptFileEdit({ cli, path: 'WARDEN-ANSWER.md', content: STAGE_DOCUMENTS[stage as Exclude<AgentStage, 'impl'>] ?? 'ok\n', finalText: `The ${stage} answer is in WARDEN-ANSWER.md.` });
      scripts.set(stage, script);
    }
    const reply = script(request, index);
    return 'raw' in reply ? reply : { ...reply, usage: { input: 1234, output: 321 } };
  };
}

const ONLY = process.env.WARDEN_TEST_REPLAY_CLIS?.split(',');

/**
 * aider in its edits mode: in its full mode it runs the tests itself, and its log of that run,
 * which review's prompt carries, now and then loses characters of the test output (a space, a
 * line), so such a replay can diverge at review, as it says (docs/operations.md).
 */
const PROFILE_EXTRAS: Partial<Record<AgentCli, { cliTools: 'edits' }>> = { aider: { cliTools: 'edits' } };

for (const cli of (['claude', 'codex', 'aider'] as const).filter((c) => !ONLY || ONLY.includes(c))) {
describeWith(cli, `a ${cli} intent, replayed`, () => {
  const id = `replayed-${cli}-${Date.now()}`;
  const started = new Date();
  let repo: string;
  let calls: number;
  let server: ModelServer;

  beforeAll(async () => {
    process.env.WARDEN_TEST_UPSTREAM_KEY = 'sk-upstream-key-held-by-the-worker';
    server = await startModelServer(stagesFor(cli));
    repo = makeSampleRepo();
    try {
      const handle = await startIntent(
        world().client,
        { id, goal: 'Add slugify', repoPath: repo, paths: ['lib/**'], agent: { ...cliAgentProfile(cli, MODELS[cli].kind, MODELS[cli].model, server.url), ...PROFILE_EXTRAS[cli] }, limits: { cooldown: '0s' } },
        world().taskQueue,
      );
      const state = await waitFor(async () => {
        const s = await handle.query(stateQuery);
        return s.pendingGate !== undefined || ['failed', 'rejected', 'cancelled', 'merged'].includes(s.status) ? s : undefined;
      }, Number(process.env.WARDEN_TEST_CLI_WAIT_MS ?? 240_000), 'the original at the merge gate');
      expect([state.status, state.pendingGate?.gate]).toEqual(['waiting', 'merge']);
      await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
      expect((await handle.result()).status).toBe('merged');
      calls = server.requests.length;
      expect(calls).toBeGreaterThan(4);
    } finally {
      // From here on no model server runs: every answer must come from the recording.
      await server.close();
    }
  }, 600_000);

  it('replays to the same outcome with no model server running, spending nothing and leaving the repository alone', async () => {
    const refsBefore = git(repo, 'for-each-ref', '--format=%(refname) %(objectname)');
    const replay = await replayIntent({ client: world().client, pool: world().pool, taskQueue: world().taskQueue }, id);
    expect(replay).toEqual({ intentId: `replay-1-${id}`, status: 'merged', gates: [{ gate: 'merge', stage: 'review', decision: 'approve', wouldOpen: false }] });
    // No model was asked: the server was closed, and the replay's calls cost nothing.
    expect(server.requests).toHaveLength(calls);
    const { rows } = await world().pool.query<{ calls: number; usd: string }>(`SELECT count(*)::int AS calls, coalesce(sum(usd), 0)::text AS usd FROM model_calls WHERE intent_id = $1`, [replay.intentId]);
    expect(rows[0]!.calls).toBe(calls);
    expect(Number(rows[0]!.usd)).toBe(0);
    // The user's repository: not one ref moved, no branch or lineage of the replay in it.
    expect(git(repo, 'for-each-ref', '--format=%(refname) %(objectname)')).toBe(refsBefore);
    expect(existsSync(`${repo}/.git/refs/heads/warden/${replay.intentId}`)).toBe(false);
    const comparison = await compareReplay(world().pool, id, replay);
    expect(comparison).toMatchObject({ outcome: { then: 'merged', now: 'merged' }, merged: true, wouldMerge: true, changed: false });
    expect(comparison.stages.map((s) => s.stage)).toEqual(['triage', 'lld', 'spec', 'impl', 'review', 'merge']);
  }, 600_000);

  if (cli !== 'claude') return;

  it('--since: the intents recorded in the period, each replayed and sorted by what the config would do to it', async () => {
    const entries = await replayPeriod({ client: world().client, pool: world().pool, taskQueue: world().taskQueue }, started);
    expect(entries.filter((e) => e.intentId === id)).toEqual([{ intentId: id, verdict: 'pass', outcome: { then: 'merged', now: 'merged' }, wouldOpen: [] }]);
    // A replay is never itself replayed.
    expect(entries.filter((e) => e.intentId.startsWith('replay-'))).toEqual([]);
  }, 600_000);

  it('against a config with the lld gate on for every risk, reports that gate as one that would open at lld', async () => {
    const taskQueue = `${world().taskQueue}-stricter`;
    const stricter = resolveConfig({ limits: { cooldown: '0s' }, gates: { lld: { enabled: true, minRisk: 'LOW' } } });
    const worker = await world().worker({ taskQueue, safety: { ...TEST_CONFIG.worker, pricing }, intentRules: { config: stricter, embeddedServer: true } });
    const running = worker.run();
    try {
      const replay = await replayIntent({ client: world().client, pool: world().pool, taskQueue }, id);
      expect(replay.status).toBe('merged');
      expect(replay.gates.map((g) => [g.gate, g.stage, g.wouldOpen])).toEqual([
        ['lld', 'lld', true],
        ['merge', 'review', false],
      ]);
      const comparison = await compareReplay(world().pool, id, replay);
      expect(comparison).toMatchObject({ changed: true, wouldMerge: true });
    } finally {
      worker.shutdown();
      await running;
    }
  }, 600_000);

  it("--from impl: triage, lld and spec are the original's; impl and review run again from impl's start commit to the same merge", async () => {
    const replay = await replayIntent({ client: world().client, pool: world().pool, taskQueue: world().taskQueue }, id, { from: 'impl' });
    expect(replay).toMatchObject({ status: 'merged', from: 'impl', gates: [{ gate: 'merge', stage: 'review', decision: 'approve', wouldOpen: false }] });
    // Only impl's and review's calls were answered again, each from its recording.
    const stagesAsked = async (intentId: string) =>
      (await world().pool.query<{ stage: string; calls: number }>(`SELECT stage, count(*)::int AS calls FROM model_calls WHERE intent_id = $1 GROUP BY stage ORDER BY stage`, [intentId])).rows;
    const original = await stagesAsked(id);
    expect(await stagesAsked(replay.intentId)).toEqual(original.filter((r) => r.stage === 'impl' || r.stage === 'review'));
    const comparison = await compareReplay(world().pool, id, replay);
    expect(comparison).toMatchObject({ from: 'impl', outcome: { then: 'merged', now: 'merged' }, changed: false });
    expect(comparison.stages.map((s) => [s.stage, s.taken === true])).toEqual([
      ['triage', true],
      ['lld', true],
      ['spec', true],
      ['impl', false],
      ['review', false],
      ['merge', false],
    ]);
  }, 600_000);

  it('from an edited recording, ends with "diverged at …" naming the stage, attempt, call and first difference', async () => {
    // impl's first call that carries the goal: the edit is there.
    const { rows } = await world().pool.query<{ hash: string; call: number }>(
      `SELECT e.request_hash AS hash, e.call_order AS call FROM model_exchanges e JOIN exchange_bodies b ON b.hash = e.request_hash
        WHERE e.intent_id = $1 AND e.stage = 'impl' AND e.attempt = 1 AND b.body LIKE '%Add slugify%' ORDER BY e.call_order LIMIT 1`,
      [id],
    );
    await world().pool.query(`UPDATE exchange_bodies SET body = replace(body, 'Add slugify', 'Add slugifx') WHERE hash = $1`, [rows[0]!.hash]);
    const replay = await replayIntent({ client: world().client, pool: world().pool, taskQueue: world().taskQueue }, id);
    expect(replay.status).toBe('failed');
    expect(replay.error).toMatch(new RegExp(`^diverged at stage impl attempt 1 call ${rows[0]!.call}: the request differs from the recorded one: .*recorded ".*Add slugifx.*", now ".*Add slugify`));
    const comparison = await compareReplay(world().pool, id, replay);
    expect(comparison).toMatchObject({ outcome: { then: 'merged', now: 'failed' }, wouldMerge: false, changed: true });
  }, 600_000);
});
}
