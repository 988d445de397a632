import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';

/**
 * A forge that answers from recorded request/response pairs in their wire format (no hosted forge
 * is reachable from the tests). The pairs are served in order: each request must match the next
 * pair's method, path and query, every body field the pair names, and the headers it names plus
 * the ones every request must carry (the token). A request that does not match is answered 599
 * and noted; `assertDone()` then fails the test with it, and with any pair never requested.
 *
 * In fixtures, `{base}` in a response header stands for the replay server's address plus its
 * path prefix (for `Link` headers, which carry absolute addresses).
 */

export interface RecordedPair {
  readonly request: { readonly method: string; readonly path: string; readonly headers?: Readonly<Record<string, string>>; readonly body?: Readonly<Record<string, unknown>> };
  readonly response: { readonly status: number; readonly headers?: Readonly<Record<string, string>>; readonly body?: unknown };
}

export interface Replay {
  /** The server's address, e.g. `http://127.0.0.1:41234`. */
  readonly url: string;
  /** Throws if a request did not match its pair or a pair was never requested. */
  assertDone(): void;
  close(): Promise<void>;
}

const FIXTURES = join(__dirname, '..', 'fixtures', 'forge');

/** The pairs in `test/fixtures/forge/<name>.json`. */
export function loadPairs(name: string): RecordedPair[] {
  return JSON.parse(readFileSync(join(FIXTURES, `${name}.json`), 'utf8')) as RecordedPair[];
}

export async function startReplay(
  pairs: readonly RecordedPair[],
  options: {
    /** Where the API lives under the server, stripped before matching (`/api/v3`, `/api/v4`). */
    readonly prefix?: string;
    /** Headers every request must carry, e.g. the token's. */
    readonly headers?: Readonly<Record<string, string>>;
  } = {},
): Promise<Replay> {
  const prefix = options.prefix ?? '';
  const problems: string[] = [];
  let next = 0;
  let base = '';
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const pair = pairs[next];
      const mismatch = pair === undefined ? 'no pair left to answer it' : whyNot(pair, req.method ?? '', stripPrefix(req.url ?? '/', prefix), req.headers, raw, options.headers ?? {});
      if (pair === undefined || mismatch !== undefined) {
        problems.push(`request ${req.method} ${req.url} (${raw === '' ? 'no body' : raw}): ${mismatch}`);
        res.writeHead(599, { 'content-type': 'application/json' }).end(JSON.stringify({ message: `replay: ${mismatch}` }));
        return;
      }
      next += 1;
      const headers: Record<string, string> = { 'content-type': 'application/json; charset=utf-8' };
      for (const [name, value] of Object.entries(pair.response.headers ?? {})) headers[name] = value.replaceAll('{base}', base);
      res.writeHead(pair.response.status, headers).end(pair.response.body === undefined ? '' : JSON.stringify(pair.response.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  base = `${url}${prefix}`;
  return {
    url,
    assertDone() {
      const unused = pairs.slice(next).map((pair) => `never requested: ${pair.request.method} ${pair.request.path}`);
      if (problems.length + unused.length > 0) throw new Error(`the forge replay did not go as recorded:\n${[...problems, ...unused].join('\n')}`);
    },
    close: () => new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve()))),
  };
}

function stripPrefix(url: string, prefix: string): string | undefined {
  if (prefix === '') return url;
  return url.startsWith(`${prefix}/`) ? url.slice(prefix.length) : undefined;
}

/** Why a request is not the one `pair` recorded (undefined when it is). */
function whyNot(pair: RecordedPair, method: string, url: string | undefined, headers: IncomingHttpHeaders, raw: string, always: Readonly<Record<string, string>>): string | undefined {
  const expected = pair.request;
  if (url === undefined) return `not under the API's prefix; expected ${expected.method} ${expected.path}`;
  if (method !== expected.method) return `expected ${expected.method} ${expected.path}`;
  // The path as sent (percent-escapes kept: GitLab's project id is `group%2Fname`); the query as a set.
  const [path, query = ''] = url.split('?', 2) as [string, string?];
  const [expectedPath, expectedQuery = ''] = expected.path.split('?', 2) as [string, string?];
  if (path !== expectedPath) return `expected ${expected.method} ${expected.path}`;
  const sorted = (search: string): string[] => [...new URLSearchParams(search).entries()].map(([name, value]) => `${name}=${value}`).sort();
  if (!isDeepStrictEqual(sorted(query), sorted(expectedQuery))) return `expected the query ${expectedQuery === '' ? '(none)' : expectedQuery}`;
  for (const [name, value] of Object.entries({ ...always, ...(expected.headers ?? {}) })) {
    if (headers[name.toLowerCase()] !== value) return `expected the header ${name}: ${value}, got ${String(headers[name.toLowerCase()])}`;
  }
  if (expected.body !== undefined) {
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch {
      return 'expected a JSON body';
    }
    for (const [field, value] of Object.entries(expected.body)) {
      const sent = (body as Record<string, unknown> | null)?.[field];
      if (!isDeepStrictEqual(sent, value)) return `expected the body field ${field} = ${JSON.stringify(value)}, got ${JSON.stringify(sent)}`;
    }
  }
  return undefined;
}
