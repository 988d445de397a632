import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local HTTP server that speaks the Anthropic Messages and OpenAI Chat Completions wire
 * formats, for tests: no paid API is reachable here. Each request is recorded; what it answers
 * is decided by `respond`, which may return a text (wrapped in the provider's response shape),
 * or a raw reply (status, headers, body) to play 429s, 500s, bad JSON, wrong models, slowness.
 */

export interface RecordedRequest {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: { model?: string; max_tokens?: number; messages?: Array<{ role: string; content: string }> } & Record<string, unknown>;
  /** The user message: the prompt. */
  readonly prompt: string;
}

export type Reply =
  | { readonly text: string; readonly model?: string; readonly usage?: { input: number; output: number } }
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
      const prompt = body.messages?.find((m) => m.role === 'user')?.content ?? '';
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
        const anthropic = recorded.path.startsWith('/v1/messages');
        const payload = anthropic
          ? { id: 'msg_test', type: 'message', role: 'assistant', model, content: [{ type: 'text', text: reply.text }], stop_reason: 'end_turn', usage: { input_tokens: usage.input, output_tokens: usage.output } }
          : {
              id: 'chatcmpl-test',
              object: 'chat.completion',
              model,
              choices: [{ index: 0, message: { role: 'assistant', content: reply.text }, finish_reason: 'stop' }],
              usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output },
            };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(payload));
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
