import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { Client, Connection } from '@temporalio/client';
import { startIntent } from '../../src/client/intents';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/ledger/database';
import { migrate } from '../../src/ledger/migrate';
import { startDevServer, type DevServer } from '../../src/runtime/dev-server';
import { endpointKey } from '../../src/safety/circuit-breaker';
import { findFreePort } from '../../src/shared/ports';
import { dashboardQueries, metricNames, type Panel } from '../helpers/dashboard-queries';
import { DEMO_SCRIPT, makeSampleRepo, waitFor } from '../helpers/env';
import { startModelServer, type ModelServer } from '../helpers/model-server';
import { describeWith, programPath } from '../setup/prerequisites';

/**
 * A real Prometheus (Debian's) scrapes a real `warden worker` every second and evaluates the
 * shipped alerting rules (deploy/prometheus/warden-alerts.yml) every second. The worker is driven
 * into each condition that can be reached quickly and honestly, and the test reads Prometheus's
 * /api/v1/alerts until the alert fires:
 *
 *   - WardenBreakerOpen: an HTTP agent's model answers 500s until its gateway's circuit opens;
 *   - WardenGateOverdue: its merge gate waits past its notice (a 20 s timeout), then is approved
 *     and the alert ends;
 *   - WardenLedgerUnreachable: the ledger's PostgreSQL is stopped.
 *
 * WardenIntentStuckInStage needs 90 minutes in one stage, and WardenBudgetPast90Percent a run
 * whose every call's reservation fits under a budget it then spends past 90 % of (the demo's
 * calls reserve their declared $0.50 each): promtool's rule tests cover both (alert-rules.test.ts). The dashboard's queries are run against this Prometheus too.
 */

const ROOT = path.resolve(__dirname, '../..');
const BIN = path.join(ROOT, 'bin/warden.js');
const RULES = path.join(ROOT, 'deploy/prometheus/warden-alerts.yml');
const DASHBOARD = path.join(ROOT, 'deploy/grafana/warden.json');
const MODEL = 'gpt-4.1-mini';
const DOWN = { raw: { status: 500, body: '{"error":{"message":"the model is down"}}' } };

interface Alert {
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
  readonly state: 'pending' | 'firing';
}

const home = mkdtempSync(path.join(tmpdir(), 'warden-alerts-'));
let server: DevServer;
let ledgerDb: EmbeddedPostgres;
let ledgerDir: string;
let upstream: ModelServer;
let connection: Connection;
let client: Client;
let worker: ChildProcess | undefined;
let prometheus: ChildProcess | undefined;
let prometheusUrl: string;
let env: NodeJS.ProcessEnv;

function warden(...args: string[]) {
  const result = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8', timeout: 120_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** Starts a process and resolves once `ready` says so from its output; rejects if it exits first. */
function startProcess(file: string, args: string[], options: { env?: NodeJS.ProcessEnv; ready: (output: string) => boolean }): Promise<ChildProcess> {
  const child = spawn(file, args, { env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  return new Promise((resolve, reject) => {
    const read = (chunk: Buffer): void => {
      output = (output + chunk.toString()).slice(-20_000);
      if (options.ready(output)) resolve(child);
    };
    child.stdout!.on('data', read);
    child.stderr!.on('data', read);
    child.once('exit', (code) => reject(new Error(`${path.basename(file)} exited (${code}) before it was ready:\n${output.slice(-3000)}`)));
  });
}

async function prometheusApi<T>(pathAndQuery: string): Promise<T> {
  const response = await fetch(`${prometheusUrl}${pathAndQuery}`);
  const body = (await response.json()) as { status: string; data: T; error?: string };
  if (body.status !== 'success') throw new Error(`Prometheus ${pathAndQuery}: ${body.error ?? body.status}`);
  return body.data;
}

const alerts = async (): Promise<Alert[]> => (await prometheusApi<{ alerts: Alert[] }>('/api/v1/alerts')).alerts;

/** Waits until Prometheus reports `name` firing (and `match` holds of it). */
function firing(name: string, match: (alert: Alert) => boolean = () => true): Promise<Alert> {
  return waitFor(async () => (await alerts()).find((a) => a.labels.alertname === name && a.state === 'firing' && match(a)), 240_000, `${name} firing`);
}

describeWith('prometheus', 'the alerting rules on a real worker and a real Prometheus', () => {
  beforeAll(async () => {
    upstream = await startModelServer(() => DOWN);
    ledgerDir = mkdtempSync(path.join(tmpdir(), 'warden-alerts-pg-'));
    [server, ledgerDb] = await Promise.all([startDevServer({ cliPath: process.env.WARDEN_TEST_CLI_PATH!, port: 0, uiPort: false }), startEmbeddedPostgres({ dataDir: ledgerDir, port: 0 })]);
    const pool = new pg.Pool({ connectionString: ledgerDb.url });
    await migrate(pool);
    await pool.end();

    const metricsPort = await findFreePort();
    const config = path.join(home, 'warden.config.json');
    writeFileSync(
      config,
      JSON.stringify({
        limits: { cooldown: '0s' },
        telemetry: { prometheus: `127.0.0.1:${metricsPort}` },
        // The server is this test's own, reached from here only: its unsigned decisions may count.
        unsignedDecisions: { accept: 'always' },
        // The merge gate's notice comes a fifth of its timeout before it: 16 s after it opens.
        gates: { merge: { timeout: '20s', onTimeout: 'wait-again' } },
        worker: {
          // Three failures in a row open a circuit (an HTTP agent tries three times per attempt).
          circuitBreaker: { failureRate: 1, minimumCalls: 1000, consecutiveFailures: 3, window: '60s', halfOpenAfter: '10m', probes: 1, probeInterval: '1s' },
          // Not under test: the failures must not add up to an error-rate stop of every agent call.
          errorRate: { minimumCalls: 1000 },
        },
      }),
    );
    env = {
      ...process.env,
      WARDEN_HOME: home,
      WARDEN_CONFIG: config,
      WARDEN_LOG_LEVEL: 'warn',
      TEMPORAL_ADDRESS: server.address,
      TEMPORAL_NAMESPACE: server.namespace,
      DATABASE_URL: ledgerDb.url,
      USER: 'alerts-tester',
      WARDEN_TEST_MODEL_KEY: 'sk-alerts-0123456789abcdef',
    };
    worker = await startProcess(process.execPath, [BIN, 'worker'], { env, ready: (out) => out.includes('worker running') });

    const prometheusPort = await findFreePort();
    prometheusUrl = `http://127.0.0.1:${prometheusPort}`;
    const prometheusConfig = path.join(home, 'prometheus.yml');
    writeFileSync(
      prometheusConfig,
      [
        'global: { scrape_interval: 1s, evaluation_interval: 1s }',
        `rule_files: [${JSON.stringify(RULES)}]`,
        'scrape_configs:',
        `  - { job_name: warden, static_configs: [ { targets: ["127.0.0.1:${metricsPort}"] } ] }`,
        '',
      ].join('\n'),
    );
    prometheus = await startProcess(
      programPath('prometheus')!,
      [`--config.file=${prometheusConfig}`, `--storage.tsdb.path=${path.join(home, 'tsdb')}`, `--web.listen-address=127.0.0.1:${prometheusPort}`],
      { ready: (out) => out.includes('Server is ready to receive web requests') },
    );
    // the rules are loaded, and the worker is scraped
    await waitFor(async () => ((await prometheusApi<{ groups: unknown[] }>('/api/v1/rules')).groups.length > 0 ? true : undefined), 120_000, 'the rules loaded');
    await waitFor(async () => ((await prometheusApi<{ result: unknown[] }>('/api/v1/query?query=warden_ledger_up%3D%3D1')).result.length > 0 ? true : undefined), 120_000, 'the worker scraped');

    connection = await Connection.connect({ address: server.address });
    client = new Client({ connection, namespace: server.namespace });
  });

  afterAll(async () => {
    const stop = async (child: ChildProcess | undefined): Promise<void> => {
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    };
    await Promise.all([stop(worker), stop(prometheus)]);
    await connection?.close();
    await server?.stop();
    await upstream?.close();
    await ledgerDb?.stop();
    rmSync(ledgerDir, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  });

  test('a breaker opened by a model answering 500s fires WardenBreakerOpen, naming the breaker', async () => {
    const id = `alerts-breaker-${Date.now()}`;
    await startIntent(client, {
      id,
      goal: 'Add slugify',
      repoPath: makeSampleRepo(),
      paths: ['lib/**'],
      agent: { kind: 'openai', name: 'breaker', model: MODEL, baseUrl: `${upstream.url}/v1`, apiKeyEnv: ['WARDEN_TEST_MODEL_KEY'] },
      limits: { cooldown: '0s' },
    });
    const alert = await firing('WardenBreakerOpen');
    expect(alert.labels.breaker).toBe(endpointKey({ kind: 'openai', baseUrl: `${upstream.url}/v1`, model: MODEL }));
    expect(alert.labels.severity).toBe('page');
    expect(alert.annotations.summary).toContain('is open');
    expect(upstream.requests.length).toBeGreaterThanOrEqual(3);
  });

  test('a merge gate past its notice fires WardenGateOverdue until it is approved', async () => {
    const id = `alerts-gate-${Date.now()}`;
    expect(warden('run', '--repo', makeSampleRepo(), '--goal', 'Add slugify', '--id', id, '--script', DEMO_SCRIPT, '--detach').code).toBe(0);
    const overdue = await firing('WardenGateOverdue');
    expect(overdue.annotations.summary).toBe('1 gate(s) still waiting past their notice time');
    expect(warden('approve', id).code).toBe(0);
    // decided: no gate is overdue, and the alert is gone
    await waitFor(async () => ((await alerts()).some((a) => a.labels.alertname === 'WardenGateOverdue') ? undefined : true), 240_000, 'WardenGateOverdue to end');
    await waitFor(() => ((JSON.parse(warden('status', id, '--json').stdout) as { wardenStatus?: string }).wardenStatus === 'merged' ? true : undefined), 240_000, 'the merge');
  });

  test("Prometheus accepts every query of the dashboard, and every metric they name is in the worker's scrape", async () => {
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: Panel[] };
    const queries = dashboardQueries(dashboard);
    for (const { expr } of queries) await prometheusApi(`/api/v1/query?query=${encodeURIComponent(expr)}`);
    // By now the worker has started and merged an intent, decided a gate, spent and opened a
    // breaker: each of its metrics has a series but the two counters nothing here adds to (no
    // budget warning, and no trip the ledger records: the gateway's circuit is no ledger row).
    const notDriven = new Set(['warden_budget_warnings', 'warden_safety_trips']);
    const missingNow = async (): Promise<string[]> => {
      const names = new Set(await prometheusApi<string[]>('/api/v1/label/__name__/values'));
      return [...new Set(queries.flatMap(({ expr }) => metricNames(expr)))].filter((name) => name.startsWith('warden_') && !notDriven.has(name) && !names.has(name));
    };
    // The intent's last rows (its ending among them) are written after its status reads merged,
    // and Prometheus sees them at its next scrape: wait for that scrape, not for a fixed moment.
    let missing = await missingNow();
    await waitFor(async () => ((missing = await missingNow()).length === 0 ? true : undefined), 60_000, 'every metric the dashboard names in a scrape').catch(() => undefined);
    expect(missing).toEqual([]);
  });

  test("the ledger's PostgreSQL stopped fires WardenLedgerUnreachable", async () => {
    expect((await alerts()).some((a) => a.labels.alertname === 'WardenLedgerUnreachable')).toBe(false);
    await ledgerDb.stop();
    const alert = await firing('WardenLedgerUnreachable');
    expect(alert.labels.severity).toBe('page');
    expect(alert.labels.job).toBe('warden');
  });
});
