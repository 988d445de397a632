import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { startIntent } from '../../src/client/intents';
import { migrate } from '../../src/ledger/migrate';
import { sharedLimitKey } from '../../src/ledger/shared-limits';
import { startDevServer, type DevServer } from '../../src/runtime/dev-server';
import { endpointKey } from '../../src/safety/circuit-breaker';
import type { IntentInput } from '../../src/shared/intent';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { freshDatabase, type FreshDatabase } from '../helpers/database';
import { demoScript, makeSampleRepo, testDatabaseUrl, waitFor } from '../helpers/env';
import { startModelServer, type ModelServer } from '../helpers/model-server';

/*
 * Two real Warden worker processes (`warden worker`, as an operator starts them) on one Temporal
 * task queue and one ledger database: the rate buckets and the endpoint circuits of their model
 * gateways are one fleet's. Each worker holds its own upstream key (WARDEN_TEST_MODEL_KEY), so the
 * local model server knows which worker's gateway each request came through; Temporal's history
 * says which worker ran each agent call, refused ones included.
 *
 * Which worker an activity lands on is Temporal's choice. The test does not steer it: it offers
 * enough calls that both workers get some (a dozen each time; all on one worker would be about
 * one run in two thousand) and checks that they did.
 */

const BIN = path.resolve(__dirname, '../../bin/warden.js');
/** Requests per minute per agent, the whole fleet's. One token comes back every 60/R s = 15 s. */
const R = 4;
const RATE_MODEL = 'gpt-4.1';
const CIRCUIT_MODEL = 'gpt-4.1-mini';
/** Intents parked at a gate whose next (lld) call goes out the moment the circuit opens. */
const PROBES = 12;

const json = (value: unknown): string => `\n\`\`\`json\n${JSON.stringify(value)}\n\`\`\`\n`;
/** A HIGH-risk triage: the intent then waits at the architecture gate and calls nothing more. */
const TRIAGE_HIGH = { risk: 'HIGH', confidence: 0.9, affectedPaths: ['lib/strings.js'], rationale: 'parked for the test', predicted: { files: 1, lines: 12 } };
/** An agent profile as an intent's input gives it (defaults not yet filled in). */
type AgentProfile = IntentInput['agent'];
const DOWN = { raw: { status: 500, body: '{"error":{"message":"the model is down"}}' } };

interface WorkerProcess {
  readonly index: number;
  readonly child: ChildProcess;
  /** The identity it polls Temporal with (the SDK's default, pid@host). */
  readonly identity: string;
  /** The upstream key its gateway forwards with: what the model server sees. */
  readonly authorization: string;
  /** Its log, one parsed JSON line each (WARDEN_LOG_LEVEL=warn). */
  readonly logs: Array<Record<string, unknown>>;
  /** Called with every log line as it comes. */
  onLog?: (line: Record<string, unknown>) => void;
}

let server: DevServer;
let database: FreshDatabase;
let upstream: ModelServer;
let clientConnection: Connection;
let client: Client;
let workers: WorkerProcess[] = [];
const home = mkdtempSync(path.join(tmpdir(), 'warden-shared-workers-'));

/** Starts `warden worker` with its own upstream key; resolves once it polls. */
async function startWorker(index: number, env: NodeJS.ProcessEnv): Promise<WorkerProcess> {
  const key = `sk-worker-${index}-0123456789abcdef`;
  // --log-format json: the worker's log records come as JSON lines on stdout, beside its progress lines.
  const child = spawn(process.execPath, [BIN, '--log-format', 'json', 'worker'], { env: { ...env, WARDEN_TEST_MODEL_KEY: key }, stdio: ['ignore', 'pipe', 'pipe'] });
  const worker: WorkerProcess = { index, child, identity: `${child.pid}@${hostname()}`, authorization: `Bearer ${key}`, logs: [] };
  const stderr: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (line) => stderr.push(line));
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.startsWith('worker running against')) return resolve();
      try {
        const entry = JSON.parse(line) as Record<string, unknown>;
        worker.logs.push(entry);
        worker.onLog?.(entry);
      } catch {
        // another progress line
      }
    });
    child.once('exit', (code) => reject(new Error(`worker ${index} exited (${code}) before it ran: ${stderr.slice(-10).join('\n')}`)));
  });
  return worker;
}

beforeAll(async () => {
  upstream = await startModelServer();
  [server, database] = await Promise.all([startDevServer({ cliPath: process.env.WARDEN_TEST_CLI_PATH!, port: 0, uiPort: false }), freshDatabase(testDatabaseUrl())]);
  await migrate(database.pool);
  const config = path.join(home, 'warden.config.json');
  writeFileSync(
    config,
    JSON.stringify({
      limits: { cooldown: '0s' },
      // The server is this test's own, reached from here only: its unsigned decisions may count
      // (the probes' architecture gates are approved with a plain signal).
      unsignedDecisions: { accept: 'always' },
      worker: {
        rateLimits: { perAgent: { requestsPerMinute: R, tokensPerMinute: 10_000_000 }, perModel: { requestsPerMinute: 100_000, tokensPerMinute: 100_000_000 } },
        // Three failures in a row open a circuit (an HTTP agent tries a failing endpoint three
        // times per attempt), and it stays open for the rest of the test.
        circuitBreaker: { failureRate: 1, minimumCalls: 1000, consecutiveFailures: 3, window: '60s', halfOpenAfter: '10m', probes: 1, probeInterval: '1s' },
        // Not under test: the refusals must not add up to an error-rate stop of all agent calls.
        errorRate: { minimumCalls: 1000 },
      },
    }),
  );
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    WARDEN_HOME: home,
    WARDEN_CONFIG: config,
    WARDEN_LOG_LEVEL: 'warn',
    TEMPORAL_ADDRESS: server.address,
    TEMPORAL_NAMESPACE: server.namespace,
    DATABASE_URL: database.url,
    USER: 'shared-limits-tester',
    WARDEN_APPROVER_KEYS: path.join(home, 'keys'),
  };
  clientConnection = await Connection.connect({ address: server.address });
  client = new Client({ connection: clientConnection, namespace: server.namespace });
  workers = await Promise.all([startWorker(0, env), startWorker(1, env)]);
  await warmUp();
});

afterAll(async () => {
  await Promise.all(
    workers.map(
      (w) =>
        new Promise<void>((resolve) => {
          if (w.child.exitCode !== null || w.child.signalCode !== null) return resolve();
          w.child.once('exit', () => resolve());
          w.child.kill('SIGINT');
          setTimeout(() => w.child.kill('SIGKILL'), 10_000).unref();
        }),
    ),
  );
  await clientConnection?.close();
  await server?.stop();
  await upstream?.close();
  await database?.drop();
  rmSync(home, { recursive: true, force: true });
});

let intents = 0;
async function start(agent: AgentProfile, stageAgents: Partial<Record<'lld', AgentProfile>> = {}, repo = makeSampleRepo()) {
  intents += 1;
  const id = `shared-${intents}-${Date.now()}`;
  const handle = await startIntent(client, { id, goal: `Add slugify (${id})`, repoPath: repo, paths: ['lib/**'], agent, stageAgents, limits: { cooldown: '0s' } });
  return { id, handle };
}

function httpAgent(name: string, model: string): AgentProfile {
  return { kind: 'openai', name, model, baseUrl: `${upstream.url}/v1`, apiKeyEnv: ['WARDEN_TEST_MODEL_KEY'] };
}

/**
 * Which worker ran the intent's agent calls (runAgentStage), one identity per activity in the
 * order they were scheduled: the latest attempt's, from the pending activity while it runs or
 * waits for its retry, from the history once it has ended. (The pending ones are read first: an
 * activity that ends between the two reads is then in the history.)
 */
async function agentCallWorkers(handle: WorkflowHandle): Promise<string[]> {
  const byActivity = new Map<string, string>();
  for (const activity of (await handle.describe()).raw.pendingActivities ?? []) {
    if (activity.activityType?.name === 'runAgentStage' && activity.activityId && activity.lastWorkerIdentity) byActivity.set(activity.activityId, activity.lastWorkerIdentity);
  }
  const scheduled = new Map<string, string>();
  for (const event of (await handle.fetchHistory()).events ?? []) {
    const attributes = event.activityTaskScheduledEventAttributes;
    if (attributes?.activityType?.name === 'runAgentStage' && attributes.activityId) scheduled.set(String(event.eventId), attributes.activityId);
    const started = event.activityTaskStartedEventAttributes;
    const activityId = started ? scheduled.get(String(started.scheduledEventId)) : undefined;
    if (activityId && started?.identity && !byActivity.has(activityId)) byActivity.set(activityId, started.identity);
  }
  return [...byActivity.entries()].sort(([a], [b]) => Number(a) - Number(b)).map(([, identity]) => identity);
}

/** Every worker identity that ran a workflow or an activity task of the intent. */
async function allWorkers(handle: WorkflowHandle): Promise<Set<string>> {
  const history = await handle.fetchHistory();
  const identities = new Set<string>();
  for (const event of history.events ?? []) {
    const identity = event.activityTaskStartedEventAttributes?.identity ?? event.workflowTaskStartedEventAttributes?.identity;
    if (identity) identities.add(identity);
  }
  return identities;
}

const workerName = (identity: string): string => {
  const found = workers.find((w) => w.identity === identity);
  return found ? `worker ${found.index}` : `unknown worker ${identity}`;
};

interface CallRow {
  intent_id: string;
  stage: string;
  attempt: number;
  status: number;
  outcome: string;
  refusal: string | null;
  model_id: string;
  at: number;
}

async function modelCalls(ids: readonly string[]): Promise<CallRow[]> {
  const { rows } = await database.pool.query<CallRow>(
    `SELECT intent_id, stage, attempt, status, outcome, refusal, model_id, (extract(epoch FROM "timestamp") * 1000)::float8 AS at
       FROM model_calls WHERE intent_id = ANY($1) ORDER BY "timestamp"`,
    [ids],
  );
  return rows;
}

async function events(ids: readonly string[], type: string): Promise<Array<{ intent_id: string; breaker_id: string | null; reason: string }>> {
  const { rows } = await database.pool.query('SELECT intent_id, breaker_id, reason FROM safety_events WHERE intent_id = ANY($1) AND event_type = $2', [ids, type]);
  return rows;
}

async function terminate(handles: readonly WorkflowHandle[]): Promise<void> {
  await Promise.all(handles.map((h) => h.terminate('the test is over').catch(() => undefined)));
}

async function atGate(handle: WorkflowHandle, gate: string): Promise<void> {
  let last: unknown;
  await waitFor(
    async () => {
      const state = await handle.query(stateQuery);
      last = { status: state.status, stage: state.stage, error: state.error };
      return state.pendingGate?.gate === gate ? true : undefined;
    },
    120_000, // a hang guard: seconds on an idle machine
    `${handle.workflowId} at the ${gate} gate`,
  ).catch((error: Error) => {
    throw new Error(`${error.message} (last seen: ${JSON.stringify(last)})`);
  });
}

/** A scripted agent whose triage says HIGH: its intent then waits at the architecture gate. */
const parkingScript = (): string => demoScript({ triage: [{ output: `# Triage${json(TRIAGE_HIGH)}` }] });

/**
 * Before anything is timed, each worker has run an agent call: one-time costs of a worker's first
 * agent answer (the cascade model that screens every answer trains on first use, seconds of CPU
 * during which that worker serves nothing else, unless the worker trained it at start) stay out
 * of the counted windows. Scripted intents up to their first gate, in fours, until Temporal has
 * given both workers one.
 */
async function warmUp(): Promise<void> {
  const script = parkingScript();
  const handles: WorkflowHandle[] = [];
  try {
    for (let round = 0; round < 5; round++) {
      const batch = await Promise.all(Array.from({ length: 4 }, (_, i) => start({ kind: 'scripted', name: `warm-up-${round}-${i}`, scriptPath: script })));
      handles.push(...batch.map((b) => b.handle));
      await Promise.all(batch.map((b) => atGate(b.handle, 'architecture')));
      const ran = new Set((await Promise.all(handles.map(agentCallWorkers))).flat());
      if (workers.every((w) => ran.has(w.identity))) return;
    }
    throw new Error('five rounds of warm-up intents all ran on one worker');
  } finally {
    await terminate(handles);
  }
}

test(`a limit of ${R} requests a minute per agent, ${3 * R} calls offered across both workers at once: exactly ${R} reach the model`, async () => {
  upstream.respond = () => ({ text: `Parked.${json(TRIAGE_HIGH)}` });
  const agent = httpAgent('rate-agent', RATE_MODEL);
  const repos = Array.from({ length: 3 * R }, () => makeSampleRepo());
  const offered = await Promise.all(repos.map((repo) => start(agent, {}, repo)));
  const ids = offered.map((o) => o.id);
  try {
    // Every intent's triage call answered or refused at one of the two gateways.
    const calls = await waitFor(async () => {
      const rows = await modelCalls(ids);
      return new Set(rows.map((r) => r.intent_id)).size === ids.length ? rows : undefined;
    }, 120_000, `a triage call of each of the ${ids.length} intents`);
    const reached = upstream.requests.filter((r) => r.body.model === RATE_MODEL);
    const refusals = await events(ids, 'RATE_LIMIT_BLOCK');
    // The bucket was full (R) until the first call took from it (a call's row is stamped when it
    // reaches the gateway, before it takes), and one token comes back every 60/R s after that. By
    // now at most `refilled` have: none unless the offers were spread over more than 60/R s, as
    // only a very slow machine spreads them; each one lets one more call through, never more.
    const refilled = Math.floor(((Date.now() - Math.min(...calls.map((c) => c.at))) * R) / 60_000);
    const first = ids.map((id) => calls.find((c) => c.intent_id === id)!);
    const answered = first.filter((c) => c.outcome === 'answered');
    const refused = first.filter((c) => c.outcome === 'refused');

    expect(answered.length).toBeGreaterThanOrEqual(R);
    expect(answered.length).toBeLessThanOrEqual(R + refilled);
    expect(answered.map((c) => c.status)).toEqual(Array(answered.length).fill(200));
    expect(refused).toHaveLength(first.length - answered.length);
    expect(refused.every((c) => c.status === 429 && /^rate: rate limit reached \(agent rate-agent requests\/min\)/.test(c.refusal ?? ''))).toBe(true);
    expect(reached.length).toBeGreaterThanOrEqual(R);
    expect(reached.length).toBeLessThanOrEqual(R + refilled);
    // A RATE_LIMIT_BLOCK for each refused intent, on the refused intents only.
    expect([...new Set(refusals.map((e) => e.intent_id))].sort()).toEqual(refused.map((c) => c.intent_id).sort());

    // Both workers took the calls: Temporal says who ran each triage; the keys the model server
    // saw say whose gateway forwarded the admitted ones.
    const ranOn = await Promise.all(offered.map(async (o) => (await agentCallWorkers(o.handle))[0]!));
    const perWorker = workers.map((w) => ranOn.filter((identity) => identity === w.identity).length);
    expect(perWorker.reduce((a, b) => a + b, 0)).toBe(3 * R);
    expect(perWorker.every((n) => n > 0)).toBe(true);
    const forwardedBy = workers.map((w) => reached.filter((r) => r.headers.authorization === w.authorization).length);
    expect(forwardedBy.reduce((a, b) => a + b, 0)).toBe(reached.length);
  } finally {
    await terminate(offered.map((o) => o.handle));
  }
});

test('a circuit opened by the failures one worker saw is OPEN for the other: its next call never reaches the model', async () => {
  // The model fails every call that comes through the worker whose call came first (until the
  // circuit opens, those are the only calls); a call through the other worker it would answer.
  let failing: string | undefined;
  upstream.respond = (request) => {
    if (request.body.model !== CIRCUIT_MODEL) return { text: 'ok' };
    failing ??= request.headers.authorization;
    return request.headers.authorization === failing ? DOWN : { text: 'a design' };
  };
  const reachedCircuitModel = () => upstream.requests.filter((r) => r.body.model === CIRCUIT_MODEL);

  // Probes: a scripted triage says HIGH, so each waits at the architecture gate; its lld is an
  // HTTP agent of its own name (a rate bucket of its own) on the endpoint about to fail.
  const script = parkingScript();
  const probes = await Promise.all(
    Array.from({ length: PROBES }, (_, i) => start({ kind: 'scripted', name: `probe-${i}`, scriptPath: script }, { lld: httpAgent(`probe-${i}`, CIRCUIT_MODEL) })),
  );
  const probeIds = probes.map((p) => p.id);
  const handles = probes.map((p) => p.handle);
  try {
    await Promise.all(probes.map((p) => atGate(p.handle, 'architecture')));
    expect(reachedCircuitModel()).toHaveLength(0);

    // The breaker: an HTTP agent whose triage fails three times in a row on one worker.
    const endpoint = endpointKey({ kind: 'openai', baseUrl: `${upstream.url}/v1`, model: CIRCUIT_MODEL });
    const opened = new Promise<{ worker: WorkerProcess; at: number }>((resolve) => {
      for (const worker of workers) {
        worker.onLog = (line) => {
          const circuit = line.circuit as { endpoint?: string; to?: string; at?: number } | undefined;
          if (circuit?.endpoint === endpoint && circuit.to === 'OPEN') resolve({ worker, at: circuit.at! });
        };
      }
    });
    const breaker = await start(httpAgent('breaker', CIRCUIT_MODEL));
    handles.push(breaker.handle);
    const opening = await opened;
    // At once: every probe's lld call goes out, through whichever worker Temporal gives it.
    await Promise.all(probes.map((p) => p.handle.signal(decideSignal, { gate: 'architecture', decision: 'approve', by: 'tester' })));

    const failures = reachedCircuitModel();
    const opener = opening.worker;
    const other = workers.find((w) => w !== opener)!;
    // The circuit opened on the third failure, all three through the worker that saw them.
    expect(failures.map((r) => r.headers.authorization)).toEqual(Array(3).fill(opener.authorization));

    const lld = await waitFor(async () => {
      const rows = (await modelCalls(probeIds)).filter((r) => r.stage === 'lld');
      return new Set(rows.map((r) => r.intent_id)).size === PROBES ? rows : undefined;
    }, 120_000, 'the lld call of every probe');
    const ranOn = new Map(await Promise.all(probes.map(async (p) => [p.id, (await agentCallWorkers(p.handle)).at(-1)!] as const)));
    const throughOther = lld.filter((c) => ranOn.get(c.intent_id) === other.identity);

    // Nothing more reached the model: every probe was refused by its own worker's gateway, the
    // ones through the other worker included. (How soon the other worker sees an opening is a
    // figure of the product, measured by bench/shared-limits.ts, not a bound of this test.)
    expect(reachedCircuitModel()).toHaveLength(3);
    expect(lld.map((c) => `${c.status} ${c.outcome} ${c.refusal?.split(':')[0]}`)).toEqual(Array(PROBES).fill('503 refused breaker'));
    expect(throughOther.length).toBeGreaterThan(0);
    const refusedEvents = await events(probeIds, 'MODEL_CALL_REFUSED');
    expect(refusedEvents.map((e) => e.intent_id).sort()).toEqual([...probeIds].sort());
    expect(refusedEvents.every((e) => e.breaker_id === endpoint && /the circuit for .* is open/.test(e.reason))).toBe(true);

    // The worker that saw the failures made the transition (and announced it); the other only read it.
    const transitions = (w: WorkerProcess) =>
      w.logs.map((l) => l.circuit as { endpoint?: string; from?: string; to?: string } | undefined).filter((c) => c?.endpoint === endpoint).map((c) => `${c!.from}->${c!.to}`);
    expect(transitions(opener)).toEqual(['CLOSED->OPEN']);
    expect(transitions(other)).toEqual([]);
    const { rows } = await database.pool.query<{ state: { state: string; openedAt: number } }>('SELECT state FROM shared_limits WHERE key = $1', [
      sharedLimitKey('warden', 'circuit', endpoint),
    ]);
    expect(rows.map((r) => r.state.state)).toEqual(['OPEN']);
    expect(rows[0]!.state.openedAt).toBe(opening.at);
    // Temporal agrees that both workers served these intents.
    const served = new Set<string>();
    for (const handle of handles) for (const identity of await allWorkers(handle)) served.add(identity);
    expect([...served].map(workerName).sort()).toEqual(['worker 0', 'worker 1']);
  } finally {
    for (const worker of workers) worker.onLog = undefined;
    await terminate(handles);
  }
});
