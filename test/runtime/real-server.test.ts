/**
 * Warden on the real Temporal server (built from the Go module proxy into the Warden home, as
 * `npm run cluster:up` does) with PostgreSQL persistence and visibility: a demo intent runs to
 * its merge gate, the server restarts while the intent waits there, and the intent still merges.
 * Its history is read back from the server's own database.
 *
 * The server's databases live in the test run's embedded PostgreSQL (beside the ledgers, as they
 * can for a user); every port is a free one, so the dev server the other tests use is untouched.
 * Where the server is not built yet the test builds it (minutes), or waits for the build .ci/run
 * started (a lock file).
 *
 * @runs-last: it waits for the Temporal server build .ci/run starts in the background (test/setup/sequencer.js).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { WardenWorker } from '../../src/workers/host-worker';
import pg from 'pg';
import { fileTail } from '../../src/runtime/dev-server';
import { stateQuery, decideSignal } from '../../src/shared/messages';
import {
  setUpTemporalDatabases,
  startPrivateCluster,
  type PrivateCluster,
  type TemporalDatabaseSettings,
  type TemporalServerProcess,
} from '../../src/runtime/temporal-cluster';
import { ensureTemporalServer, type TemporalServerInstall } from '../../src/runtime/temporal-server-install';
import { withDatabase } from '../helpers/database';
import { createTestWorld, git, startSampleIntent, type TestWorld } from '../helpers/env';

const log = (message: string): void => void process.stderr.write(`[real-server] ${message}\n`);

/** Polls `check` until it gives a value; errors count as "not yet" (the server may be restarting). */
async function poll<T>(check: () => Promise<T | undefined>, what: string, hangGuardMs = 240_000): Promise<T> {
  const deadline = Date.now() + hangGuardMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${lastError ? ` (last error: ${String(lastError)})` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function admin<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

let install: TemporalServerInstall;

// A hang guard, not a bound: a build on a busy two-core machine took 13 minutes.
beforeAll(async () => {
  install = await ensureTemporalServer({ log: (message) => process.stderr.write(`[temporal-server] ${message}\n`) });
}, 45 * 60_000);

test('a demo intent merges on the real server on PostgreSQL, across a server restart at its merge gate', async () => {
  const adminUrl = process.env.WARDEN_TEST_EMBEDDED_DATABASE_URL;
  if (!adminUrl) throw new Error('WARDEN_TEST_EMBEDDED_DATABASE_URL is not set: test/global-setup.ts starts the embedded PostgreSQL');
  const suffix = `${process.pid}_${Date.now().toString(36)}`;
  const db: TemporalDatabaseSettings = {
    adminUrl,
    user: `temporal_${suffix}`,
    password: randomBytes(12).toString('hex'),
    database: `temporal_${suffix}`,
    visibilityDatabase: `temporal_visibility_${suffix}`,
  };
  const dir = mkdtempSync(path.join(tmpdir(), 'warden-real-server-'));
  const logFile = path.join(dir, 'temporal-server.log');
  let cluster: PrivateCluster | undefined;
  let server: TemporalServerProcess | undefined;
  let world: TestWorld | undefined;
  let worker: WardenWorker | undefined;
  let running: Promise<void> | undefined;
  let passed = false;
  try {
    // Set up beforehand too: a second cluster:up on set-up databases changes nothing and fails nothing.
    await setUpTemporalDatabases(install, db, log);
    cluster = await startPrivateCluster({ install, db, dir, log });
    server = cluster.server;
    world = await createTestWorld('real-server', server.address);
    worker = await world.worker();
    running = worker.run();
    const { handle, repo, before } = await startSampleIntent(world, 'real-server-');
    const { runId } = await handle.describe();
    const atMergeGate = async (): Promise<true | undefined> => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined);
    await poll(atMergeGate, 'the merge gate');

    const firstPid = server.pid;
    await cluster.stopServer();
    log(`server (pid ${firstPid}) stopped with the intent at its merge gate`);
    // The namespace and its search attributes survived in PostgreSQL: preparing again is a no-op.
    server = await cluster.startServer();
    expect(server.pid).not.toBe(firstPid);

    await poll(atMergeGate, 'the merge gate after the restart');
    await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
    const outcome = await handle.result();
    expect(outcome.status).toBe('merged');
    expect((await handle.describe()).runId).toBe(runId);
    expect(git(repo, 'rev-parse', 'main')).toBe(outcome.mergedCommit);
    expect(git(repo, 'rev-parse', 'main')).not.toBe(before);
    expect(git(repo, 'log', '--merges', '--format=%H', 'main').split('\n').filter(Boolean)).toEqual([outcome.mergedCommit]);

    // Visibility is PostgreSQL too (written a moment after the close): the intent is found by
    // Warden's search attribute, as `warden list` finds it.
    const found = await poll(async () => {
      const ids: string[] = [];
      for await (const execution of world!.client.workflow.list({ query: `WorkflowId = '${handle.workflowId}' AND WardenStatus = 'merged' AND ExecutionStatus = 'Completed'` })) ids.push(execution.workflowId);
      return ids.length ? ids : undefined;
    }, 'the closed intent in the visibility store');
    expect(found).toEqual([handle.workflowId]);

    // The history lives in the server's database: its run, and the history nodes of that run.
    const runBytes = Buffer.from(runId.replace(/-/g, ''), 'hex');
    const stored = await admin(withDatabase(adminUrl, db.database), async (client) => {
      const current = await client.query<{ run_id: Buffer }>('SELECT run_id FROM current_executions WHERE workflow_id = $1', [handle.workflowId]);
      const nodes = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM history_node WHERE tree_id = $1', [runBytes]);
      return { runs: current.rows.map((row) => row.run_id.toString('hex')), nodes: nodes.rows[0]!.n };
    });
    expect(stored.runs).toEqual([runBytes.toString('hex')]);
    expect(stored.nodes).toBeGreaterThan(0);

    // Sharing the ledger's PostgreSQL: the server's role owns its two databases, not the ledger.
    const asServer = new URL(world.databaseUrl);
    asServer.username = db.user;
    asServer.password = db.password;
    const ledgerRead = await admin(asServer.toString(), (client) => client.query('SELECT count(*) FROM safety_events')).then(
      () => 'read',
      (error: unknown) => (error as { code?: string }).code,
    );
    expect(ledgerRead).toBe('42501'); // insufficient_privilege
    passed = true;
  } finally {
    if (!passed) log(`the server's log (kept) is ${logFile}; its tail:\n${await fileTail(logFile)}`);
    if (worker && worker.getState() === 'RUNNING') worker.shutdown();
    await running;
    await world?.close();
    await cluster?.stopServer();
    await admin(adminUrl, async (client) => {
      for (const name of [db.database, db.visibilityDatabase]) await client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(name)} WITH (FORCE)`);
      await client.query(`DROP ROLE IF EXISTS ${client.escapeIdentifier(db.user)}`);
    });
    if (passed) rmSync(dir, { recursive: true, force: true });
  }
});
