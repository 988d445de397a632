/**
 * What the model gateway adds to one model call. Every call an agent makes goes through the
 * gateway (src/gateway/gateway.ts): read, checked, reserved against the budget, forwarded,
 * relayed event by event while it is screened and redacted, settled. That must cost the agent
 * next to nothing: at most 2 ms more at p50 and 10 ms more at p99 than the call made straight.
 *
 *   npx tsx bench/gateway-latency.ts [--calls 2000] [--warmup 200] [--smoke] [--prompt-bytes 8000] [--answer-chars 1000] [--event-chars 16] [--ledger] [--recording]
 *   npm run bench:gateway
 *
 * The upstream is a scripted model on loopback (below) that answers at once, so what is measured
 * is the gateway's own time, not a model's. A streamed answer comes as a model sends it: its
 * headers and first event, a pause of FIRST_EVENT_PAUSE_MS, then every other event in one burst
 * (`--answer-chars` of text, `--event-chars` per event) — the pause is what lets the first byte
 * be timed apart from the last, and the burst is the gateway's worst case, with no gap between
 * events to do its work in. The same calls are made straight to it (direct) and through a
 * gateway, with a lease of its own whose meter has an in-memory budget book, a redactor and a
 * call recorder, as the worker runs it; for three cases: Chat Completions streamed and whole, and
 * Anthropic Messages streamed. Each call has a body of its own (the gateway halts an attempt that
 * repeats itself). Direct and gateway calls alternate, and so do the cases, so whatever the
 * machine does meanwhile hits them all alike; the first `--warmup` rounds are not counted.
 * Keep-alive connections (Node's fetch) both ways.
 *
 * Times are the client's: to the first byte of the body (streams) and to its last byte. Printed:
 * p50 and p99 of each, the process CPU per call, what the gateway adds (gateway minus direct,
 * at p50 and at p99), whether the targets are met (on the last byte; reported, not asserted),
 * and a JSON line; results in bench/results/gateway-latency.json. Client, gateway and upstream
 * share this one process, so a call through the gateway also waits for the gateway's CPU work:
 * that is the point.
 *
 * `--ledger` writes each call's `model_calls` row to a real ledger (an embedded PostgreSQL of the
 * run's own) instead of counting it in memory; `--recording` (which implies it) also records each
 * exchange there, as a worker with `worker.recording` on does (its cap raised so that every
 * call's bodies are stored). Run both to see what recording adds.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { ApplicationFailure } from '@temporalio/common';
import pino from 'pino';
import { ModelGateway, type GatewayLimits } from '../src/gateway/gateway';
import type { Lease } from '../src/gateway/lease';
import { SpendMeter, type BudgetBook, type OpenCall } from '../src/gateway/spend-meter';
import type { PricingTable } from '../src/safety/pricing';
import { addUsd, compareUsd, ZERO_USD } from '../src/shared/money';
import { openDatabase, type LedgerDatabase } from '../src/ledger/database';
import { ExchangeStore } from '../src/ledger/exchange-store';
import { Ledger } from '../src/ledger/ledger';
import { createRedactor } from '../src/shared/redact';
import { out, percentile, runBenchmark, sized } from './console';
import { writeResult } from './harness';

const { values: flags } = parseArgs({
  options: {
    calls: { type: 'string' },
    warmup: { type: 'string' },
    smoke: { type: 'boolean', default: false },
    'prompt-bytes': { type: 'string', default: '8000' },
    'answer-chars': { type: 'string', default: '1000' },
    'event-chars': { type: 'string', default: '16' },
    ledger: { type: 'boolean', default: false },
    recording: { type: 'boolean', default: false },
  },
});
const CALLS = sized(flags.calls, flags.smoke, 2000, 100);
const WARMUP = sized(flags.warmup, flags.smoke, 200, 10);
const PROMPT_BYTES = Number(flags['prompt-bytes']);
const ANSWER_CHARS = Number(flags['answer-chars']);
const EVENT_CHARS = Number(flags['event-chars']);
if (![CALLS, WARMUP, PROMPT_BYTES, ANSWER_CHARS, EVENT_CHARS].every((n) => Number.isInteger(n) && n >= 0) || CALLS < 100 || ANSWER_CHARS < 1 || EVENT_CHARS < 1) {
  out('--calls takes a whole number ≥ 100, --warmup and --prompt-bytes one ≥ 0, --answer-chars and --event-chars one ≥ 1');
  process.exit(2);
}

/** Between a streamed answer's first event and the rest. */
const FIRST_EVENT_PAUSE_MS = 2;

/** What the gateway may add, at most. */
const TARGET = { p50Ms: 2, p99Ms: 10 };

const UPSTREAM_KEY = 'sk-upstream-real-key-0123456789';
const pricing: PricingTable = {
  'gpt-test': { inputUsdPerMillion: '3', outputUsdPerMillion: '15' },
  'claude-test': { inputUsdPerMillion: '3', outputUsdPerMillion: '15' },
};
/** The default profile's circuit; rate limits far above what this loop asks, so none refuses a call. */
const limits: GatewayLimits = {
  circuitBreaker: { failureRate: 0.5, minimumCalls: 20, consecutiveFailures: 5, window: '5m', halfOpenAfter: '30s', probes: 3, probeInterval: '5s' },
  rateLimits: { perAgent: { requestsPerMinute: 1_000_000_000, tokensPerMinute: 10_000_000_000 }, perModel: { requestsPerMinute: 1_000_000_000, tokensPerMinute: 10_000_000_000 } },
};

/** A budget book in memory: one limit, checked on reserve, as the ledger's would be. */
function memoryBook(limitUsd: string): { book: BudgetBook; settled: () => number } {
  const open = new Map<number, OpenCall>();
  let committed = ZERO_USD;
  let settled = 0;
  const book: BudgetBook = {
    async reserve(call) {
      let reserved = committed;
      for (const o of open.values()) reserved = addUsd(reserved, o.maxUsd);
      if (compareUsd(addUsd(reserved, call.maxUsd), limitUsd) > 0) {
        throw ApplicationFailure.create({ type: 'BUDGET_EXCEEDED', message: `bench budget: $${call.maxUsd} more would pass $${limitUsd}`, nonRetryable: true });
      }
      open.set(call.index, call);
    },
    async settle(call, paid) {
      open.delete(call.index);
      committed = addUsd(committed, paid.costUsd);
      settled += 1;
    },
    async release(call) {
      open.delete(call.index);
    },
  };
  return { book, settled: () => settled };
}

/** Ordinary prose, nothing the screening objects to, `chars` long. */
function prose(chars: number, seed: string): string {
  const sentence = 'The parser reads the header, checks the length against the limit and returns the fields it found. ';
  return `${seed} ${sentence.repeat(Math.ceil(chars / sentence.length))}`.slice(0, chars);
}

/** The scripted model: Chat Completions and Anthropic Messages, whole or streamed as asked, always with `answer`. */
interface Upstream {
  readonly url: string;
  close(): Promise<void>;
}

async function startUpstream(answer: string): Promise<Upstream> {
  const usage = { input: Math.ceil(PROMPT_BYTES / 4), output: Math.ceil(answer.length / 4) };
  const pieces = answer.match(new RegExp(`[\\s\\S]{1,${EVENT_CHARS}}`, 'g')) ?? [];
  const sse = (data: unknown, event?: string): string => `${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(data)}\n\n`;
  const chunk = (model: string, delta: unknown, finish: string | null) => ({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', model, choices: [{ index: 0, delta, finish_reason: finish }] });
  const chatEvents = (model: string, withUsage: boolean): string[] => [
    sse(chunk(model, { role: 'assistant', content: '' }, null)),
    ...pieces.map((piece) => sse(chunk(model, { content: piece }, null))),
    sse(chunk(model, {}, 'stop')),
    ...(withUsage ? [sse({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', model, choices: [], usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output } })] : []),
    'data: [DONE]\n\n',
  ];
  const messagesEvents = (model: string): string[] => [
    sse({ type: 'message_start', message: { id: 'msg_bench', type: 'message', role: 'assistant', model, content: [], stop_reason: null, usage: { input_tokens: usage.input, output_tokens: 1 } } }, 'message_start'),
    sse({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }, 'content_block_start'),
    ...pieces.map((piece) => sse({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: piece } }, 'content_block_delta')),
    sse({ type: 'content_block_stop', index: 0 }, 'content_block_stop'),
    sse({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: usage.output } }, 'message_delta'),
    sse({ type: 'message_stop' }, 'message_stop'),
  ];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { model: string; stream?: boolean; stream_options?: { include_usage?: boolean } };
      const messages = (req.url ?? '').startsWith('/v1/messages');
      if (body.stream !== true) {
        const whole = messages
          ? { id: 'msg_bench', type: 'message', role: 'assistant', model: body.model, content: [{ type: 'text', text: answer }], stop_reason: 'end_turn', usage: { input_tokens: usage.input, output_tokens: usage.output } }
          : { id: 'chatcmpl-bench', object: 'chat.completion', model: body.model, choices: [{ index: 0, message: { role: 'assistant', content: answer }, finish_reason: 'stop' }], usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output } };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(whole));
        return;
      }
      const [first, ...rest] = messages ? messagesEvents(body.model) : chatEvents(body.model, body.stream_options?.include_usage === true);
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write(first);
      setTimeout(() => res.end(rest.join('')), FIRST_EVENT_PAUSE_MS);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

interface Case {
  readonly name: string;
  readonly kind: 'openai' | 'anthropic';
  readonly path: string;
  readonly streamed: boolean;
  /** The request body of call `i` (each one different). */
  readonly body: (i: number) => string;
  /** What the whole answer ends with when it arrived whole. */
  readonly ending: string;
}

const system = prose(PROMPT_BYTES, 'You are a coding agent.');
const chatBody = (stream: boolean) => (i: number) =>
  JSON.stringify({ model: 'gpt-test', stream, max_tokens: 1000, messages: [{ role: 'system', content: system }, { role: 'user', content: `Call ${i}: fix the parser.` }] });
const CASES: readonly Case[] = [
  { name: 'chat, streamed', kind: 'openai', path: '/v1/chat/completions', streamed: true, body: chatBody(true), ending: 'data: [DONE]\n\n' },
  { name: 'chat, whole', kind: 'openai', path: '/v1/chat/completions', streamed: false, body: chatBody(false), ending: '}' },
  {
    name: 'messages, streamed',
    kind: 'anthropic',
    path: '/v1/messages',
    streamed: true,
    body: (i) => JSON.stringify({ model: 'claude-test', stream: true, max_tokens: 1000, system, messages: [{ role: 'user', content: `Call ${i}: fix the parser.` }] }),
    ending: '"type":"message_stop"}\n\n',
  },
];

interface Sample {
  ttfbMs: number;
  ttlbMs: number;
  cpuUs: number;
}

/** One call as a client makes it: the body read to its end, timed at its first and last byte. */
async function timedCall(url: string, headers: Record<string, string>, body: string, ending: string): Promise<Sample> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  const response = await fetch(url, { method: 'POST', headers, body });
  let ttfbMs: number | undefined;
  const chunks: Uint8Array[] = [];
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    ttfbMs ??= performance.now() - started;
    chunks.push(chunk);
  }
  const ttlbMs = performance.now() - started;
  const used = process.cpuUsage(cpu);
  const text = Buffer.concat(chunks).toString('utf8');
  if (response.status !== 200 || !text.endsWith(ending)) throw new Error(`${url}: HTTP ${response.status}, an answer not whole: ${text.slice(-300)}`);
  return { ttfbMs: ttfbMs ?? ttlbMs, ttlbMs, cpuUs: used.user + used.system };
}

function headersOf(kind: 'openai' | 'anthropic', key: string): Record<string, string> {
  return kind === 'anthropic' ? { 'content-type': 'application/json', 'x-api-key': key, 'anthropic-version': '2023-06-01' } : { 'content-type': 'application/json', authorization: `Bearer ${key}` };
}

interface Figures {
  readonly ttfbP50Ms: number;
  readonly ttfbP99Ms: number;
  readonly ttlbP50Ms: number;
  readonly ttlbP99Ms: number;
  readonly cpuMsPerCall: number;
}

function figuresOf(samples: readonly Sample[]): Figures {
  const at = (values: number[], p: number): number => percentile(values.sort((a, b) => a - b), p)!;
  return {
    ttfbP50Ms: at(samples.map((s) => s.ttfbMs), 50),
    ttfbP99Ms: at(samples.map((s) => s.ttfbMs), 99),
    ttlbP50Ms: at(samples.map((s) => s.ttlbMs), 50),
    ttlbP99Ms: at(samples.map((s) => s.ttlbMs), 99),
    cpuMsPerCall: samples.reduce((sum, s) => sum + s.cpuUs, 0) / 1000 / samples.length,
  };
}

const ms = (n: number): string => n.toFixed(2).padStart(8);
const plus = (n: number): string => `${n >= 0 ? '+' : ''}${n.toFixed(2)}`.padStart(8);

async function main(): Promise<number> {
  const answer = prose(ANSWER_CHARS, 'Done reading.');
  const upstream = await startUpstream(answer);
  const recorded = { rows: 0 };
  const useLedger = flags.ledger || flags.recording;
  const tmp = useLedger ? await mkdtemp(path.join(os.tmpdir(), 'warden-bench-gateway-')) : undefined;
  if (tmp) await chmod(tmp, 0o755); // the embedded PostgreSQL may run as another user
  const database: LedgerDatabase | undefined = tmp ? await openDatabase({ dataDir: path.join(tmp, 'postgres'), port: 0 }) : undefined;
  const ledger = database ? new Ledger(database.pool) : undefined;
  const gateway = await ModelGateway.start({
    limits,
    logger: pino({ level: 'silent' }),
    env: { OPENAI_API_KEY: UPSTREAM_KEY, ANTHROPIC_API_KEY: UPSTREAM_KEY },
    redact: createRedactor({ OPENAI_API_KEY: UPSTREAM_KEY, ANTHROPIC_API_KEY: UPSTREAM_KEY }),
    recordCall: async (row) => {
      if (ledger) await ledger.modelCalls.record(row);
      recorded.rows += 1;
    },
    ...(database && flags.recording ? { exchanges: new ExchangeStore(database.pool, { maxPerIntentMb: 100_000 }) } : {}),
  });
  out(`rows: ${ledger ? 'to a real ledger (embedded PostgreSQL)' : 'counted in memory'}; exchanges: ${flags.recording ? 'recorded' : 'not recorded'}`);
  const books = { openai: memoryBook('1000000'), anthropic: memoryBook('1000000') };
  const leases: Record<'openai' | 'anthropic', Lease> = {
    openai: issue(gateway, upstream, 'openai', books.openai.book),
    anthropic: issue(gateway, upstream, 'anthropic', books.anthropic.book),
  };
  const samples = CASES.map(() => ({ direct: [] as Sample[], gateway: [] as Sample[] }));
  out(`${CALLS} calls each way and case (after ${WARMUP} not counted), one at a time: prompt ${PROMPT_BYTES} bytes, answer ${ANSWER_CHARS} characters, ${EVENT_CHARS} a streamed event`);
  const started = performance.now();
  try {
    for (let i = 0; i < WARMUP + CALLS; i++) {
      for (const [c, each] of CASES.entries()) {
        const body = each.body(i);
        const ways = [
          { into: samples[c]!.direct, url: `${upstream.url}${each.path}`, headers: headersOf(each.kind, UPSTREAM_KEY) },
          { into: samples[c]!.gateway, url: `${gateway.url}${each.path}`, headers: headersOf(each.kind, leases[each.kind].key) },
        ];
        // Each goes first every other round.
        if (i % 2 === 1) ways.reverse();
        for (const way of ways) {
          const sample = await timedCall(way.url, way.headers, body, each.ending);
          if (i >= WARMUP) way.into.push(sample);
        }
      }
    }
  } finally {
    await Promise.all(Object.values(leases).map((lease) => lease.end()));
    await gateway.close();
    await upstream.close();
  }
  const exchanges = database ? Number((await database.pool.query<{ n: string }>(`SELECT count(*) AS n FROM model_exchanges WHERE stored`)).rows[0]!.n) : 0;
  await database?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
  const wallS = (performance.now() - started) / 1000;

  const expected = (WARMUP + CALLS) * CASES.length;
  const settled = books.openai.settled() + books.anthropic.settled();
  out(`${expected} calls through the gateway in ${wallS.toFixed(1)} s of the whole run: ${settled} settled in the budget books, ${recorded.rows} rows recorded`);
  if (settled !== expected || recorded.rows !== expected) throw new Error(`the gateway metered ${settled} and recorded ${recorded.rows} of ${expected} calls`);
  if (flags.recording) {
    out(`${exchanges} exchanges stored with their bodies`);
    if (exchanges !== expected) throw new Error(`the gateway recorded ${exchanges} of ${expected} exchanges`);
  }

  const cases = CASES.map((each, c) => {
    const direct = figuresOf(samples[c]!.direct);
    const through = figuresOf(samples[c]!.gateway);
    const added = {
      ttfbP50Ms: through.ttfbP50Ms - direct.ttfbP50Ms,
      ttfbP99Ms: through.ttfbP99Ms - direct.ttfbP99Ms,
      ttlbP50Ms: through.ttlbP50Ms - direct.ttlbP50Ms,
      ttlbP99Ms: through.ttlbP99Ms - direct.ttlbP99Ms,
      cpuMsPerCall: through.cpuMsPerCall - direct.cpuMsPerCall,
    };
    const met = { p50: added.ttlbP50Ms <= TARGET.p50Ms, p99: added.ttlbP99Ms <= TARGET.p99Ms };
    return { case: each.name, streamed: each.streamed, direct, gateway: through, added, met };
  });

  out('');
  out(`${'ms'.padEnd(20)}${'way'.padEnd(9)}${'TTFB p50'.padStart(9)}${'TTFB p99'.padStart(9)}${'TTLB p50'.padStart(9)}${'TTLB p99'.padStart(9)}${'CPU/call'.padStart(9)}`);
  for (const each of cases) {
    const row = (label: string, way: string, f: Figures, fmt: (n: number) => string): void => {
      const ttfb = each.streamed ? `${fmt(f.ttfbP50Ms)} ${fmt(f.ttfbP99Ms)}` : `${'-'.padStart(8)} ${'-'.padStart(8)}`;
      out(`${label.padEnd(20)}${way.padEnd(8)} ${ttfb} ${fmt(f.ttlbP50Ms)} ${fmt(f.ttlbP99Ms)} ${fmt(f.cpuMsPerCall)}`);
    };
    row(each.case, 'direct', each.direct, ms);
    row('', 'gateway', each.gateway, ms);
    row('', 'added', each.added, plus);
  }
  out('');
  out(`targets, on what the gateway adds to the last byte: p50 ≤ ${TARGET.p50Ms} ms, p99 ≤ ${TARGET.p99Ms} ms`);
  for (const each of cases) {
    const verdict = (met: boolean): string => (met ? 'met' : 'NOT met');
    out(`${each.case.padEnd(20)}p50 ${plus(each.added.ttlbP50Ms)} ms ${verdict(each.met.p50).padEnd(8)} p99 ${plus(each.added.ttlbP99Ms)} ms ${verdict(each.met.p99)}`);
  }
  const allMet = cases.every((each) => each.met.p50 && each.met.p99);
  out(allMet ? 'all targets met' : 'some targets NOT met');

  const result = {
    benchmark: 'gateway-latency',
    calls: CALLS,
    warmup: WARMUP,
    promptBytes: PROMPT_BYTES,
    answerChars: ANSWER_CHARS,
    eventChars: EVENT_CHARS,
    firstEventPauseMs: FIRST_EVENT_PAUSE_MS,
    targets: { addedP50Ms: TARGET.p50Ms, addedP99Ms: TARGET.p99Ms, on: 'ttlb' },
    ledger: useLedger,
    recording: flags.recording,
    exchangesStored: exchanges,
    cases,
    allMet,
  };
  await writeResult('gateway-latency', result);
  out(JSON.stringify(result));
  return 0;
}

function issue(gateway: ModelGateway, upstream: Upstream, kind: 'openai' | 'anthropic', book: BudgetBook): Lease {
  return gateway.issue({
    intentId: 'bench-gateway',
    stage: 'impl',
    attempt: 1,
    agentId: `bench-${kind}`,
    upstream: {
      kind,
      baseUrl: kind === 'openai' ? `${upstream.url}/v1` : upstream.url,
      apiKeyEnv: [kind === 'openai' ? 'OPENAI_API_KEY' : 'ANTHROPIC_API_KEY'],
      models: [kind === 'openai' ? 'gpt-test' : 'claude-test'],
      maxTokens: 4096,
      timeoutMs: 60_000,
      maxResponseBytes: 10_000_000,
    },
    meter: new SpendMeter({ pricing, declaredCapUsd: '0.50', book }),
  });
}

runBenchmark('gateway-latency', main);
