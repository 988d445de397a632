/**
 * The three model APIs the gateway speaks, as far as it needs to understand them: which API a
 * path is, where a request names its model, its output cap and whether it streams, where an
 * answer (whole or streamed) reports its usage and its text, and how each provider words an error.
 * Everything else in a request or an answer passes through untouched.
 */
import type { Usage } from './usage';

/** OpenAI Chat Completions, OpenAI Responses, Anthropic Messages. */
export type Dialect = 'chat' | 'responses' | 'messages';

/** The provider family a dialect belongs to: the kind of upstream that serves it. */
export function providerOf(dialect: Dialect): 'openai' | 'anthropic' {
  return dialect === 'messages' ? 'anthropic' : 'openai';
}

/**
 * The API a request path is, and the path to append to the upstream's base URL. OpenAI base
 * URLs end in `/v1` by convention (clients append `/chat/completions`), Anthropic's do not
 * (clients append `/v1/messages`); the gateway accepts both spellings of each.
 */
export function routeOf(pathname: string): { readonly dialect: Dialect; readonly upstreamPath: string } | undefined {
  const path = pathname.replace(/\/+$/, '');
  if (path === '/v1/chat/completions' || path === '/chat/completions') return { dialect: 'chat', upstreamPath: '/chat/completions' };
  if (path === '/v1/responses' || path === '/responses') return { dialect: 'responses', upstreamPath: '/responses' };
  if (path === '/v1/messages' || path === '/messages') return { dialect: 'messages', upstreamPath: '/v1/messages' };
  return undefined;
}

/** What the gateway reads from a request body. */
export interface ModelRequest {
  readonly model: string;
  readonly stream: boolean;
  /** The output cap the client asked for, if any. */
  readonly maxTokens?: number;
  readonly body: Record<string, unknown>;
}

/** The field each API caps its output with (Chat has two spellings; the newer one wins when both are given). */
function maxTokensFieldOf(dialect: Dialect, body: Record<string, unknown>): string {
  if (dialect === 'responses') return 'max_output_tokens';
  if (dialect === 'chat' && body.max_completion_tokens !== undefined) return 'max_completion_tokens';
  return 'max_tokens';
}

/** Reads a request body, or says in a sentence why it is not one. */
export function parseModelRequest(dialect: Dialect, text: string): ModelRequest | { readonly problem: string } {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { problem: 'the request body is not JSON' };
  }
  if (!body || typeof body !== 'object' || Array.isArray(body)) return { problem: 'the request body is not a JSON object' };
  const record = body as Record<string, unknown>;
  if (typeof record.model !== 'string' || record.model.trim() === '') return { problem: 'the request names no model' };
  const cap = record[maxTokensFieldOf(dialect, record)];
  if (cap !== undefined && cap !== null && !(Number.isSafeInteger(cap) && (cap as number) > 0)) {
    return { problem: `${maxTokensFieldOf(dialect, record)} must be a positive integer` };
  }
  if (record.stream !== undefined && typeof record.stream !== 'boolean') return { problem: 'stream must be true or false' };
  return { model: record.model, stream: record.stream === true, maxTokens: typeof cap === 'number' ? cap : undefined, body: record };
}

/**
 * The body to forward: the output cap set to `maxTokens`, and a streamed Chat request asked to
 * report its usage (OpenAI streams usage only when asked). `usageAsked` says whether the client
 * asked itself; if not, the usage chunk is kept from it (see `SseUsageReader.forClient`).
 */
export function upstreamBody(dialect: Dialect, request: ModelRequest, maxTokens: number): { readonly body: string; readonly usageAsked: boolean } {
  const body: Record<string, unknown> = { ...request.body, [maxTokensFieldOf(dialect, request.body)]: maxTokens };
  let usageAsked = true;
  if (dialect === 'chat' && request.stream) {
    const options = (typeof body.stream_options === 'object' && body.stream_options !== null ? body.stream_options : {}) as Record<string, unknown>;
    usageAsked = options.include_usage === true;
    body.stream_options = { ...options, include_usage: true };
  }
  return { body: JSON.stringify(body), usageAsked };
}

/** Usage and text of a whole (non-streamed) answer; usage undefined when it reports none. */
export function readAnswer(dialect: Dialect, text: string): { readonly usage?: Usage; readonly model?: string; readonly text: string } {
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return { text: '' };
  }
  if (!body || typeof body !== 'object') return { text: '' };
  const model = typeof body.model === 'string' ? body.model : undefined;
  return { usage: usageOf(dialect, body.usage), model, text: answerText(dialect, body) };
}

function answerText(dialect: Dialect, body: Record<string, unknown>): string {
  if (dialect === 'chat') {
    const choices = Array.isArray(body.choices) ? (body.choices as Array<{ message?: { content?: unknown } }>) : [];
    return choices.map((c) => (typeof c.message?.content === 'string' ? c.message.content : '')).join('\n');
  }
  if (dialect === 'messages') {
    const content = Array.isArray(body.content) ? (body.content as Array<{ type?: unknown; text?: unknown }>) : [];
    return content.map((c) => (c.type === 'text' && typeof c.text === 'string' ? c.text : '')).join('');
  }
  const output = Array.isArray(body.output) ? (body.output as Array<{ content?: unknown }>) : [];
  return output
    .flatMap((item) => (Array.isArray(item.content) ? (item.content as Array<{ type?: unknown; text?: unknown }>) : []))
    .map((c) => (c.type === 'output_text' && typeof c.text === 'string' ? c.text : ''))
    .join('');
}

const count = (value: unknown): number => (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : 0);

/**
 * A usage object in the dialect's shape. Anthropic's cache writes and reads are input tokens too;
 * they are counted at the input price (an upper bound: providers bill cache reads for less).
 */
function usageOf(dialect: Dialect, raw: unknown): Usage | undefined {
  if (!raw || typeof raw !== 'object') return undefined;
  const u = raw as Record<string, unknown>;
  if (dialect === 'chat') {
    if (typeof u.prompt_tokens !== 'number' && typeof u.completion_tokens !== 'number') return undefined;
    return { inputTokens: count(u.prompt_tokens), outputTokens: count(u.completion_tokens) };
  }
  if (typeof u.input_tokens !== 'number' && typeof u.output_tokens !== 'number') return undefined;
  const cached = dialect === 'messages' ? count(u.cache_creation_input_tokens) + count(u.cache_read_input_tokens) : 0;
  return { inputTokens: count(u.input_tokens) + cached, outputTokens: count(u.output_tokens) };
}

/** One server-sent event as it arrived (`raw` includes its blank-line terminator). */
export interface SseEvent {
  readonly event?: string;
  readonly data: string;
  readonly raw: string;
}

/** Splits a byte stream into server-sent events; a partial event waits for the rest. */
export class SseSplitter {
  private pending = '';
  private readonly decoder = new TextDecoder();

  push(chunk: Uint8Array): SseEvent[] {
    this.pending += this.decoder.decode(chunk, { stream: true });
    const events: SseEvent[] = [];
    for (;;) {
      const end = /\r?\n\r?\n/.exec(this.pending);
      if (!end) break;
      const raw = this.pending.slice(0, end.index + end[0].length);
      this.pending = this.pending.slice(end.index + end[0].length);
      events.push(parseEvent(raw));
    }
    return events;
  }

  /** What arrived after the last complete event (a stream cut halfway). */
  rest(): string {
    return this.pending + this.decoder.decode();
  }
}

function parseEvent(raw: string): SseEvent {
  let event: string | undefined;
  const data: string[] = [];
  for (const line of raw.split(/\r?\n/)) {
    if (line.startsWith('event:')) event = line.slice(6).trim();
    else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
  }
  return { event, data: data.join('\n'), raw };
}

/**
 * Follows a streamed answer event by event: the usage it reports (Chat: a final chunk; Responses:
 * `response.completed`; Messages: input at `message_start`, output at each `message_delta`), the
 * text it streams, and whether it ended properly.
 */
export class SseUsageReader {
  private inputTokens?: number;
  private outputTokens?: number;
  model?: string;
  /** The streamed text so far (answer text only: no tool arguments). */
  text = '';
  /** The stream reached its terminal event. */
  finished = false;

  constructor(
    private readonly dialect: Dialect,
    /** Whether the client asked for Chat's usage chunk itself. */
    private readonly usageAsked = true,
  ) {}

  /** Reads one event; false when the event must not reach the client (a usage chunk it did not ask for). */
  read(event: SseEvent): boolean {
    if (event.data === '[DONE]') {
      this.finished = true;
      return true;
    }
    let data: Record<string, unknown>;
    try {
      data = JSON.parse(event.data) as Record<string, unknown>;
    } catch {
      return true;
    }
    if (!data || typeof data !== 'object') return true;
    if (this.dialect === 'chat') return this.readChat(data);
    if (this.dialect === 'responses') this.readResponses(data);
    else this.readMessages(data);
    return true;
  }

  private readChat(data: Record<string, unknown>): boolean {
    if (typeof data.model === 'string') this.model ??= data.model;
    const choices = Array.isArray(data.choices) ? (data.choices as Array<{ delta?: { content?: unknown } }>) : [];
    for (const choice of choices) if (typeof choice.delta?.content === 'string') this.text += choice.delta.content;
    const usage = usageOf('chat', data.usage);
    if (usage) {
      this.inputTokens = usage.inputTokens;
      this.outputTokens = usage.outputTokens;
      if (choices.length === 0 && !this.usageAsked) return false;
    }
    return true;
  }

  private readResponses(data: Record<string, unknown>): void {
    if (data.type === 'response.output_text.delta' && typeof data.delta === 'string') this.text += data.delta;
    const response = data.response as Record<string, unknown> | undefined;
    if (response && typeof response.model === 'string') this.model ??= response.model;
    if (data.type === 'response.completed' || data.type === 'response.incomplete' || data.type === 'response.failed') {
      this.finished = true;
      const usage = usageOf('responses', response?.usage);
      if (usage) ({ inputTokens: this.inputTokens, outputTokens: this.outputTokens } = usage);
    }
  }

  private readMessages(data: Record<string, unknown>): void {
    if (data.type === 'message_start') {
      const message = data.message as Record<string, unknown> | undefined;
      if (typeof message?.model === 'string') this.model ??= message.model;
      const usage = usageOf('messages', message?.usage);
      if (usage) ({ inputTokens: this.inputTokens, outputTokens: this.outputTokens } = usage);
    } else if (data.type === 'content_block_delta') {
      const delta = data.delta as { type?: unknown; text?: unknown } | undefined;
      if (delta?.type === 'text_delta' && typeof delta.text === 'string') this.text += delta.text;
    } else if (data.type === 'message_delta') {
      // Cumulative counts; newer versions repeat the input count here too.
      const usage = data.usage as Record<string, unknown> | undefined;
      if (typeof usage?.output_tokens === 'number') this.outputTokens = count(usage.output_tokens);
      if (typeof usage?.input_tokens === 'number') this.inputTokens = usageOf('messages', usage)?.inputTokens;
    } else if (data.type === 'message_stop') {
      this.finished = true;
    }
  }

  /** The usage reported so far: whole once the stream finished, partial (or none) when it was cut. */
  usage(): { readonly input?: number; readonly output?: number } {
    return { input: this.inputTokens, output: this.outputTokens };
  }
}

/** Why the gateway refused a call, in the terms each provider's clients understand. */
export type RefusalKind = 'unknown-key' | 'budget' | 'rate' | 'model' | 'too-large' | 'breaker' | 'bad-request' | 'not-found' | 'upstream' | 'halted';

const STATUS: Record<RefusalKind, number> = {
  'unknown-key': 401,
  budget: 402,
  rate: 429,
  model: 403,
  'too-large': 413,
  breaker: 503,
  'bad-request': 400,
  'not-found': 404,
  upstream: 502,
  halted: 403,
};

const OPENAI_TYPE: Record<RefusalKind, string> = {
  'unknown-key': 'invalid_api_key',
  budget: 'insufficient_quota',
  rate: 'rate_limit_exceeded',
  model: 'model_not_allowed',
  'too-large': 'request_too_large',
  breaker: 'service_unavailable',
  'bad-request': 'invalid_request_error',
  'not-found': 'not_found',
  upstream: 'upstream_error',
  halted: 'stage_halted',
};

const ANTHROPIC_TYPE: Record<RefusalKind, string> = {
  'unknown-key': 'authentication_error',
  budget: 'billing_error',
  rate: 'rate_limit_error',
  model: 'permission_error',
  'too-large': 'request_too_large',
  breaker: 'overloaded_error',
  'bad-request': 'invalid_request_error',
  'not-found': 'not_found_error',
  upstream: 'api_error',
  halted: 'permission_error',
};

export function statusOf(kind: RefusalKind): number {
  return STATUS[kind];
}

/** An error body in the provider's own shape, so its CLI prints the message and stops. */
export function errorBody(family: 'openai' | 'anthropic', kind: RefusalKind, message: string): string {
  const text = `Warden gateway: ${message}`;
  if (family === 'anthropic') return JSON.stringify({ type: 'error', error: { type: ANTHROPIC_TYPE[kind], message: text } });
  return JSON.stringify({ error: { message: text, type: OPENAI_TYPE[kind], param: null, code: OPENAI_TYPE[kind] } });
}

/**
 * The error event that ends a stream the gateway stops mid-way (screened, or cut upstream), in
 * the dialect's own shape, so the client reports it rather than taking a partial answer as whole.
 */
export function errorEvent(dialect: Dialect, kind: RefusalKind, message: string): string {
  const text = `Warden gateway: ${message}`;
  if (dialect === 'messages') return `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: ANTHROPIC_TYPE[kind], message: text } })}\n\n`;
  if (dialect === 'responses') {
    return `event: response.failed\ndata: ${JSON.stringify({ type: 'response.failed', response: { status: 'failed', error: { code: OPENAI_TYPE[kind], message: text } } })}\n\n`;
  }
  return `data: ${JSON.stringify({ error: { message: text, type: OPENAI_TYPE[kind], param: null, code: OPENAI_TYPE[kind] } })}\n\n`;
}
