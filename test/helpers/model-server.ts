import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { GatewayLimits } from '../../src/gateway/gateway';
import type { UpstreamModel } from '../../src/gateway/upstream';

/**
 * A local HTTP server that speaks the Anthropic Messages, OpenAI Chat Completions and OpenAI
 * Responses wire formats, whole or streamed (SSE) as the request asks, for tests: no paid API is
 * reachable here. Each request is recorded; what it answers
 * is decided by `respond`, which may return a text (wrapped in the provider's response shape),
 * tool calls (with or without a text before them), or a raw reply (status, headers, body) to
 * play 429s, 500s, bad JSON, wrong models, slowness.
 *
 * Tool calls go out in each API's own shape: Anthropic `tool_use` content blocks (streamed as
 * `input_json_delta`s, `stop_reason: tool_use`), Responses `function_call` and `custom_tool_call`
 * output items (the latter is how Codex's freeform `apply_patch` is called), Chat Completions
 * `tool_calls` (streamed as `tool_calls` deltas, `finish_reason: tool_calls`). A custom tool call
 * exists only in the Responses API; elsewhere it is sent as a function call whose arguments are
 * `{"input": …}`.
 */

/** Which API a request is in, from its path. */
export type Dialect = 'chat' | 'responses' | 'messages';

export interface RecordedRequest {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: { model?: string; max_tokens?: number; stream?: boolean; messages?: Array<{ role: string; content: unknown }> } & Record<string, unknown>;
  /** The first user message: the prompt (for CLIs that send context first, see `lastUserText`). */
  readonly prompt: string;
  /**
   * The text of the latest user message that has text: the task, where a CLI sends context
   * messages before it (Codex: `<environment_context>` first) or few-shot examples (aider).
   */
  readonly lastUserText: string;
  /** The API the request is in (from its path). */
  readonly dialect: Dialect;
  /**
   * The tools the request offers, by name: Anthropic `tools[].name`, Chat Completions
   * `tools[].function.name`, Responses `tools[].name` (function and custom tools alike).
   */
  readonly toolNames: readonly string[];
  /** The names of the tools the request offers as Responses `custom` (freeform) tools. */
  readonly customToolNames: readonly string[];
  /** How many tool calls the model has made so far in this conversation. */
  readonly toolCallCount: number;
  /**
   * How many tool results the conversation holds so far: Anthropic `tool_result` blocks,
   * Chat Completions `tool` messages, Responses `*_call_output` items. What a multi-turn script
   * keys on.
   */
  readonly toolResultCount: number;
  /** The tool results so far, oldest first, as text. */
  readonly toolResults: readonly ToolResult[];
  /**
   * The system prompt: Anthropic `system` and `system` messages, Responses `instructions` and
   * `developer`/`system` items, Chat Completions `system`/`developer` messages, joined.
   */
  readonly system: string;
}

export interface ToolResult {
  /** The id of the call it answers (`tool_use_id` / `call_id` / `tool_call_id`). */
  readonly callId: string;
  readonly text: string;
  /** Anthropic `is_error`; undefined where the API has no such flag. */
  readonly isError?: boolean;
}

/**
 * A tool call the model makes. `input` is the JSON arguments of a function tool (Anthropic
 * `tool_use.input`, Chat and Responses `arguments`); `customInput` makes it a Responses
 * `custom_tool_call` with that freeform text as its input (Codex's `apply_patch`).
 */
export type ToolCall =
  | { readonly name: string; readonly input: Record<string, unknown>; readonly id?: string }
  | { readonly name: string; readonly customInput: string; readonly id?: string };

export type Reply =
  | { readonly text: string; readonly model?: string; readonly usage?: { input: number; output: number }; readonly cutAfterEvents?: number }
  | {
      readonly toolCalls: readonly ToolCall[];
      /** Text said before the calls. */
      readonly text?: string;
      readonly model?: string;
      readonly usage?: { input: number; output: number };
      readonly cutAfterEvents?: number;
      readonly delayMs?: number;
    }
  | { readonly raw: { readonly status: number; readonly headers?: Record<string, string>; readonly body: string }; readonly delayMs?: number }
  | { readonly delayMs: number; readonly text: string; readonly model?: string };

export interface ModelServer {
  readonly url: string;
  readonly requests: RecordedRequest[];
  respond: (request: RecordedRequest, index: number) => Reply;
  close(): Promise<void>;
}

export async function startModelServer(respond: ModelServer['respond'] = () => ({ text: 'ok' })): Promise<ModelServer> {
  const requests: RecordedRequest[] = [];
  const state = { respond };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body: RecordedRequest['body'] = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        // recorded as an empty body; the test sees it
      }
      if (typeof body !== 'object' || body === null || Array.isArray(body)) body = {};
      const path = req.url ?? '';
      const dialect = dialectOfPath(path);
      const recorded: RecordedRequest = { path, headers: req.headers, body, prompt: promptOf(body), dialect, ...conversationOf(dialect, body) };
      requests.push(recorded);
      const index = requests.length - 1;
      const reply = state.respond(recorded, index);
      const send = (): void => {
        if (res.destroyed) return;
        if ('raw' in reply) {
          res.writeHead(reply.raw.status, { 'content-type': 'application/json', ...reply.raw.headers });
          res.end(reply.raw.body);
          return;
        }
        const model = reply.model ?? body.model ?? 'unknown';
        const usage = 'usage' in reply && reply.usage ? reply.usage : { input: 1000, output: 200 };
        const answer: Answer = {
          model,
          text: reply.text ?? '',
          calls: 'toolCalls' in reply ? reply.toolCalls.map((call, i) => normalizeCall(call, index, i)) : [],
          usage,
        };
        if (body.stream === true) {
          const events = streamedAnswer(dialect, answer, body);
          const cut = 'cutAfterEvents' in reply ? reply.cutAfterEvents : undefined;
          res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
          for (const [i, event] of events.entries()) {
            if (cut !== undefined && i >= cut) {
              // Cut once what was written has left: the client gets a body that stops mid-way.
              setTimeout(() => res.destroy(), 50);
              return;
            }
            res.write(event);
          }
          res.end();
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(wholeAnswer(dialect, answer)));
      };
      const delay = 'delayMs' in reply ? (reply.delayMs ?? 0) : 0;
      if (delay > 0) setTimeout(send, delay);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    get respond() {
      return state.respond;
    },
    set respond(fn) {
      state.respond = fn;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** How the gateway reaches `server` as an upstream of `kind`: its test model, with small caps for tests. */
export function testUpstream(server: Pick<ModelServer, 'url'>, kind: 'openai' | 'anthropic'): UpstreamModel {
  return {
    kind,
    baseUrl: kind === 'openai' ? `${server.url}/v1` : server.url,
    apiKeyEnv: [kind === 'openai' ? 'OPENAI_API_KEY' : 'ANTHROPIC_API_KEY'],
    models: [kind === 'openai' ? 'gpt-test' : 'claude-test'],
    maxTokens: 4096,
    // A hang guard, not a figure under test: the local model server answers in milliseconds.
    timeoutMs: 60_000,
    maxResponseBytes: 1_000_000,
  };
}

/** The stage a Warden prompt is for ("# Warden: impl (attempt 2)" → impl). */
export function stageOf(prompt: string): string {
  return /^# Warden: ([a-z]+)/.exec(prompt)?.[1] ?? '';
}

type TokenCounts = { readonly input: number; readonly output: number };

/** A tool call with its ids fixed: deterministic, from the request's index and the call's. */
interface Call {
  readonly name: string;
  /** Anthropic `toolu_…`, Chat `call_…`, Responses `call_id`. */
  readonly callId: string;
  /** The Responses output item's own id (`fc_…` / `ctc_…`). */
  readonly itemId: string;
  /** JSON arguments (function calls) or the freeform input (custom calls). */
  readonly input: Record<string, unknown> | undefined;
  readonly customInput: string | undefined;
}

interface Answer {
  readonly model: string;
  readonly text: string;
  readonly calls: readonly Call[];
  readonly usage: TokenCounts;
}

function normalizeCall(call: ToolCall, requestIndex: number, callIndex: number): Call {
  const suffix = `${String(requestIndex).padStart(3, '0')}_${callIndex}`;
  const custom = 'customInput' in call;
  return {
    name: call.name,
    callId: call.id ?? `call_test_${suffix}`,
    itemId: custom ? `ctc_test_${suffix}` : `fc_test_${suffix}`,
    input: custom ? undefined : call.input,
    customInput: custom ? call.customInput : undefined,
  };
}

/** A call's arguments as the JSON text the APIs carry (a custom call outside Responses: `{"input": …}`). */
function argumentsOf(call: Call): string {
  return JSON.stringify(call.input ?? { input: call.customInput ?? '' });
}

function dialectOfPath(path: string): Dialect {
  if (path.startsWith('/v1/messages') || path.startsWith('/messages')) return 'messages';
  if (path.startsWith('/v1/responses') || path.startsWith('/responses')) return 'responses';
  return 'chat';
}

function wholeAnswer(dialect: Dialect, answer: Answer): unknown {
  const { model, text, calls, usage } = answer;
  if (dialect === 'messages') {
    const content = [
      ...(text !== '' || calls.length === 0 ? [{ type: 'text', text }] : []),
      ...calls.map((call) => ({ type: 'tool_use', id: anthropicId(call), name: call.name, input: call.input ?? { input: call.customInput ?? '' } })),
    ];
    return {
      id: 'msg_test',
      type: 'message',
      role: 'assistant',
      model,
      content,
      stop_reason: calls.length > 0 ? 'tool_use' : 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: usage.input, output_tokens: usage.output },
    };
  }
  if (dialect === 'responses') return responseObject(answer);
  const message: Record<string, unknown> = { role: 'assistant', content: text === '' && calls.length > 0 ? null : text };
  if (calls.length > 0) message.tool_calls = calls.map((call) => ({ id: call.callId, type: 'function', function: { name: call.name, arguments: argumentsOf(call) } }));
  return {
    id: 'chatcmpl-test',
    object: 'chat.completion',
    model,
    choices: [{ index: 0, message, finish_reason: calls.length > 0 ? 'tool_calls' : 'stop' }],
    usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output },
  };
}

/** Anthropic tool_use ids start with `toolu_`. */
function anthropicId(call: Call): string {
  return call.callId.startsWith('call_test_') ? call.callId.replace('call_test_', 'toolu_test_') : call.callId;
}

/** The Responses output items of an answer: a message when there is text (or nothing else), then the calls. */
function responseItems(answer: Answer): Array<Record<string, unknown>> {
  const items: Array<Record<string, unknown>> = [];
  if (answer.text !== '' || answer.calls.length === 0) {
    items.push({ type: 'message', id: 'msg_test', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: answer.text, annotations: [] }] });
  }
  for (const call of answer.calls) {
    items.push(
      call.customInput !== undefined
        ? { type: 'custom_tool_call', id: call.itemId, call_id: call.callId, name: call.name, input: call.customInput, status: 'completed' }
        : { type: 'function_call', id: call.itemId, call_id: call.callId, name: call.name, arguments: argumentsOf(call), status: 'completed' },
    );
  }
  return items;
}

function responseObject(answer: Answer): unknown {
  const { model, usage } = answer;
  return {
    id: 'resp_test',
    object: 'response',
    status: 'completed',
    model,
    output: responseItems(answer),
    usage: { input_tokens: usage.input, output_tokens: usage.output, total_tokens: usage.input + usage.output },
  };
}

/** The text in a few pieces, as a model streams it. */
function piecesOf(text: string): string[] {
  const pieces = text.match(/[\s\S]{1,16}/g) ?? [];
  return pieces.length > 0 ? pieces : [''];
}

/** Arguments in a few pieces (larger ones than text: arguments carry whole files). */
function argumentPiecesOf(json: string): string[] {
  const pieces = json.match(/[\s\S]{1,64}/g) ?? [];
  return pieces.length > 0 ? pieces : [''];
}

/** A streamed answer as its server-sent events, each with its blank line. */
function streamedAnswer(dialect: Dialect, answer: Answer, body: Record<string, unknown>): string[] {
  const { model, text, calls, usage } = answer;
  const sse = (data: unknown, event?: string): string => `${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(data)}\n\n`;
  if (dialect === 'messages') {
    const events = [
      sse({ type: 'message_start', message: { id: 'msg_test', type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: usage.input, output_tokens: 1 } } }, 'message_start'),
    ];
    let index = 0;
    if (text !== '' || calls.length === 0) {
      events.push(
        sse({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } }, 'content_block_start'),
        ...piecesOf(text).map((piece) => sse({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: piece } }, 'content_block_delta')),
        sse({ type: 'content_block_stop', index }, 'content_block_stop'),
      );
      index += 1;
    }
    for (const call of calls) {
      const json = JSON.stringify(call.input ?? { input: call.customInput ?? '' });
      events.push(
        sse({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: anthropicId(call), name: call.name, input: {} } }, 'content_block_start'),
        ...argumentPiecesOf(json).map((piece) => sse({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: piece } }, 'content_block_delta')),
        sse({ type: 'content_block_stop', index }, 'content_block_stop'),
      );
      index += 1;
    }
    events.push(
      sse({ type: 'message_delta', delta: { stop_reason: calls.length > 0 ? 'tool_use' : 'end_turn', stop_sequence: null }, usage: { output_tokens: usage.output } }, 'message_delta'),
      sse({ type: 'message_stop' }, 'message_stop'),
    );
    return events;
  }
  if (dialect === 'responses') {
    let sequence = 0;
    const event = (type: string, data: Record<string, unknown>): string => sse({ type, sequence_number: sequence++, ...data }, type);
    const events = [
      event('response.created', { response: { id: 'resp_test', object: 'response', status: 'in_progress', model, output: [] } }),
      event('response.in_progress', { response: { id: 'resp_test', object: 'response', status: 'in_progress', model, output: [] } }),
    ];
    for (const [outputIndex, item] of responseItems(answer).entries()) {
      if (item.type === 'message') {
        const itemText = (item.content as Array<{ text: string }>)[0]!.text;
        const part = { type: 'output_text', text: '', annotations: [] };
        events.push(
          event('response.output_item.added', { output_index: outputIndex, item: { ...item, status: 'in_progress', content: [] } }),
          event('response.content_part.added', { item_id: item.id, output_index: outputIndex, content_index: 0, part }),
          ...piecesOf(itemText).map((piece) => event('response.output_text.delta', { item_id: item.id, output_index: outputIndex, content_index: 0, delta: piece })),
          event('response.output_text.done', { item_id: item.id, output_index: outputIndex, content_index: 0, text: itemText }),
          event('response.content_part.done', { item_id: item.id, output_index: outputIndex, content_index: 0, part: { ...part, text: itemText } }),
        );
      } else if (item.type === 'function_call') {
        const args = item.arguments as string;
        events.push(
          event('response.output_item.added', { output_index: outputIndex, item: { ...item, arguments: '', status: 'in_progress' } }),
          ...argumentPiecesOf(args).map((piece) => event('response.function_call_arguments.delta', { item_id: item.id, output_index: outputIndex, delta: piece })),
          event('response.function_call_arguments.done', { item_id: item.id, output_index: outputIndex, arguments: args }),
        );
      } else {
        const input = item.input as string;
        events.push(
          event('response.output_item.added', { output_index: outputIndex, item: { ...item, input: '', status: 'in_progress' } }),
          ...argumentPiecesOf(input).map((piece) => event('response.custom_tool_call_input.delta', { item_id: item.id, output_index: outputIndex, delta: piece })),
          event('response.custom_tool_call_input.done', { item_id: item.id, output_index: outputIndex, input }),
        );
      }
      events.push(event('response.output_item.done', { output_index: outputIndex, item }));
    }
    events.push(event('response.completed', { response: responseObject(answer) }));
    return events;
  }
  const chunk = (delta: unknown, finish: string | null) => ({ id: 'chatcmpl-test', object: 'chat.completion.chunk', model, choices: [{ index: 0, delta, finish_reason: finish }] });
  const withUsage = (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
  const textChunks = text !== '' || calls.length === 0 ? piecesOf(text).map((piece) => sse(chunk({ content: piece }, null))) : [];
  const callChunks = calls.flatMap((call, index) => [
    sse(chunk({ tool_calls: [{ index, id: call.callId, type: 'function', function: { name: call.name, arguments: '' } }] }, null)),
    ...argumentPiecesOf(argumentsOf(call)).map((piece) => sse(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }, null))),
  ]);
  return [
    sse(chunk({ role: 'assistant', content: calls.length > 0 && text === '' ? null : '' }, null)),
    ...textChunks,
    ...callChunks,
    sse(chunk({}, calls.length > 0 ? 'tool_calls' : 'stop')),
    ...(withUsage ? [sse({ id: 'chatcmpl-test', object: 'chat.completion.chunk', model, choices: [], usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output } })] : []),
    'data: [DONE]\n\n',
  ];
}

/** The text of a content value: a string, or the texts of an array of parts. */
function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((part: { text?: unknown }) => (typeof part?.text === 'string' ? part.text : '')).join('');
}

/** The first user message's text, whichever API the body is in. */
function promptOf(body: Record<string, unknown>): string {
  if (typeof body.input === 'string') return body.input;
  const list = (Array.isArray(body.messages) ? body.messages : Array.isArray(body.input) ? body.input : []) as Array<{ role?: string; content?: unknown }>;
  return textOf(list.find((m) => m?.role === 'user')?.content);
}

type Item = Record<string, unknown>;
const items = (value: unknown): Item[] => (Array.isArray(value) ? value.filter((v): v is Item => typeof v === 'object' && v !== null) : []);

/** Tools offered, tool calls and results so far, and the system prompt, in the body's API. */
function conversationOf(
  dialect: Dialect,
  body: Record<string, unknown>,
): Pick<RecordedRequest, 'toolNames' | 'customToolNames' | 'toolCallCount' | 'toolResultCount' | 'toolResults' | 'system' | 'lastUserText'> {
  const tools = items(body.tools);
  const toolNames = tools
    .map((tool) => (typeof tool.name === 'string' ? tool.name : (tool.function as { name?: unknown } | undefined)?.name))
    .filter((name): name is string => typeof name === 'string');
  const customToolNames = tools.filter((tool) => tool.type === 'custom' && typeof tool.name === 'string').map((tool) => tool.name as string);
  const toolResults: ToolResult[] = [];
  let toolCallCount = 0;
  let system = '';
  let lastUserText = '';
  const addSystem = (text: string): void => {
    if (text !== '') system += (system ? '\n' : '') + text;
  };
  const seeUser = (content: unknown): void => {
    const text = textOf(content);
    if (text !== '') lastUserText = text;
  };

  if (dialect === 'messages') {
    addSystem(textOf(body.system));
    for (const message of items(body.messages)) {
      if (message.role === 'system') addSystem(textOf(message.content));
      if (message.role === 'user') seeUser(message.content);
      for (const block of items(message.content)) {
        if (block.type === 'tool_use') toolCallCount += 1;
        if (block.type === 'tool_result') {
          toolResults.push({ callId: String(block.tool_use_id ?? ''), text: textOf(block.content), isError: block.is_error === true });
        }
      }
    }
  } else if (dialect === 'responses') {
    addSystem(typeof body.instructions === 'string' ? body.instructions : '');
    if (typeof body.input === 'string') lastUserText = body.input;
    for (const item of items(body.input)) {
      const type = typeof item.type === 'string' ? item.type : '';
      if (item.role === 'system' || item.role === 'developer') addSystem(textOf(item.content));
      if (item.role === 'user') seeUser(item.content);
      if (type.endsWith('_call') && type !== 'web_search_call') toolCallCount += 1;
      if (type.endsWith('_call_output')) {
        const output = item.output;
        const text = typeof output === 'string' ? output : Array.isArray(output) ? textOf(output) : JSON.stringify(output ?? '');
        toolResults.push({ callId: String(item.call_id ?? ''), text });
      }
    }
  } else {
    for (const message of items(body.messages)) {
      if (message.role === 'system' || message.role === 'developer') addSystem(textOf(message.content));
      if (message.role === 'user') seeUser(message.content);
      if (message.role === 'assistant') toolCallCount += items(message.tool_calls).length;
      if (message.role === 'tool') toolResults.push({ callId: String(message.tool_call_id ?? ''), text: textOf(message.content) });
    }
  }
  return { toolNames, customToolNames, toolCallCount, toolResultCount: toolResults.length, toolResults, system, lastUserText };
}

/**
 * A model server for a whole test file: started before its tests (with `WARDEN_TEST_MODEL_KEY`
 * set, the key the tests' profiles name), its request log emptied before each, closed after.
 */
export function useModelServer(): () => ModelServer {
  let server: ModelServer | undefined;
  beforeAll(async () => {
    server = await startModelServer();
    process.env.WARDEN_TEST_MODEL_KEY = 'sk-test-model-key-0123456789';
  });
  afterAll(async () => {
    await server?.close();
  });
  beforeEach(() => {
    if (server) server.requests.length = 0;
  });
  return () => {
    if (!server) throw new Error('the model server is used before its beforeAll ran');
    return server;
  };
}

/** Gateway limits for tests that exercise something else: a breaker that needs three failures, rates nothing reaches. */
export const TEST_GATEWAY_LIMITS: GatewayLimits = {
  circuitBreaker: { failureRate: 0.5, minimumCalls: 3, consecutiveFailures: 3, window: '60s', halfOpenAfter: '30s', probes: 1, probeInterval: '1s' },
  rateLimits: { perAgent: { requestsPerMinute: 1000, tokensPerMinute: 10_000_000 }, perModel: { requestsPerMinute: 1000, tokensPerMinute: 10_000_000 } },
};
