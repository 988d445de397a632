import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Connection } from '@temporalio/client';
import type { WardenWorker } from '../../src/workers/host-worker';
import { startDevServer } from '../../src/runtime/dev-server';
import { timelineWithHistory } from '../../src/client/history-timeline';
import { stateQuery } from '../../src/shared/messages';
import { describeDeployment, deploymentVersionOf } from '../../src/workers/worker-deployment';
import { createTestWorld, git, startSampleIntent, temporalAddress, TEST_CONFIG, waitFor, type TestWorld } from '../helpers/env';

/**
 * An upgrade without stopping intents: an intent starts on the workers of version A and waits at
 * its merge gate; workers of version B start beside them, B is made current, A's worker stops;
 * the gate is approved and the intent merges on B. The history says which version ran each
 * workflow task, and the audit timeline which version ran each row's task or activity.
 */

let world: TestWorld;
beforeAll(async () => {
  world = await createTestWorld('versioning');
});
afterAll(async () => {
  await world?.close();
});

const BIN = path.resolve(__dirname, '../../bin/warden.js');

/** `warden ARGS` for real, against this file's ledger and the test Temporal server (without blocking this process's workers). */
function warden(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { ...process.env, WARDEN_HOME: mkdtempSync(path.join(tmpdir(), 'warden-versioning-home-')), WARDEN_LOG_LEVEL: 'warn', DATABASE_URL: world.databaseUrl };
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env, encoding: 'utf8' }, (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }));
  });
}

/** A worker of `buildId` in `deployment`, running; `stop` shuts it down and waits for it. */
async function versionedWorker(deployment: string, buildId: string): Promise<{ worker: WardenWorker; stop(): Promise<void> }> {
  const worker = await world.worker({ safety: { ...TEST_CONFIG.worker, deployment: { name: deployment, buildId } } });
  const running = worker.run();
  return {
    worker,
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
    },
  };
}

test('an intent parked at a gate on version A moves to version B once B is current, and merges there after A stops', async () => {
  const deployment = `warden-test-${process.pid}-${Date.now()}`;
  const service = world.client.workflowService;
  const a = await versionedWorker(deployment, 'A');
  let b: Awaited<ReturnType<typeof versionedWorker>> | undefined;
  try {
    // The deployment's first version makes itself current: nobody promotes A.
    await waitFor(async () => ((await describeDeployment(service, 'default', deployment))?.current === 'A' ? true : undefined), 120_000, 'A to become current');

    const { handle, repo, id } = await startSampleIntent(world, 'ver');
    await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');

    b = await versionedWorker(deployment, 'B');
    await waitFor(async () => ((await describeDeployment(service, 'default', deployment))?.versions.some((v) => v.buildId === 'B') ? true : undefined), 120_000, 'B to poll');
    // A started first and is current: B starting changes nothing until a person promotes it.
    const listed = await warden('workers', '--deployment', deployment);
    expect(listed).toMatchObject({ code: 0, stderr: '' });
    expect(listed.stdout).toMatch(new RegExp(`^deployment ${deployment}: current A\n`));
    expect(listed.stdout).toMatch(/\n {2}A +current +\d{4}-/);
    expect(listed.stdout).toMatch(/\n {2}B +inactive +\d{4}-/);
    // A ramp first, with the Temporal CLI as docs/operations.md shows it: `warden workers` shows it.
    const ramp = ['worker', 'deployment', 'set-ramping-version', '--deployment-name', deployment, '--build-id', 'B', '--percentage', '10', '--yes', '--address', temporalAddress()];
    await new Promise<void>((resolve, reject) => execFile(process.env.WARDEN_TEST_CLI_PATH!, ramp, (error) => (error ? reject(error) : resolve())));
    const ramping = await warden('workers', '--deployment', deployment);
    expect(ramping.stdout).toMatch(new RegExp(`^deployment ${deployment}: current A; ramping B \\(10%\\)\n`));
    expect(ramping.stdout).toMatch(/\n {2}B +ramping +\d{4}-/);
    const refused = await warden('workers', 'promote', 'C', '--deployment', deployment);
    expect(refused).toMatchObject({ code: 2, stdout: '' });
    expect(refused.stderr).toBe(`warden: deployment ${deployment} has no version C (its versions: ${(await describeDeployment(service, 'default', deployment))!.versions.map((v) => v.buildId).join(', ')}); start its workers first\n`);
    const promoted = await warden('workers', 'promote', 'B', '--deployment', deployment);
    expect(promoted).toMatchObject({ code: 0, stderr: '' });
    expect(promoted.stdout).toMatch(new RegExp(`^B is now the current version of deployment ${deployment} \\(was A\\)\n`));
    const routed = await describeDeployment(service, 'default', deployment);
    expect(routed?.current).toBe('B');
    expect(routed?.versions.find((v) => v.buildId === 'A')?.status).toMatch(/^(draining|drained)$/);
    await a.stop();

    // Through the CLI, which first checks that a worker polls the task queue: B's, a versioned one.
    const approved = await warden('approve', id, '--by', 'alice');
    expect(approved).toMatchObject({ code: 0, stderr: '' });
    expect((await handle.result()).status).toBe('merged');
    expect(git(repo, 'log', '-1', '--format=%s', 'main')).toContain(`merge intent ${id}`);

    // Every workflow task until the intent parked ran on A; from the one that took the decision
    // (the update is accepted in the task that ran it) to the end, every one ran on B.
    const events = (await handle.fetchHistory()).events ?? [];
    const decided = Number(events.find((e) => e.workflowExecutionUpdateAcceptedEventAttributes ?? e.workflowExecutionSignaledEventAttributes)?.eventId);
    expect(decided).toBeGreaterThan(0);
    const tasks = events.flatMap((e) => (e.workflowTaskCompletedEventAttributes ? [{ eventId: Number(e.eventId), buildId: e.workflowTaskCompletedEventAttributes.deploymentVersion?.buildId }] : []));
    const switched = tasks.findIndex((t) => t.buildId !== 'A');
    const onA = tasks.slice(0, switched);
    const onB = tasks.slice(switched);
    expect(onA.length).toBeGreaterThan(5);
    expect(new Set(onB.map((t) => t.buildId))).toEqual(new Set(['B']));
    expect(tasks.filter((t) => t.eventId < decided).at(-1)?.buildId).toBe('B');
    const firstOnB = onB[0]!.eventId;

    // The audit timeline: the stages before the gate ran on A; the merge and the ending on B.
    const timeline = await timelineWithHistory(world.client, world.pool, id);
    const versionOf = (type: string, stage?: string) => timeline.filter((entry) => entry.type === type && (stage === undefined || entry.stage === stage)).map((entry) => entry.history?.buildId);
    expect(versionOf('STAGE_STARTED', 'impl').length).toBeGreaterThan(0);
    expect(new Set(versionOf('STAGE_STARTED', 'impl'))).toEqual(new Set(['A']));
    const activityRuns = timeline.filter((entry) => entry.history?.eventType === 'ActivityTaskScheduled');
    expect(new Set(activityRuns.filter((entry) => entry.history!.eventId < firstOnB).map((entry) => entry.history?.buildId))).toEqual(new Set(['A']));
    expect(new Set(activityRuns.filter((entry) => entry.history!.eventId > firstOnB).map((entry) => entry.history?.buildId))).toEqual(new Set(['B']));
    expect(versionOf('GATE_DECIDED')).toEqual(['B']);
    expect(versionOf('INTENT_MERGED')).toEqual(['B']);
    // And as `warden audit --with-history` prints it.
    const audit = await warden('audit', id, '--with-history');
    expect(audit).toMatchObject({ code: 0, stderr: '' });
    expect(audit.stdout).toMatch(/WorkflowTaskStarted on A +\| .* STAGE_STARTED \[impl\]/);
    expect(audit.stdout).toMatch(/WorkflowTaskStarted on B +\| .* INTENT_MERGED/);
  } finally {
    await a.stop();
    await b?.stop();
  }
});

test('warden worker with only a deployment name polls as the package version and a hash of its workflow code, and makes that version current', async () => {
  // A server of its own: this worker polls Warden's own task queue, which a deployment then owns.
  const server = await startDevServer({ cliPath: process.env.WARDEN_TEST_CLI_PATH!, port: 0, uiPort: false });
  const home = mkdtempSync(path.join(tmpdir(), 'warden-versioning-worker-'));
  const config = path.join(home, 'warden.config.json');
  writeFileSync(config, JSON.stringify({ worker: { deployment: { name: 'warden' } } }));
  const env = { ...process.env, WARDEN_HOME: home, WARDEN_CONFIG: config, WARDEN_LOG_LEVEL: 'warn', TEMPORAL_ADDRESS: server.address, TEMPORAL_NAMESPACE: server.namespace, DATABASE_URL: world.databaseUrl };
  const child = spawn(process.execPath, [BIN, 'worker'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const connection = await Connection.connect({ address: server.address });
  try {
    const stderr: string[] = [];
    createInterface({ input: child.stderr }).on('line', (line) => stderr.push(line));
    const running = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout }).on('line', (line) => {
        if (line.startsWith('worker running against')) resolve(line);
      });
      child.once('exit', (code) => reject(new Error(`warden worker exited (${code}) before it ran: ${stderr.slice(-10).join('\n')}`)));
    });
    // The same workflow code as this file's bundle (Warden's interceptors, no tracing): the same id.
    const { buildId } = deploymentVersionOf({ name: 'warden' }, world.bundle.code);
    expect(buildId).toMatch(/^\d+\.\d+\.\d+-[0-9a-f]{12}$/);
    expect(running).toMatch(new RegExp(`^worker running against ${server.address} \\(namespace ${server.namespace}\\) as host \\S+, version ${buildId.replaceAll('.', '\\.')} of deployment warden; Ctrl-C to stop$`));
    const current = await waitFor(async () => (await describeDeployment(connection.workflowService, server.namespace, 'warden'))?.current, 120_000, 'the first version to become current');
    expect(current).toBe(buildId);
  } finally {
    await new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGINT');
    });
    await connection.close();
    await server.stop();
  }
});
