import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request a receiver took. */
export interface Received {
  readonly path: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
  readonly json: Record<string, unknown>;
}

/** How a path answers: 200, a status, or never (the connection is held open). */
export type Answer = number | 'hang';

/**
 * A local endpoint for notifications: records every request and answers each path as told
 * (default 200), so a test sees exactly what a webhook or Slack would have received.
 */
export async function startReceiver(answers: Readonly<Record<string, Answer>> = {}): Promise<{ url: (path: string) => string; received: Received[]; on: (path: string) => Received[]; close: () => Promise<void> }> {
  const received: Received[] = [];
  const held: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: Record<string, unknown> = {};
      try {
        json = JSON.parse(body) as Record<string, unknown>;
      } catch {
        // recorded as text
      }
      const path = req.url ?? '/';
      received.push({ path, headers: req.headers, body, json });
      const answer = answers[path] ?? 200;
      if (answer === 'hang') return void held.push(res);
      res.writeHead(answer, { 'content-type': 'text/plain' }).end(answer === 200 ? 'ok' : `status ${answer}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (path) => `http://127.0.0.1:${port}${path}`,
    received,
    on: (path) => received.filter((r) => r.path === path),
    close: async () => {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
