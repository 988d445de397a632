/**
 * What the call-pattern rules (call-patterns.ts) see of a call: a request, an answer (whole or
 * streamed) and an error, each reduced to hashes of what they say. Ids, timestamps, stream flags
 * and cache markers are left out, so two calls that say the same thing hash the same.
 */
import { createHash } from 'node:crypto';
import type { AnswerShape, ErrorShape, RequestShape } from './call-patterns';
import type { Dialect, SseEvent } from './wire';

/** Keys whose values change between two calls that say the same thing. */
const VOLATILE = new Set(['id', 'call_id', 'tool_call_id', 'tool_use_id', 'cache_control', 'timestamp', 'created', 'created_at', 'status', 'stream', 'stream_options']);
/** Keys whose values are a tool's arguments or schema: kept whole, an `id` there means something. */
const VERBATIM = new Set(['input', 'arguments', 'input_schema', 'parameters', 'schema']);

/** JSON with sorted keys and, outside tool arguments and schemas, the volatile ones left out. */
function canonical(value: unknown): string {
  return JSON.stringify(sorted(value, true));
}

function sorted(value: unknown, dropVolatile: boolean): unknown {
  if (Array.isArray(value)) return value.map((v) => sorted(v, dropVolatile));
  if (!value || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    if (dropVolatile && VOLATILE.has(key)) continue;
    out[key] = sorted((value as Record<string, unknown>)[key], dropVolatile && !VERBATIM.has(key));
  }
  return out;
}

function hash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 32);
}

/** The system prompt wherever the dialect keeps it: Anthropic `system`, Responses `instructions`, Chat's system messages. */
function systemOf(dialect: Dialect, body: Record<string, unknown>): unknown {
  if (dialect === 'messages') return body.system;
  if (dialect === 'responses') return body.instructions;
  const list = Array.isArray(body.messages) ? (body.messages as Array<{ role?: unknown }>) : [];
  return list.filter((m) => m?.role === 'system' || m?.role === 'developer');
}

/** The request a call made, as the rules see it. */
export function requestShape(dialect: Dialect, body: Record<string, unknown>): RequestShape {
  const conversation = dialect === 'responses' ? body.input : body.messages;
  const tools = body.tools ?? body.functions;
  const thread = hash(canonical([body.model, systemOf(dialect, body), tools]));
  return {
    hash: hash(canonical([body.model, body.system, body.instructions, conversation, tools, body.tool_choice, body.previous_response_id])),
    thread,
    offersTools: Array.isArray(tools) && tools.length > 0,
    turns: Array.isArray(conversation) ? conversation.length : conversation === undefined ? 0 : 1,
  };
}

/** A tool call as the answer hash takes it: its name and its arguments, parsed when they are JSON. */
interface Call {
  readonly name: string;
  args: string;
}

function shapeOf(text: string, calls: readonly Call[], inputTokens: number | undefined): AnswerShape {
  const args = calls.map((c) => ({ name: c.name, args: parsedOr(c.args) }));
  return { hash: hash(JSON.stringify(sorted({ text, calls: args }, false))), toolCalls: calls.length, ...(inputTokens === undefined ? {} : { inputTokens }) };
}

function parsedOr(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

const list = (value: unknown): Array<Record<string, unknown>> => (Array.isArray(value) ? value.filter((v): v is Record<string, unknown> => typeof v === 'object' && v !== null) : []);
const str = (value: unknown): string => (typeof value === 'string' ? value : '');
const json = (value: unknown): string => (typeof value === 'string' ? value : JSON.stringify(value ?? null));

/** A Responses output item: its text, or the tool call it is (function, custom, shell and the like). */
function responsesItem(item: Record<string, unknown>, into: { text: string; calls: Call[] }): void {
  const type = str(item.type);
  if (type === 'message') {
    for (const part of list(item.content)) into.text += str(part.text);
  } else if (type.endsWith('_call')) {
    into.calls.push({ name: str(item.name) || type, args: item.arguments !== undefined ? json(item.arguments) : item.input !== undefined ? json(item.input) : canonical(item) });
  }
}

/** A whole (non-streamed) answer as the rules see it; `inputTokens` is what its usage reported. */
export function wholeAnswerShape(dialect: Dialect, text: string, inputTokens: number | undefined): AnswerShape {
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return shapeOf(text, [], inputTokens);
  }
  const out = { text: '', calls: [] as Call[] };
  if (dialect === 'chat') {
    for (const choice of list(body?.choices)) {
      const message = (choice.message ?? {}) as Record<string, unknown>;
      out.text += str(message.content);
      for (const call of list(message.tool_calls)) {
        const fn = (call.function ?? {}) as Record<string, unknown>;
        out.calls.push({ name: str(fn.name), args: json(fn.arguments) });
      }
    }
  } else if (dialect === 'messages') {
    for (const block of list(body?.content)) {
      if (block.type === 'text') out.text += str(block.text);
      else if (str(block.type).endsWith('tool_use')) out.calls.push({ name: str(block.name), args: json(block.input) });
    }
  } else {
    for (const item of list(body?.output)) responsesItem(item, out);
  }
  return shapeOf(out.text, out.calls, inputTokens);
}

/**
 * Follows a streamed answer event by event for its text and tool calls: Chat `delta.content` and
 * `delta.tool_calls`, Messages text and `input_json_delta` blocks, Responses' finished output items.
 */
export class StreamedAnswerShape {
  private text = '';
  private readonly calls = new Map<number, Call>();

  constructor(private readonly dialect: Dialect) {}

  read(event: SseEvent): void {
    let data: Record<string, unknown>;
    try {
      data = JSON.parse(event.data) as Record<string, unknown>;
    } catch {
      return;
    }
    if (!data || typeof data !== 'object') return;
    if (this.dialect === 'chat') this.readChat(data);
    else if (this.dialect === 'messages') this.readMessages(data);
    else if (data.type === 'response.output_item.done' && data.item && typeof data.item === 'object') {
      const out = { text: '', calls: [] as Call[] };
      responsesItem(data.item as Record<string, unknown>, out);
      this.text += out.text;
      for (const call of out.calls) this.calls.set(this.calls.size, call);
    }
  }

  private readChat(data: Record<string, unknown>): void {
    for (const choice of list(data.choices)) {
      const delta = (choice.delta ?? {}) as Record<string, unknown>;
      this.text += str(delta.content);
      for (const part of list(delta.tool_calls)) {
        const index = typeof part.index === 'number' ? part.index : this.calls.size;
        const fn = (part.function ?? {}) as Record<string, unknown>;
        const call = this.calls.get(index) ?? { name: '', args: '' };
        this.calls.set(index, { name: call.name || str(fn.name), args: call.args + str(fn.arguments) });
      }
    }
  }

  private readMessages(data: Record<string, unknown>): void {
    const index = typeof data.index === 'number' ? data.index : -1;
    if (data.type === 'content_block_start') {
      const block = (data.content_block ?? {}) as Record<string, unknown>;
      if (str(block.type).endsWith('tool_use')) this.calls.set(index, { name: str(block.name), args: '' });
    } else if (data.type === 'content_block_delta') {
      const delta = (data.delta ?? {}) as Record<string, unknown>;
      if (delta.type === 'text_delta') this.text += str(delta.text);
      const call = this.calls.get(index);
      if (delta.type === 'input_json_delta' && call) call.args += str(delta.partial_json);
    }
  }

  /** The answer so far; `inputTokens` is what the stream's usage reported. */
  shape(inputTokens: number | undefined): AnswerShape {
    return shapeOf(this.text, [...this.calls.entries()].sort(([a], [b]) => a - b).map(([, call]) => call), inputTokens);
  }
}

/** An error answer as the rules see it: its status and message, request ids and hex runs masked. */
export function errorShape(status: number, body: string): ErrorShape {
  let message = body;
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } | string; message?: unknown };
    const error = parsed?.error;
    message = typeof error === 'string' ? error : typeof error?.message === 'string' ? error.message : typeof parsed?.message === 'string' ? parsed.message : body;
  } catch {
    // not JSON: the body is the message
  }
  const masked = message
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, '#')
    .replace(/\b(req|msg|resp|chatcmpl|call|toolu)_[A-Za-z0-9]+/g, '$1_#')
    .replace(/\b[0-9a-f]{16,}\b/gi, '#');
  return { status, message: masked.trim().slice(0, 500) };
}
