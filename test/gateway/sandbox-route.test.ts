/**
 * The gateway as a sandboxed agent's only route: a command agent in the real bubblewrap, with
 * `network: 'gateway'`, reaches its model through the gateway's socket and nothing else — not
 * the Temporal frontend, not PostgreSQL, not a web server on the host's loopback, not the model
 * server itself. Judged by what the agent wrote and what the model server recorded.
 */
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import pino from 'pino';
import type { AgentRequest } from '../../src/activities/agents/agent';
import { createCommandAgent } from '../../src/activities/agents/command-agent';
import { ensureWorktree } from '../../src/activities/worktree';
import { createSampleRepo } from '../../src/client/sample-repo';
import { ModelGateway } from '../../src/gateway/gateway';
import { SpendMeter, type BudgetBook } from '../../src/gateway/spend-meter';
import { costOf, type PricingTable } from '../../src/safety/pricing';
import { CommandAgentProfileSchema, type CommandAgentProfile } from '../../src/shared/intent';
import { startModelServer, type ModelServer } from '../helpers/model-server';
import { useKeptCascadeModel } from '../helpers/kept-cascade-model';
import { describeWith } from '../setup/prerequisites';

const SCRATCH = path.resolve(__dirname, '../../.warden/test-gateway-route');
const UPSTREAM_KEY = 'sk-upstream-only-the-worker-has-it';
const pricing: PricingTable = { 'gpt-test': { inputUsdPerMillion: '3', outputUsdPerMillion: '15' } };

let root: string;
let worktree: string;
let upstream: ModelServer;
let gateway: ModelGateway;
let webServer: Server;

/** Tries each target, then makes one model call through the gateway; writes what happened to probe.json. */
const PROBE = `
const net = require('node:net');
const fs = require('node:fs');
const tryConnect = (host, port) => new Promise((resolve) => {
  const socket = net.connect({ host, port });
  const timer = setTimeout(() => { socket.destroy(); resolve('timeout'); }, 3000);
  // A tripwire of the sandbox's watcher takes the connection and resets it: only one that stays open reached something.
  socket.on('connect', () => { clearTimeout(timer); setTimeout(() => { socket.destroy(); resolve('connected'); }, 1000); });
  socket.on('error', (e) => { clearTimeout(timer); resolve(e.code || e.message); });
  socket.on('close', () => resolve('closed'));
});
(async () => {
  const results = { reached: {} };
  for (const [name, host, port] of JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))) results.reached[name] = await tryConnect(host, Number(port));
  try {
    const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
      method: 'POST',
      headers: { authorization: 'Bearer ' + process.env.OPENAI_API_KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-test', stream: true, messages: [{ role: 'user', content: 'write hello' }] }),
    });
    results.status = res.status;
    results.body = await res.text();
  } catch (e) { results.error = String(e); }
  results.baseUrl = process.env.OPENAI_BASE_URL;
  results.keys = [process.env.OPENAI_API_KEY, process.env.ANTHROPIC_API_KEY];
  fs.writeFileSync('probe.json', JSON.stringify(results));
})();
`;

function hostPort(url: string): [string, number] {
  const parsed = new URL(url.includes('://') ? url : `tcp://${url}`);
  return [parsed.hostname, Number(parsed.port)];
}

function profile(fields: Partial<CommandAgentProfile> = {}): CommandAgentProfile {
  return CommandAgentProfileSchema.parse({
    kind: 'command',
    // A hang guard, not a figure: the probe is done in seconds, more on a busy machine.
    timeout: '10m',
    sandbox: 'bubblewrap',
    promptVia: 'arg',
    command: 'node probe.cjs {promptFile}',
    upstream: { kind: 'openai', model: 'gpt-test', baseUrl: `${upstream.url}/v1`, maxTokens: 2000 },
    ...fields,
  });
}

function request(meter: SpendMeter, prompt: string, fields: Partial<AgentRequest> = {}): AgentRequest {
  return { intentId: 'routed', stage: 'impl', attempt: 1, prompt, worktreePath: worktree, signal: new AbortController().signal, heartbeat: () => undefined, meter, ...fields };
}

/** The prompt is the probe's list of targets. */
function probeCommand(targets: Array<[string, string, number]>): string {
  return JSON.stringify(targets);
}

useKeptCascadeModel();

describeWith('bubblewrap', 'a sandboxed agent with network gateway', () => {
  beforeAll(async () => {
    mkdirSync(SCRATCH, { recursive: true });
    root = mkdtempSync(path.join(SCRATCH, 'run-'));
    const repo = createSampleRepo(path.join(root, 'repo'));
    worktree = (await ensureWorktree({ repoPath: repo, baseBranch: 'main', intentId: 'routed', worktreeRoot: path.join(root, 'worktrees') })).worktreePath;
    writeFileSync(path.join(worktree, 'probe.cjs'), PROBE);
    upstream = await startModelServer(() => ({ text: 'hello from the model', usage: { input: 321, output: 45 } }));
    webServer = createServer((_req, res) => res.end('a web page on the host'));
    await new Promise<void>((resolve) => webServer.listen(0, '127.0.0.1', resolve));
    gateway = await ModelGateway.start({
      limits: {
        circuitBreaker: { failureRate: 0.5, minimumCalls: 5, consecutiveFailures: 5, window: '60s', halfOpenAfter: '30s', probes: 1, probeInterval: '1s' },
        rateLimits: { perAgent: { requestsPerMinute: 100, tokensPerMinute: 1_000_000 }, perModel: { requestsPerMinute: 100, tokensPerMinute: 1_000_000 } },
      },
      logger: pino({ level: 'silent' }),
      env: { OPENAI_API_KEY: UPSTREAM_KEY },
      haltGraceMs: 5_000,
    });
  });

  afterAll(async () => {
    await gateway?.close();
    await upstream?.close();
    await new Promise<void>((resolve) => (webServer ? webServer.close(() => resolve()) : resolve()));
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('reaches its model through the gateway and nothing else: not Temporal, PostgreSQL, a host web server, the model server or the gateway’s host port', async () => {
    const targets: Array<[string, string, number]> = [
      ['temporal', ...hostPort(process.env.TEMPORAL_ADDRESS!)],
      ['postgresql', ...hostPort(process.env.WARDEN_TEST_DATABASE_URL ?? process.env.WARDEN_TEST_EMBEDDED_DATABASE_URL!)],
      ['web server', ...hostPort(`http://127.0.0.1:${(webServer.address() as AddressInfo).port}`)],
      ['model server', ...hostPort(upstream.url)],
      ['gateway host port', ...hostPort(gateway.url)],
      ['outside address', '192.0.2.1', 443],
    ];
    // The same targets from the host: each is there, so a refusal inside is the sandbox's doing.
    const fromHost = await Promise.all(targets.slice(0, 5).map(([, host, port]) => connects(host, port)));
    expect(fromHost).toEqual([true, true, true, true, true]);

    const meter = new SpendMeter({ pricing, declaredCapUsd: '0.50' });
    upstream.requests.length = 0;
    const result = await createCommandAgent(profile(), { gateway }).run(request(meter, probeCommand(targets)));
    const probe = JSON.parse(readFileSync(path.join(worktree, 'probe.json'), 'utf8')) as { reached: Record<string, string>; status: number; body: string; baseUrl: string; keys: string[] };

    for (const [name] of targets) expect([name, probe.reached[name]]).not.toEqual([name, 'connected']);
    // Temporal's port is watched: the attempt is reported, with its port.
    expect(probe.reached.temporal).toBe('ECONNRESET');
    expect(result.attempts?.attempts).toContainEqual(expect.objectContaining({ kind: 'connect', port: hostPort(process.env.TEMPORAL_ADDRESS!)[1] }));
    expect(probe.status).toBe(200);
    expect(probe.body).toContain('hello');
    expect(probe.baseUrl).toBe('http://127.0.0.1:47100/v1');
    // The agent held a key of its own, never the upstream's; the upstream got the real one.
    expect(probe.keys[0]).toMatch(/^sk-warden-/);
    expect(probe.keys).not.toContain(UPSTREAM_KEY);
    expect(upstream.requests).toHaveLength(1);
    expect(upstream.requests[0]!.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    // Metered exactly, at the model's price.
    expect(result.usage).toEqual({ inputTokens: 321, outputTokens: 45 });
    expect(meter.totalUsd()).toBe(costOf('gpt-test', { inputTokens: 321, outputTokens: 45 }, pricing));
    // The key died with the attempt.
    expect(gateway.openLeases).toBe(0);
  });

  it('fails the attempt with the gateway’s refusal even when the CLI exits 0', async () => {
    const refusing: BudgetBook = {
      async reserve() {
        throw ApplicationFailure.create({ type: 'BUDGET_EXCEEDED', message: 'day budget: over the $0.01 limit', nonRetryable: true });
      },
      async settle() {},
      async release() {},
    };
    const meter = new SpendMeter({ pricing, declaredCapUsd: '0.50', book: refusing });
    upstream.requests.length = 0;
    const error = await createCommandAgent(profile(), { gateway })
      .run(request(meter, probeCommand([])))
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    const probe = JSON.parse(readFileSync(path.join(worktree, 'probe.json'), 'utf8')) as { status: number; body: string };
    expect(probe.status).toBe(402);
    expect(probe.body).toContain('over the $0.01 limit');
    expect(error).toBeInstanceOf(ApplicationFailure);
    expect((error as ApplicationFailure).type).toBe('BUDGET_EXCEEDED');
    expect(upstream.requests).toHaveLength(0);
  });

  it('gives an agent with network none no gateway at all', async () => {
    const meter = new SpendMeter({ pricing, declaredCapUsd: '0' });
    await createCommandAgent(profile({ network: 'none' }), { gateway }).run(request(meter, probeCommand([])));
    const probe = JSON.parse(readFileSync(path.join(worktree, 'probe.json'), 'utf8')) as { status?: number; error?: string; keys: Array<string | null> };
    expect(probe.status).toBeUndefined();
    expect(probe.error).toBeDefined();
    expect(probe.keys.filter(Boolean)).toEqual([]);
  });

  it('refuses to start an agent that needs the gateway on a worker without one', async () => {
    const meter = new SpendMeter({ pricing, declaredCapUsd: '0' });
    const error = await createCommandAgent(profile(), {})
      .run(request(meter, '[]'))
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect((error as ApplicationFailure).type).toBe('SANDBOX_UNAVAILABLE');
  });
});

function connects(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.on('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}
