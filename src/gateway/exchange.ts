/**
 * What the gateway keeps of one model call for a later replay: the request as the agent sent it
 * and the answer as the agent got it (a stream as its events), both redacted, and a key that
 * finds the recorded call for a replayed request.
 */
import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { RecordedAnswer } from '../ledger/exchange-store';
import { SseSplitter } from './wire';

/**
 * Top-level request fields that change from run to run of the same agent on the same task, left
 * out of the matching key: Claude Code's `metadata.user_id` (a device and session id), Codex's
 * `client_metadata` (its turn ids), the Responses API's `prompt_cache_key` and
 * `safety_identifier`, and OpenAI's end-user `user`.
 */
const VOLATILE_FIELDS = ['metadata', 'client_metadata', 'prompt_cache_key', 'safety_identifier', 'user'] as const;

/** JSON with every object's keys sorted: the same request written in another key order is the same text. */
export function sortedJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(sortedJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${sortedJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * The matching key of a request body: sha256 of its JSON with keys sorted and the volatile
 * fields left out; undefined when the body is not a JSON object.
 */
export function requestKeyOf(body: string): string | undefined {
  const kept = normalisedRequest(body);
  return kept && createHash('sha256').update(sortedJson(kept)).digest('hex');
}

/** A request body as its matching key sees it: the JSON object without the volatile fields; undefined when not one. */
export function normalisedRequest(body: string): Record<string, unknown> | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return undefined;
  const kept: Record<string, unknown> = { ...(parsed as Record<string, unknown>) };
  for (const field of VOLATILE_FIELDS) delete kept[field];
  return kept;
}

/**
 * Keeps what is written to the agent's response, in memory until the call ends (no database
 * work per chunk): `answer` is it redacted as a whole (a secret split across two chunks is
 * caught too), a stream split into its events.
 */
export class AnswerCapture {
  private readonly chunks: string[] = [];
  /** The content type the answer went out with (given to writeHead, which getHeader does not see). */
  private contentType?: string;

  constructor(res: ServerResponse) {
    const writeHead = res.writeHead.bind(res) as (...args: unknown[]) => ServerResponse;
    res.writeHead = ((...args: unknown[]) => {
      const headers = args.find((arg, i) => i > 0 && arg && typeof arg === 'object' && !Array.isArray(arg)) as Record<string, unknown> | undefined;
      const type = headers?.['content-type'];
      if (typeof type === 'string') this.contentType = type;
      return writeHead(...args);
    }) as ServerResponse['writeHead'];
    const write = res.write.bind(res) as (...args: unknown[]) => boolean;
    const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse;
    const keep = (chunk: unknown): void => {
      if (typeof chunk === 'string') this.chunks.push(chunk);
      else if (chunk instanceof Uint8Array) this.chunks.push(Buffer.from(chunk).toString('utf8'));
    };
    res.write = ((...args: unknown[]) => {
      keep(args[0]);
      return write(...args);
    }) as ServerResponse['write'];
    res.end = ((...args: unknown[]) => {
      if (typeof args[0] !== 'function') keep(args[0]);
      return end(...args);
    }) as ServerResponse['end'];
  }

  answer(redact: (text: string) => string): RecordedAnswer {
    const text = redact(this.chunks.join(''));
    if (!this.contentType?.includes('text/event-stream')) return { kind: 'whole', text };
    const splitter = new SseSplitter();
    const events = splitter.push(Buffer.from(text)).map((event) => event.raw);
    const rest = splitter.rest();
    return { kind: 'events', events: rest ? [...events, rest] : events };
  }
}
