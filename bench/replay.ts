/**
 * What a replay saves: an intent of ten agent stage attempts is run on an HTTP model agent
 * against a local model server that answers as slowly as a hosted model, recorded through the
 * worker's gateway as usual; then the model server is closed and the intent is replayed with
 * `replayIntent` (what `warden replay` runs), every call answered from the recording. Target
 * (issue #35): the replay takes less than a quarter of the original's wall time.
 *
 *   npx tsx bench/replay.ts [--impl-attempts 6] [--ttft-ms 800] [--tokens-per-s 60] [--answer-tokens 400] [--smoke]
 *   npm run bench:replay
 *
 * The intent: the sample repo's "Add slugify" (with a test per case of slugify added), triage,
 * lld and spec once each, impl `--impl-attempts` times (every attempt but the last writes a
 * slugify that passes one more case than the one before, and fails the rest), review once, then
 * the merge gate, approved: 3 + 6 + 1 = 10 attempts by default, counted from the ledger and
 * printed per stage. The model server speaks OpenAI Chat Completions and holds each
 * answer back as a hosted model would: `--ttft-ms` before its first token, then its output tokens
 * (a token per 4 characters) at `--tokens-per-s`. The answers are whole, as the HTTP agent asks
 * for them, so the answer arrives when its last token would have. The scripted answers are far
 * shorter than a hosted model's, so each carries `--answer-tokens` of notes (numbered lines)
 * besides what the stage needs; `--answer-tokens 0` leaves only that.
 *
 * Both wall times are measured in this one run on the client clock: the original from its start
 * to its end (the merge gate answered as soon as it opens), the replay from `replayIntent`'s call
 * to its return (the scratch clone made and removed included). Printed: each stage's attempts
 * then and now, both times, the ratio replay / original, and a JSON line; results in
 * bench/results/replay.json. A replay that ends otherwise than the original, or with another
 * number of attempts in a stage, has diverged: that is printed and the exit is 1. Safety layers
 * that fired only in one of the two, and gates that would open now, are printed beside.
 *
 * `--smoke`: impl twice (6 attempts) and a model with next to no delay and no notes; it checks
 * that the benchmark runs, not its figures (the target is reported, never the exit code).
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startIntent } from '../src/client/intents';
import { compareReplay } from '../src/client/replay-comparison';
import { replayIntent } from '../src/client/replay-intent';
import { createSampleRepo, SAMPLE_LLD, SAMPLE_SPEC } from '../src/client/sample-repo';
import { resolveConfig } from '../src/config/load';
import { decideSignal, stateQuery } from '../src/shared/messages';
import { out, runBenchmark, secs, sized, sleep, t } from './console';
import { benchWorker, REPO_ROOT, startBench, unthrottledConfigFile, withWorker, writeResult } from './harness';

const { values: flags } = parseArgs({
  options: {
    'impl-attempts': { type: 'string' },
    'ttft-ms': { type: 'string' },
    'tokens-per-s': { type: 'string' },
    'answer-tokens': { type: 'string' },
    smoke: { type: 'boolean', default: false },
  },
});
const IMPL_ATTEMPTS = sized(flags['impl-attempts'], flags.smoke, 6, 2);
const TTFT_MS = sized(flags['ttft-ms'], flags.smoke, 800, 5);
const TOKENS_PER_S = sized(flags['tokens-per-s'], flags.smoke, 60, 100_000);
const ANSWER_TOKENS = sized(flags['answer-tokens'], flags.smoke, 400, 0);
if (![IMPL_ATTEMPTS, ANSWER_TOKENS].every(Number.isInteger) || IMPL_ATTEMPTS < 1 || ANSWER_TOKENS < 0 || !Number.isFinite(TTFT_MS) || TTFT_MS < 0 || !Number.isFinite(TOKENS_PER_S) || TOKENS_PER_S <= 0) {
  out('--impl-attempts takes a whole number ≥ 1, --answer-tokens one ≥ 0, --ttft-ms a number ≥ 0, --tokens-per-s a number > 0');
  process.exit(2);
}

/** The replay's wall time must stay below this share of the original's. */
const TARGET_RATIO = 0.25;
/** How often the original and the replay are looked at for an open gate (the same for both). */
const POLL_MS = 100;
const MODEL = 'gpt-4.1';
const KEY_VARIABLE = 'WARDEN_BENCH_MODEL_KEY';

/** A JSON block at the end of an answer, as triage and review end theirs. */
const fencedJson = (value: unknown): string => `\n\`\`\`json\n${JSON.stringify(value)}\n\`\`\`\n`;

/** lib/strings.js as the demo agent's passing impl attempt writes it. */
async function passingFile(): Promise<string> {
  const demo = JSON.parse(await readFile(path.join(REPO_ROOT, 'examples', 'demo-agent.json'), 'utf8')) as { stages: { impl: Array<{ edits: Array<{ path: string; content: string }> }> } };
  const edit = demo.stages.impl.at(-1)!.edits.find((e) => e.path === 'lib/strings.js');
  if (!edit) throw new Error('examples/demo-agent.json: its last impl attempt does not write lib/strings.js');
  return edit.content;
}

/**
 * The cases of slugify, one test each, added to the sample repo: a model that gets closer each
 * attempt passes one more of them, so no two failing attempts give the same test result (two
 * alike in a row halt the intent: the two-strike rule).
 */
const SLUGIFY_CASES: ReadonlyArray<readonly [string, string, string]> = [
  ['lower-cases', 'Hello', 'hello'],
  ['joins words with a dash', 'hello world', 'hello-world'],
  ['drops punctuation', 'hello, world!', 'hello-world'],
  ['collapses separators', 'a  --  b', 'a-b'],
  ['trims dashes at the ends', ' Hello, Wide World! ', 'hello-wide-world'],
];
const SLUGIFY_TESTS = [
  "'use strict';",
  "const test = require('node:test');",
  "const assert = require('node:assert');",
  "const { slugify } = require('../lib/strings');",
  '',
  ...SLUGIFY_CASES.map(([name, given, wanted]) => `test('slugify ${name}', () => assert.strictEqual(slugify(${JSON.stringify(given)}), ${JSON.stringify(wanted)}));`),
  '',
].join('\n');

/** Slugifies that pass 0, 1, 2, 3 and 4 of SLUGIFY_CASES: the failing attempts, in turn. */
const CLOSER_EACH_TIME = [
  '  return text;',
  '  return text.toLowerCase();',
  "  return text.toLowerCase().replace(/ /g, '-');",
  "  return text.toLowerCase().replace(/[^a-z0-9]+/g, '-');",
  "  return text.toLowerCase().replace(/[^a-z0-9 ]/g, '').replace(/ +/g, '-');",
];

function failingFile(attempt: number): string {
  return [
    "'use strict';",
    '',
    '/** Upper-cases the first letter. */',
    'function capitalize(text) {',
    '  return text.charAt(0).toUpperCase() + text.slice(1);',
    '}',
    '',
    '/** Lower-case words joined by single dashes. */',
    'function slugify(text) {',
    CLOSER_EACH_TIME[(attempt - 1) % CLOSER_EACH_TIME.length]!,
    '}',
    '',
    'module.exports = { capitalize, slugify };',
    '',
  ].join('\n');
}

/** The sample repo with SLUGIFY_TESTS committed on top. */
function benchRepo(dir: string): string {
  createSampleRepo(dir);
  writeFileSync(path.join(dir, 'test', 'slugify.test.js'), SLUGIFY_TESTS);
  const git = (...args: string[]) => execFileSync('git', ['-c', 'user.name=Sample', '-c', 'user.email=sample@localhost', ...args], { cwd: dir, stdio: 'ignore' });
  git('add', '-A');
  git('commit', '-q', '-m', 'slugify: one test per case');
  return dir;
}

/** Tokens in a text, as the model server counts them: one per 4 characters. */
const tokensIn = (text: string): number => Math.ceil(text.length / 4);

/**
 * A model's reasoning before its answer, `tokens` long: the scripted answers themselves are far
 * shorter than a hosted model's (a stage's document, an impl's explanation), and the time a model
 * takes is in its output tokens. Numbered sentences, so no two lines are the same.
 */
function reasoning(stage: string, tokens: number): string {
  const lines: string[] = [];
  for (let n = 1; tokensIn(lines.join('\n')) < tokens; n++) lines.push(`- ${stage}, point ${n}: slugify goes into lib/strings.js beside capitalize; the tests in test/ say what it must do.`);
  return lines.length > 0 ? `## Notes\n${lines.join('\n')}\n\n` : '';
}

const TRIAGE = `Adds slugify to lib/strings.js; the test for it exists.${fencedJson({ risk: 'LOW', confidence: 0.9, affectedPaths: ['lib/strings.js'], rationale: 'one pure function', predicted: { files: 1, lines: 12 } })}`;
const REVIEW = `APPROVE${fencedJson({ verdict: 'APPROVE', summary: 'matches the design; the tests pass', findings: [], scores: { strategicAlignment: 5, autonomyAppropriateness: 4, outputQuality: 4, resourceEfficiency: 4, learningApplication: 4 } })}`;
const implAnswer = (file: string): string => `slugify in lib/strings.js.\n\n\`\`\`file:lib/strings.js\n${file}\`\`\`\n`;

/**
 * The model server's script: each stage's answer after `--answer-tokens` of reasoning (documents
 * end with it, as a section of their own); impl's fails the tests until its last attempt.
 */
function scriptedAnswers(good: string): (prompt: string) => string {
  let impl = 0;
  return (prompt) => {
    const stage = /^# Warden: ([a-z]+)/.exec(prompt)?.[1] ?? '';
    const notes = reasoning(stage, ANSWER_TOKENS);
    if (stage === 'impl') {
      impl += 1;
      return `${notes}${implAnswer(impl < IMPL_ATTEMPTS ? failingFile(impl) : good)}`;
    }
    if (stage === 'lld' || stage === 'spec') return `${stage === 'lld' ? SAMPLE_LLD : SAMPLE_SPEC}\n${notes}`;
    return `${notes}${{ triage: TRIAGE, review: REVIEW }[stage] ?? 'ok'}`;
  };
}

interface ModelServer {
  readonly url: string;
  readonly calls: number;
  close(): Promise<void>;
}

/**
 * OpenAI Chat Completions, whole answers only (what the HTTP agent asks for), each sent when a
 * hosted model would have finished it: after the time to first token and its tokens at the rate.
 */
async function startModelServer(answer: (prompt: string) => string): Promise<ModelServer> {
  let calls = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      calls += 1;
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { model: string; messages: Array<{ role: string; content: string }> };
      const prompt = body.messages.filter((m) => m.role === 'user').map((m) => m.content).join('\n');
      const text = answer(prompt);
      const usage = { prompt_tokens: tokensIn(prompt), completion_tokens: tokensIn(text) };
      const whole = {
        id: `chatcmpl-bench-${calls}`,
        object: 'chat.completion',
        model: body.model,
        choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
        usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
      };
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(whole));
      }, TTFT_MS + (usage.completion_tokens / TOKENS_PER_S) * 1000);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get calls() {
      return calls;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function main(): Promise<number> {
  out(`replay benchmark: an intent of ${3 + IMPL_ATTEMPTS + 1} agent stage attempts on an HTTP model (${MODEL}, OpenAI Chat Completions), then its replay with the model server closed`);
  out(`model server: ${TTFT_MS} ms to the first token, ${TOKENS_PER_S} tokens/s (a token per 4 characters), each answer after ${ANSWER_TOKENS} tokens of notes; ${os.cpus().length} cores, node ${process.version}`);
  process.env[KEY_VARIABLE] = 'sk-bench-model-key-0123456789';
  const model = await startModelServer(scriptedAnswers(await passingFile()));
  let modelOpen = true;
  const b = await startBench('replay');
  const queue = 'replay';
  try {
    // The original and its replay complete their limits from this config alike (a replay takes
    // the config's, not those of the original's start): impl may take every attempt asked for.
    const config = resolveConfig({ ...unthrottledConfigFile(), limits: { cooldown: '0s', attempts: { impl: IMPL_ATTEMPTS } } });
    const worker = await benchWorker(b, queue, { intentRules: { config, embeddedServer: true } });
    return await withWorker(worker, async () => {
      const repo = benchRepo(path.join(b.tmp, 'repos', 'sample'));
      const id = 'bench-replayed';
      const agent = { kind: 'openai' as const, model: MODEL, baseUrl: `${model.url}/v1`, apiKeyEnv: [KEY_VARIABLE] };

      const originalStarted = t();
      const handle = await startIntent(b.client, { id, goal: 'Add slugify', repoPath: repo, paths: ['lib/**'], agent }, queue);
      for (;;) {
        const state = await handle.query(stateQuery);
        if (state.pendingGate?.gate === 'merge') break;
        if (['failed', 'rejected', 'cancelled', 'merged'].includes(state.status)) throw new Error(`the original ended ${state.status} before its merge gate: ${state.error ?? ''}`);
        await sleep(POLL_MS);
      }
      await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'bench' });
      const original = await handle.result();
      const originalMs = t() - originalStarted;
      const modelCalls = model.calls;
      // From here on no model answers: every answer of the replay must come from the recording.
      await model.close();
      modelOpen = false;
      out(`original: ${original.status} in ${secs(originalMs)}, ${modelCalls} model calls`);

      const replayStarted = t();
      const replay = await replayIntent({ client: b.client, pool: b.database.pool, taskQueue: queue, pollMs: POLL_MS }, id);
      const replayMs = t() - replayStarted;
      out(`replay:   ${replay.status} in ${secs(replayMs)}${replay.error ? ` (${replay.error})` : ''}`);

      const comparison = await compareReplay(b.database.pool, id, replay);
      const attempts = Object.fromEntries(comparison.stages.filter((s) => s.stage !== 'merge').map((s) => [s.stage, s.attempts]));
      const attemptsThen = Object.values(attempts).reduce((sum, a) => sum + a.then, 0);
      const attemptsNow = Object.values(attempts).reduce((sum, a) => sum + a.now, 0);
      out('');
      out(`${'stage'.padEnd(8)}${'attempts then'.padStart(15)}${'now'.padStart(6)}`);
      for (const [stage, a] of Object.entries(attempts)) out(`${stage.padEnd(8)}${String(a.then).padStart(15)}${String(a.now).padStart(6)}`);
      out(`${'all'.padEnd(8)}${String(attemptsThen).padStart(15)}${String(attemptsNow).padStart(6)}`);
      out('');

      const ratio = replayMs / originalMs;
      // Diverged: another outcome, or another number of attempts in a stage. Safety layers that
      // fired only then or only now are printed, not counted: some watch the clock, and a replay
      // has a model that answers at once.
      const diverged = comparison.outcome.then !== comparison.outcome.now || Object.values(attempts).some((a) => a.then !== a.now);
      const differences = [
        ...comparison.stages.flatMap((s) => [...s.added.map((type) => `${s.stage}: +${type}`), ...s.removed.map((type) => `${s.stage}: -${type}`)]),
        ...comparison.gates.now.filter((g) => g.wouldOpen).map((g) => `gate ${g.gate} at ${g.stage} would open`),
      ];
      out(`wall time: original ${secs(originalMs)}, replay ${secs(replayMs)}: replay / original = ${ratio.toFixed(3)} (target < ${TARGET_RATIO}: ${ratio < TARGET_RATIO ? 'met' : 'NOT met'})`);
      if (diverged) out(`the replay DIVERGED: then ${comparison.outcome.then}, now ${comparison.outcome.now}${comparison.error ? ` (${comparison.error})` : ''}; attempts then ${attemptsThen}, now ${attemptsNow}`);
      else out(`the replay reached the same outcome (${comparison.outcome.now}) with the same attempts in every stage`);
      if (differences.length > 0) out(`safety layers and gates that differ (+ now only, - then only): ${differences.join(', ')}`);

      const result = {
        benchmark: 'replay',
        model: { api: 'openai chat completions', ttftMs: TTFT_MS, tokensPerS: TOKENS_PER_S, answerTokens: ANSWER_TOKENS, charsPerToken: 4, calls: modelCalls },
        implAttempts: IMPL_ATTEMPTS,
        attempts: { then: attemptsThen, now: attemptsNow, byStage: attempts },
        outcome: comparison.outcome,
        ...(comparison.error ? { error: comparison.error } : {}),
        diverged,
        differences,
        originalMs: Math.round(originalMs),
        replayMs: Math.round(replayMs),
        ratio: Number(ratio.toFixed(3)),
        targetRatio: TARGET_RATIO,
        met: ratio < TARGET_RATIO,
      };
      await writeResult('replay', result);
      return diverged ? 1 : 0;
    });
  } finally {
    if (modelOpen) await model.close();
    await b.close();
  }
}

runBenchmark('replay', main);
