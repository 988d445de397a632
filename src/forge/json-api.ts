import type { z } from 'zod';
import { forTerminalLine } from '../shared/control-characters';
import { ForgeError, type ForgeErrorKind } from './forge-client';

/**
 * One forge's JSON REST API as the adapters call it: one request, its answer parsed against the
 * fields the adapter reads, and every failure turned into a ForgeError. The token travels in the
 * headers only, never in an error message, and never to another host (pagination links included).
 */

/** A bound on pages followed, so that a forge that links a page to itself cannot loop us. */
const MAX_PAGES = 50;
/** How long one request may take before it counts as unanswered. */
const REQUEST_TIMEOUT_MS = 30_000;
/** How much of a forge's error message is kept in ours. */
const MESSAGE_LIMIT = 300;

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH';

export interface CallOptions {
  readonly query?: Readonly<Record<string, string | number | boolean>>;
  readonly body?: unknown;
  /** A merge call: 422 then means "not now" (not-mergeable) rather than a malformed request. */
  readonly merge?: boolean;
}

export interface JsonReply<T> {
  readonly status: number;
  readonly headers: Headers;
  readonly body: T;
}

export class JsonApi {
  private readonly origin: string;

  constructor(
    /** The forge's name in error messages: `GitHub`, `GitLab`. */
    private readonly forgeName: string,
    /** The API's base address, e.g. `https://api.github.com` (no trailing slash). */
    readonly baseUrl: string,
    private readonly headers: Readonly<Record<string, string>>,
    private readonly fetchImpl: typeof fetch = fetch,
  ) {
    this.origin = new URL(baseUrl).origin;
  }

  /** One call; its JSON answer checked against `schema`. */
  async call<S extends z.ZodType>(method: Method, path: string, schema: S, options: CallOptions = {}): Promise<JsonReply<z.infer<S>>> {
    const reply = await this.send(method, this.url(path, options.query), path, options);
    return { ...reply, body: this.parse(method, path, schema, reply.body) };
  }

  /** A call whose answer Warden does not read (beyond its status). */
  async send(method: Method, url: string, path: string, options: CallOptions = {}): Promise<JsonReply<unknown>> {
    let response: Response;
    try {
      response = await this.fetchImpl(url, {
        method,
        headers: { ...this.headers, ...(options.body === undefined ? {} : { 'Content-Type': 'application/json' }) },
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
    } catch (error) {
      throw new ForgeError('unreachable', `${this.forgeName} ${method} ${path}: no answer (${reason(error)})`);
    }
    const text = await response.text().catch(() => '');
    let body: unknown;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch {
      body = undefined;
    }
    if (!response.ok) {
      const kind = errorKind(response.status, options.merge === true);
      throw new ForgeError(kind, `${this.forgeName} ${method} ${path} answered ${response.status}${describe(body)}`, response.status);
    }
    return { status: response.status, headers: response.headers, body };
  }

  /**
   * Every item of a list, page after page: each page's `Link: rel="next"` is followed (GitHub and
   * GitLab both send one), on the API's own origin only.
   */
  async list<S extends z.ZodType>(path: string, schema: S, options: { readonly query?: CallOptions['query']; readonly itemsIn?: string } = {}): Promise<Array<z.infer<S>>> {
    const all: Array<z.infer<S>> = [];
    let url: string | undefined = this.url(path, options.query);
    for (let page = 0; url !== undefined; page += 1) {
      if (page === MAX_PAGES) throw new ForgeError('server', `${this.forgeName} GET ${path}: more than ${MAX_PAGES} pages`);
      const reply = await this.send('GET', url, path);
      // Some lists come wrapped in an object (GitHub's check runs): `itemsIn` names the field.
      const items = options.itemsIn === undefined ? reply.body : (reply.body as Record<string, unknown> | undefined)?.[options.itemsIn];
      all.push(...this.parse('GET', path, schema.array(), items));
      url = this.nextPage(reply.headers.get('link'), path);
    }
    return all;
  }

  url(path: string, query: CallOptions['query'] = {}): string {
    const url = new URL(`${this.baseUrl}${path}`);
    for (const [name, value] of Object.entries(query)) url.searchParams.set(name, String(value));
    return url.toString();
  }

  private nextPage(link: string | null, path: string): string | undefined {
    const next = link?.split(',').find((part) => /;\s*rel="?next"?/.test(part));
    const target = next?.match(/<([^>]+)>/)?.[1];
    if (target === undefined) return undefined;
    let url: URL;
    try {
      url = new URL(target, this.baseUrl);
    } catch {
      throw new ForgeError('server', `${this.forgeName} GET ${path}: a next-page link that is not an address`);
    }
    // The token goes with every request: a link elsewhere would hand it to another host.
    if (url.origin !== this.origin) throw new ForgeError('server', `${this.forgeName} GET ${path}: the next page is on another host (${url.origin})`);
    return url.toString();
  }

  private parse<S extends z.ZodType>(method: Method, path: string, schema: S, body: unknown): z.infer<S> {
    const parsed = schema.safeParse(body);
    if (parsed.success) return parsed.data;
    const issue = parsed.error.issues[0];
    const where = issue === undefined || issue.path.length === 0 ? '' : ` at ${issue.path.join('.')}`;
    throw new ForgeError('server', `${this.forgeName} ${method} ${path} answered in an unexpected shape${where}: ${issue?.message ?? 'not JSON'}`);
  }
}

/** The ForgeError kind for an HTTP status (see ForgeErrorKind). */
export function errorKind(status: number, merge: boolean): ForgeErrorKind {
  if (status === 401) return 'unauthorized';
  if (status === 403) return 'forbidden';
  if (status === 404) return 'not-found';
  if (status === 409) return 'conflict';
  if (status === 405) return 'not-mergeable';
  if (status === 422) return merge ? 'not-mergeable' : 'invalid';
  if (status >= 500) return 'server';
  return 'invalid';
}

/** The forge's own words for an error (GitHub `message`, GitLab `message` or `error`), on one line. */
function describe(body: unknown): string {
  if (typeof body !== 'object' || body === null) return '';
  const record = body as Record<string, unknown>;
  const words = record.message ?? record.error;
  if (words === undefined) return '';
  const text = typeof words === 'string' ? words : JSON.stringify(words);
  const line = forTerminalLine(text);
  return `: ${line.length > MESSAGE_LIMIT ? `${line.slice(0, MESSAGE_LIMIT)}…` : line}`;
}

/** Why fetch got no answer: the system error under undici's `fetch failed`, where there is one. */
function reason(error: unknown): string {
  // Errors are read by shape: undici's may come from another realm, where instanceof fails.
  const { name, message, cause } = (typeof error === 'object' && error !== null ? error : {}) as { name?: unknown; message?: unknown; cause?: { code?: unknown; message?: unknown } };
  if (typeof cause?.code === 'string') return cause.code;
  if (typeof cause?.message === 'string') return cause.message;
  if (name === 'TimeoutError') return `no answer within ${REQUEST_TIMEOUT_MS / 1000} s`;
  return typeof message === 'string' ? message : String(error);
}
