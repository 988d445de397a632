import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startDevServer, type DevServer } from '../../src/runtime/dev-server';
import { findFreePort } from '../../src/shared/ports';
import { freshDatabase, type FreshDatabase } from '../helpers/database';
import { DEMO_SCRIPT, makeSampleRepo, testDatabaseUrl, waitFor } from '../helpers/env';

/**
 * A `warden worker` process serves Prometheus metrics — the SDK runtime's and Warden's own —
 * on the configured address, and exports OpenTelemetry spans to an OTLP/HTTP endpoint (here a
 * local receiver); WARDEN_TELEMETRY=0 turns both off. The test scrapes and receives.
 */

const BIN = path.resolve(__dirname, '../../bin/warden.js');
let server: DevServer;
let database: FreshDatabase;
const workers: ChildProcess[] = [];
let env: NodeJS.ProcessEnv;
let port: number;
let otlp: { url: string; spans: string[]; close(): Promise<void> };

/** A local OTLP/HTTP receiver (JSON): keeps the name of every span it is sent. */
async function startOtlpReceiver(): Promise<typeof otlp> {
  const spans: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: Array<{ name: string }> }> }> };
        for (const r of body.resourceSpans ?? []) for (const s of r.scopeSpans ?? []) for (const span of s.spans ?? []) spans.push(span.name);
      } catch {
        spans.push('(unreadable export)');
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

beforeAll(async () => {
  // a server of its own: this worker polls the default task queue
  server = await startDevServer({ cliPath: process.env.WARDEN_TEST_CLI_PATH!, port: 0, uiPort: false });
  database = await freshDatabase(testDatabaseUrl());
  port = await findFreePort();
  otlp = await startOtlpReceiver();
  const home = mkdtempSync(path.join(tmpdir(), 'warden-metrics-'));
  const config = path.join(home, 'warden.config.json');
  // The server is this test's own, reached from here only: its unsigned decisions may count.
  writeFileSync(config, JSON.stringify({ limits: { cooldown: '0s' }, telemetry: { prometheus: `127.0.0.1:${port}`, otlpEndpoint: otlp.url }, unsignedDecisions: { accept: 'always' } }));
  env = { ...process.env, WARDEN_HOME: home, WARDEN_LOG_LEVEL: 'warn', WARDEN_CONFIG: config, TEMPORAL_ADDRESS: server.address, DATABASE_URL: database.url, USER: 'metrics-tester' };
});

afterAll(async () => {
  for (const w of workers) w.kill('SIGTERM');
  await Promise.all(workers.map((w) => new Promise((resolve) => (w.exitCode !== null ? resolve(undefined) : w.once('exit', resolve)))));
  await database?.drop();
  await server?.stop();
  await otlp?.close();
});

function startWorker(extraEnv: NodeJS.ProcessEnv = {}): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, [BIN, 'worker'], { env: { ...env, ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
  workers.push(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  return { child, output: () => out };
}

function warden(...args: string[]) {
  const result = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8', timeout: 60_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

async function scrape(at: number): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${at}/metrics`);
  return response.text();
}

test('the worker serves the SDK metrics and Warden\'s own, and exports spans; they follow a merged intent', async () => {
  const worker = startWorker();
  await waitFor(() => (worker.output().includes('worker running') ? true : undefined), 120_000, 'the worker');
  const repo = makeSampleRepo();
  const id = `metrics-${Date.now()}`;
  expect(warden('run', '--repo', repo, '--goal', 'Add slugify', '--id', id, '--script', DEMO_SCRIPT, '--detach').code).toBe(0);
  await waitFor(() => (JSON.parse(warden('gates', id, '--json').stdout || 'null') ? true : undefined), 120_000, 'the merge gate');
  expect(warden('approve', id).code).toBe(0);
  await waitFor(() => ((JSON.parse(warden('status', id, '--json').stdout) as { wardenStatus?: string }).wardenStatus === 'merged' ? true : undefined), 120_000, 'the merge');

  const text = await waitFor(async () => {
    const body = await scrape(port);
    return /warden_intents_finished\{[^}]*status="merged"[^}]*\} 1/.test(body) ? body : undefined;
  }, 120_000, 'the finished intent in the metrics');
  expect(text).toMatch(/warden_intents_started(_total)?(\{[^}]*\})? 1/);
  expect(text).toMatch(/warden_gate_decisions(_total)?\{[^}]*decision="approve"[^}]*gate="merge"[^}]*\} 1/);
  expect(text).toMatch(/warden_spend_usd_micros(_total)?\{[^}]*model="scripted-demo"[^}]*\} 51000/);
  expect(text).toMatch(/warden_gates_waiting(\{[^}]*\})? 0/);
  expect(text).toMatch(/^temporal_\w+/m); // the SDK's own

  // client, workflow and activity spans reached the OTLP endpoint
  await waitFor(() => (otlp.spans.some((s) => s.startsWith('RunActivity:runAgentStage')) && otlp.spans.some((s) => s.startsWith('RunWorkflow:intentWorkflow')) ? true : undefined), 120_000, 'the spans').catch((error: Error) => {
    // Which ones came says where the others were lost.
    throw new Error(`${error.message}; the endpoint got ${otlp.spans.length}: ${[...new Set(otlp.spans)].join(', ')}\nthe worker's output ends:\n${worker.output().slice(-2000)}`);
  });
  expect(otlp.spans).toEqual(expect.arrayContaining(['StartWorkflow:intentWorkflow']));
});

test('WARDEN_TELEMETRY=0 serves and exports nothing, whatever the config says', async () => {
  const off = await findFreePort();
  const receiver = await startOtlpReceiver();
  try {
    const config = path.join(mkdtempSync(path.join(tmpdir(), 'warden-metrics-off-')), 'warden.config.json');
    // The same unsigned decisions as the client's config: the worker refuses an intent that takes more than its own config does.
    writeFileSync(config, JSON.stringify({ limits: { cooldown: '0s' }, telemetry: { prometheus: `127.0.0.1:${off}`, otlpEndpoint: receiver.url }, unsignedDecisions: { accept: 'always' } }));
    for (const w of workers) w.kill('SIGTERM'); // only the silent worker takes this intent
    const worker = startWorker({ WARDEN_TELEMETRY: '0', WARDEN_CONFIG: config });
    await waitFor(() => (worker.output().includes('worker running') ? true : undefined), 120_000, 'the worker');
    await expect(scrape(off)).rejects.toThrow();
    const id = `metrics-off-${Date.now()}`;
    expect(warden('run', '--repo', makeSampleRepo(), '--goal', 'Add slugify', '--id', id, '--script', DEMO_SCRIPT, '--detach').code).toBe(0);
    await waitFor(() => (JSON.parse(warden('gates', id, '--json').stdout || 'null') ? true : undefined), 120_000, 'the merge gate');
    expect(receiver.spans).toEqual([]);
    warden('reject', id, '--reason', 'done');
  } finally {
    await receiver.close();
  }
});
