import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local HTTP server that speaks the Anthropic Messages, OpenAI Chat Completions and OpenAI
 * Responses wire formats, whole or streamed (SSE) as the request asks, for tests: no paid API is
 * reachable here. Each request is recorded; what it answers
 * is decided by `respond`, which may return a text (wrapped in the provider's response shape),
 * or a raw reply (status, headers, body) to play 429s, 500s, bad JSON, wrong models, slowness.
 */

export interface RecordedRequest {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: { model?: string; max_tokens?: number; stream?: boolean; messages?: Array<{ role: string; content: unknown }> } & Record<string, unknown>;
  /** The user message: the prompt. */
  readonly prompt: string;
}

export type Reply =
  | { readonly text: string; readonly model?: string; readonly usage?: { input: number; output: number }; readonly cutAfterEvents?: number }
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
      const prompt = promptOf(body);
      const recorded: RecordedRequest = { path: req.url ?? '', headers: req.headers, body, prompt };
      requests.push(recorded);
      const reply = state.respond(recorded, requests.length - 1);
      const send = (): void => {
        if (res.destroyed) return;
        if ('raw' in reply) {
          res.writeHead(reply.raw.status, { 'content-type': 'application/json', ...reply.raw.headers });
          res.end(reply.raw.body);
          return;
        }
        const model = reply.model ?? body.model ?? 'unknown';
        const usage = 'usage' in reply && reply.usage ? reply.usage : { input: 1000, output: 200 };
        const dialect = dialectOfPath(recorded.path);
        if (body.stream === true) {
          const events = streamedAnswer(dialect, model, reply.text, usage, body);
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
        res.end(JSON.stringify(wholeAnswer(dialect, model, reply.text, usage)));
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

/** The stage a Warden prompt is for ("# Warden: impl (attempt 2)" → impl). */
export function stageOf(prompt: string): string {
  return /^# Warden: ([a-z]+)/.exec(prompt)?.[1] ?? '';
}

type Dialect = 'chat' | 'responses' | 'messages';
type TokenCounts = { readonly input: number; readonly output: number };

function dialectOfPath(path: string): Dialect {
  if (path.startsWith('/v1/messages') || path.startsWith('/messages')) return 'messages';
  if (path.startsWith('/v1/responses') || path.startsWith('/responses')) return 'responses';
  return 'chat';
}

function wholeAnswer(dialect: Dialect, model: string, text: string, usage: TokenCounts): unknown {
  if (dialect === 'messages') {
    return { id: 'msg_test', type: 'message', role: 'assistant', model, content: [{ type: 'text', text }], stop_reason: 'end_turn', usage: { input_tokens: usage.input, output_tokens: usage.output } };
  }
  if (dialect === 'responses') return responseObject(model, text, usage);
  return {
    id: 'chatcmpl-test',
    object: 'chat.completion',
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
    usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output },
  };
}

function responseObject(model: string, text: string, usage: TokenCounts): unknown {
  return {
    id: 'resp_test',
    object: 'response',
    status: 'completed',
    model,
    output: [{ type: 'message', id: 'msg_test', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] }],
    usage: { input_tokens: usage.input, output_tokens: usage.output, total_tokens: usage.input + usage.output },
  };
}

/** The text in a few pieces, as a model streams it. */
function piecesOf(text: string): string[] {
  const pieces = text.match(/[\s\S]{1,16}/g) ?? [];
  return pieces.length > 0 ? pieces : [''];
}

/** A streamed answer as its server-sent events, each with its blank line. */
function streamedAnswer(dialect: Dialect, model: string, text: string, usage: TokenCounts, body: Record<string, unknown>): string[] {
  const sse = (data: unknown, event?: string): string => `${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(data)}\n\n`;
  if (dialect === 'messages') {
    return [
      sse({ type: 'message_start', message: { id: 'msg_test', type: 'message', role: 'assistant', model, content: [], stop_reason: null, usage: { input_tokens: usage.input, output_tokens: 1 } } }, 'message_start'),
      sse({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }, 'content_block_start'),
      ...piecesOf(text).map((piece) => sse({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: piece } }, 'content_block_delta')),
      sse({ type: 'content_block_stop', index: 0 }, 'content_block_stop'),
      sse({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: usage.output } }, 'message_delta'),
      sse({ type: 'message_stop' }, 'message_stop'),
    ];
  }
  if (dialect === 'responses') {
    const item = { type: 'message', id: 'msg_test', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] };
    return [
      sse({ type: 'response.created', response: { id: 'resp_test', object: 'response', status: 'in_progress', model, output: [] } }, 'response.created'),
      sse({ type: 'response.output_item.added', output_index: 0, item: { ...item, status: 'in_progress', content: [] } }, 'response.output_item.added'),
      ...piecesOf(text).map((piece) => sse({ type: 'response.output_text.delta', output_index: 0, content_index: 0, delta: piece }, 'response.output_text.delta')),
      sse({ type: 'response.output_item.done', output_index: 0, item }, 'response.output_item.done'),
      sse({ type: 'response.completed', response: responseObject(model, text, usage) }, 'response.completed'),
    ];
  }
  const chunk = (delta: unknown, finish: string | null) => ({ id: 'chatcmpl-test', object: 'chat.completion.chunk', model, choices: [{ index: 0, delta, finish_reason: finish }] });
  const withUsage = (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
  return [
    sse(chunk({ role: 'assistant', content: '' }, null)),
    ...piecesOf(text).map((piece) => sse(chunk({ content: piece }, null))),
    sse(chunk({}, 'stop')),
    ...(withUsage ? [sse({ id: 'chatcmpl-test', object: 'chat.completion.chunk', model, choices: [], usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output } })] : []),
    'data: [DONE]\n\n',
  ];
}

/** The first user message's text, whichever API the body is in. */
function promptOf(body: Record<string, unknown>): string {
  const textOf = (content: unknown): string =>
    typeof content === 'string'
      ? content
      : Array.isArray(content)
        ? content.map((part: { text?: unknown }) => (typeof part?.text === 'string' ? part.text : '')).join('')
        : '';
  if (typeof body.input === 'string') return body.input;
  const list = (Array.isArray(body.messages) ? body.messages : Array.isArray(body.input) ? body.input : []) as Array<{ role?: string; content?: unknown }>;
  return textOf(list.find((m) => m.role === 'user')?.content);
}
