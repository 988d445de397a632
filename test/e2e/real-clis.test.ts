/**
 * The real agent CLIs — aider, Codex CLI and Claude Code, at the versions
 * scripts/install-agent-clis.sh pins — each driven by Warden through every stage of an intent to
 * a merge: in bubblewrap, with the model gateway as their only network route, against a local
 * scripted model server that speaks their wire format and records every request.
 *
 * Each run is judged by what it left and what it sent, never by a CLI's exit code: the merged
 * file on main, the documents Warden read from the answer file, the requests the model server
 * got (with the upstream's key, never the agent's, at the API's own path whichever form of base
 * URL the CLI's profile gave), and the ledger, whose spend must equal the
 * scripted usage at the price table's rates, to the cent.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { startIntent } from '../../src/client/intents';
import { costOf, type PricingTable } from '../../src/safety/pricing';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { addUsd, ZERO_USD } from '../../src/shared/money';
import type { AgentStage } from '../../src/shared/stages';
import { SAMPLE_LLD } from '../../src/client/sample-repo';
import { AGENT_CLI_VERSIONS, cliAgentProfile, scriptFileEdit, STAGE_DOCUMENTS, type AgentCli } from '../helpers/cli-scripts';
import { ExchangeStore } from '../../src/ledger/exchange-store';
import { demoStages, git, makeSampleRepo, TEST_CONFIG, useTestWorld, waitFor } from '../helpers/env';
import { startModelServer, type ModelServer, type RecordedRequest, type Reply } from '../helpers/model-server';
import { workingDirectoryOf } from '../helpers/cli-scripts';
import { describeWith } from '../setup/prerequisites';

/** Per CLI: the API it speaks and the model it is told to use. */
const MODELS: Record<AgentCli, { kind: 'openai' | 'anthropic'; model: string }> = {
  aider: { kind: 'openai', model: 'gpt-4.1' },
  // A name in Codex's own catalog: it then edits with its apply_patch tool.
  codex: { kind: 'openai', model: 'gpt-5.5' },
  claude: { kind: 'anthropic', model: 'claude-sonnet-4-5' },
};
/**
 * Per CLI: its model's base URL as a person may give it (`--model-url`), in its SDK's form or the
 * other — Codex's without the /v1 the OpenAI SDK wants, Claude's with the /v1 Anthropic's does not.
 */
const GIVEN_URL: Record<AgentCli, (serverUrl: string) => string> = { aider: (url) => `${url}/v1/`, codex: (url) => url, claude: (url) => `${url}/v1` };
/** Where each API's requests must reach the provider, whichever form its URL was given in. */
const API_PATHS: Record<RecordedRequest['dialect'], string> = { chat: '/v1/chat/completions', responses: '/v1/responses', messages: '/v1/messages' };
const PRICE = { inputUsdPerMillion: '3', outputUsdPerMillion: '15' };
const pricing: PricingTable = { ...TEST_CONFIG.worker.pricing, ...Object.fromEntries(Object.values(MODELS).map((m) => [m.model, PRICE])) };
/** What every scripted answer reports using. */
const USAGE = { input: 1234, output: 321 };
const UPSTREAM_KEY = 'sk-upstream-key-held-by-the-worker';

const GOOD_FILE = String((demoStages().impl![1]!.edits as Array<{ content: string }>)[0]!.content);

const world = useTestWorld('real-clis', { safety: { ...TEST_CONFIG.worker, pricing } });
let server: ModelServer;

beforeAll(async () => {
  server = await startModelServer();
  process.env.WARDEN_TEST_UPSTREAM_KEY = UPSTREAM_KEY;
});
afterAll(async () => {
  await server?.close();
});

/** The Warden stage a request belongs to, read from the prompt it carries. */
function stageOfRequest(request: RecordedRequest): string {
  return /# Warden: ([a-z]+)/.exec(JSON.stringify(request.body))?.[1] ?? '';
}

/** Each stage's conversation: the document written to the answer file, or impl's edit of lib/strings.js (or `impl`). */
function stagesFor(cli: AgentCli, impl?: ModelServer['respond']): ModelServer['respond'] {
  const scripts = new Map<string, ModelServer['respond']>();
  return (request, index): Reply => {
    const stage = stageOfRequest(request);
    let script = scripts.get(stage);
    if (!script) {
      script =
        stage === 'impl'
          ? impl ?? scriptFileEdit({ cli, path: 'lib/strings.js', content: GOOD_FILE, finalText: 'slugify added.' })
          : scriptFileEdit({ cli, path: 'WARDEN-ANSWER.md', content: STAGE_DOCUMENTS[stage as Exclude<AgentStage, 'impl'>] ?? 'ok\n', finalText: `The ${stage} answer is in WARDEN-ANSWER.md.` });
      scripts.set(stage, script);
    }
    const reply = script(request, index);
    return 'raw' in reply ? reply : { ...reply, usage: USAGE };
  };
}

for (const cli of ['aider', 'codex', 'claude'] as const) {
  describeWith(cli, `${cli}, driven by Warden`, () => {
    it('goes through every stage to a merge, its model reached only through the gateway, its spend exact', async () => {
      server.requests.length = 0;
      server.respond = stagesFor(cli);
      const repo = makeSampleRepo();
      const id = `cli-${cli}-${Date.now()}`;
      const { kind, model } = MODELS[cli];
      const profile = cliAgentProfile(cli, kind, model, server.url);
      const handle = await startIntent(
        world().client,
        {
          id,
          goal: 'Add slugify',
          repoPath: repo,
          paths: ['lib/**'],
          agent: { ...profile, upstream: { ...profile.upstream, baseUrl: GIVEN_URL[cli](server.url) } },
          limits: { cooldown: '0s' },
        },
        world().taskQueue,
      );
      // At the merge gate, or ended early: then the state says where and why.
      const state = await waitFor(async () => {
        const s = await handle.query(stateQuery);
        return s.pendingGate?.gate === 'merge' || s.pendingGate !== undefined || ['failed', 'rejected', 'cancelled', 'merged'].includes(s.status) ? s : undefined;
      }, Number(process.env.WARDEN_TEST_CLI_WAIT_MS ?? 240_000), `${cli} at the merge gate`).catch(async (error: unknown) => {
        // Where it is stuck, for the failure message: the state, and what the model server saw.
        const s = await handle.query(stateQuery);
        const seen = server.requests.map((r) => `${stageOfRequest(r)}:${r.path}`).join(', ');
        throw new Error(`${String(error)}; state ${JSON.stringify({ status: s.status, stage: s.stage, attempts: s.attempts, error: s.error, gate: s.pendingGate?.gate })}; requests: ${seen}`);
      });
      expect([cli, state.status, state.pendingGate?.gate, state.stage, state.error]).toEqual([cli, 'waiting', 'merge', 'review', undefined]);
      await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
      expect((await handle.result()).status).toBe('merged');

      // What it left: the edit on main, and nothing else; the documents Warden read, in the lineage ref.
      expect(readFileSync(path.join(repo, 'lib/strings.js'), 'utf8')).toBe(GOOD_FILE);
      expect(git(repo, 'diff', '--name-only', 'main^1', 'main')).toBe('lib/strings.js');
      const lineage = `refs/warden/lineage/${id}`;
      expect(git(repo, 'show', `${lineage}:02-lld.md`)).toContain(SAMPLE_LLD.trim().split('\n')[0]);
      expect(git(repo, 'ls-tree', '--name-only', lineage)).toMatch(/02-lld\.log\.txt/);

      // What it sent: every stage asked the model, through the gateway, with the worker's key, at the API's own path.
      const stages = new Set(server.requests.map(stageOfRequest));
      for (const stage of ['triage', 'lld', 'spec', 'impl', 'review']) expect([cli, stage, stages.has(stage)]).toEqual([cli, stage, true]);
      for (const request of server.requests) {
        const key = request.headers.authorization ?? request.headers['x-api-key'];
        expect(String(key)).toContain(UPSTREAM_KEY);
        expect([cli, request.path.split('?')[0]]).toEqual([cli, API_PATHS[request.dialect]]);
      }

      // The ledger: every request a row; the spend is the scripted usage at the table's price.
      const calls = await world().ledger.modelCalls.ofIntent(id);
      const answered = calls.filter((c) => c.outcome === 'answered');
      expect(answered).toHaveLength(server.requests.length);
      const perCall = costOf(model, { inputTokens: USAGE.input, outputTokens: USAGE.output }, pricing);
      const expected = answered.reduce((sum) => addUsd(sum, perCall), ZERO_USD);
      const { rows } = await world().pool.query<{ usd: string }>('SELECT round(coalesce(sum(usd), 0), 6)::text AS usd FROM cost_events WHERE intent_id = $1', [id]);
      expect(rows[0]!.usd).toBe(expected);

      // The recording: every call's request and answer, a stream as its events; the CLI's version for a replay.
      const recording = await new ExchangeStore(world().pool).recordingOf(id, { bodies: true });
      expect(recording.exchanges.map((e) => e.callId).sort()).toEqual(calls.map((c) => c.id).sort());
      for (const exchange of recording.exchanges.filter((e) => e.outcome === 'answered')) {
        const streamed = calls.find((c) => c.id === exchange.callId)!.streamed;
        expect([cli, exchange.stored, typeof exchange.request, exchange.answer?.kind]).toEqual([cli, true, 'string', streamed ? 'events' : 'whole']);
      }
      expect(recording.context?.cliVersions[cli]).toContain(AGENT_CLI_VERSIONS[cli]);
    }, 300_000);
  });
}

/** The first impl attempt's slugify: it forgets to lower-case, so the slugify test fails. */
const BAD_FILE = String((demoStages().impl![0]!.edits as Array<{ content: string }>)[0]!.content);

/**
 * impl as a model that checks its own work with Claude Code's Bash tool: it writes a slugify that
 * fails the tests, runs the test command its prompt names, reads the failure, writes the fix
 * and runs them again. Each step is chosen by how many tool results the conversation holds.
 */
function fixesWhatTheTestsShow(): ModelServer['respond'] {
  return (request) => {
    if (request.dialect !== 'messages' || !request.toolNames.includes('Bash')) return { text: 'ok' };
    const file = path.posix.join(workingDirectoryOf(request) ?? '.', 'lib/strings.js');
    const testCommand = /run them with `([^`]+)`/.exec(JSON.stringify(request.body))?.[1];
    if (testCommand === undefined) return { text: 'The prompt names no test command, so I ran nothing.' };
    const runTests = { name: 'Bash', input: { command: testCommand, description: 'Run the tests' } };
    switch (request.toolResultCount) {
      case 0:
        return { toolCalls: [{ name: 'Read', input: { file_path: file } }] };
      case 1:
        return { toolCalls: [{ name: 'Write', input: { file_path: file, content: BAD_FILE } }] };
      case 2:
        return { toolCalls: [runTests] };
      case 3:
        return { text: 'The slug keeps capitals; lower-casing first.', toolCalls: [{ name: 'Write', input: { file_path: file, content: GOOD_FILE } }] };
      case 4:
        return { toolCalls: [runTests] };
      default:
        return { text: 'slugify added to lib/strings.js; the tests pass.' };
    }
  };
}

describeWith('claude', 'Claude Code in bubblewrap runs the tests itself', () => {
  it("runs the repository's tests at impl, fixes what fails and merges on the first impl attempt", async () => {
    server.requests.length = 0;
    server.respond = stagesFor('claude', fixesWhatTheTestsShow());
    const repo = makeSampleRepo();
    const id = `cli-claude-tests-${Date.now()}`;
    const handle = await startIntent(
      world().client,
      { id, goal: 'Add slugify', repoPath: repo, paths: ['lib/**'], agent: cliAgentProfile('claude', 'anthropic', MODELS.claude.model, server.url), limits: { cooldown: '0s' } },
      world().taskQueue,
    );
    const state = await waitFor(async () => {
      const s = await handle.query(stateQuery);
      return s.pendingGate !== undefined || ['failed', 'rejected', 'cancelled', 'merged'].includes(s.status) ? s : undefined;
    }, Number(process.env.WARDEN_TEST_CLI_WAIT_MS ?? 240_000), 'claude at the merge gate');
    expect([state.pendingGate?.gate, state.error, state.attempts.impl]).toEqual(['merge', undefined, 1]);

    // What the model was shown: the failing run, then the passing one, each from the tool itself (no approval asked).
    const impl = server.requests.filter((r) => stageOfRequest(r) === 'impl' && r.toolNames.includes('Bash'));
    const results = impl.reduce((longest, r) => (r.toolResults.length > longest.length ? r.toolResults : longest), [] as RecordedRequest['toolResults']);
    expect(results).toHaveLength(5);
    const [firstRun, secondRun] = [results[2]!, results[4]!];
    expect(firstRun.text).toMatch(/fail 1/);
    expect(firstRun.text).toMatch(/hello-wide-world/);
    expect(secondRun.text).toMatch(/fail 0/);
    for (const result of results) expect(result.text).not.toMatch(/approval|permission/i);

    await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
    expect((await handle.result()).status).toBe('merged');
    expect(readFileSync(path.join(repo, 'lib/strings.js'), 'utf8')).toBe(GOOD_FILE);
  }, 300_000);
});

/** What aider hands back to the model after its own test run failed: the tests' output (node's runner says how many failed). */
const showsFailingTests = (request: RecordedRequest): boolean => /# fail [1-9]|ℹ fail [1-9]|not ok \d/.test(request.lastUserText);

describeWith('aider', 'aider in bubblewrap runs the tests itself', () => {
  it('runs the tests after its edit, hands the failure to the model, and merges its fix on the first impl attempt', async () => {
    server.requests.length = 0;
    const bad = scriptFileEdit({ cli: 'aider', path: 'lib/strings.js', content: BAD_FILE, finalText: 'slugify added.' });
    const good = scriptFileEdit({ cli: 'aider', path: 'lib/strings.js', content: GOOD_FILE, finalText: 'Lower-cased first; the tests pass now.' });
    server.respond = stagesFor('aider', (request, index) => (showsFailingTests(request) ? good(request, index) : bad(request, index)));
    const repo = makeSampleRepo();
    const id = `cli-aider-tests-${Date.now()}`;
    const handle = await startIntent(
      world().client,
      { id, goal: 'Add slugify', repoPath: repo, paths: ['lib/**'], agent: cliAgentProfile('aider', 'openai', MODELS.aider.model, server.url), limits: { cooldown: '0s' } },
      world().taskQueue,
    );
    const state = await waitFor(async () => {
      const s = await handle.query(stateQuery);
      return s.pendingGate !== undefined || ['failed', 'rejected', 'cancelled', 'merged'].includes(s.status) ? s : undefined;
    }, Number(process.env.WARDEN_TEST_CLI_WAIT_MS ?? 240_000), 'aider at the merge gate');
    expect([state.pendingGate?.gate, state.error, state.attempts.impl]).toEqual(['merge', undefined, 1]);
    // The model was shown aider's own failing test run, within the first impl attempt.
    expect(server.requests.some((r) => stageOfRequest(r) === 'impl' && showsFailingTests(r))).toBe(true);
    await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
    expect((await handle.result()).status).toBe('merged');
    expect(readFileSync(path.join(repo, 'lib/strings.js'), 'utf8')).toBe(GOOD_FILE);
  }, 300_000);
});
