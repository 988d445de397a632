import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, Runtime, DefaultLogger, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import pino from 'pino';
import { createActivities, type WardenActivities } from '../../src/activities';
import { createSampleRepo } from '../../src/client/sample-repo';
import type { AgentScript } from '../../src/shared/script';

/** The dev server started by test/global-setup.ts. */
export function temporalAddress(): string {
  const address = process.env.TEMPORAL_ADDRESS;
  if (!address) throw new Error('TEMPORAL_ADDRESS is not set: tests run against the dev server from global-setup');
  return address;
}

let runtimeInstalled = false;

export interface TestWorld {
  readonly client: Client;
  readonly connection: NativeConnection;
  readonly bundle: WorkflowBundleWithSourceMap;
  readonly taskQueue: string;
  readonly worktreeRoot: string;
  readonly lineageRoot: string;
  /** A worker on this file's task queue; `wrap` may replace activities (fault injection). */
  worker(wrap?: (activities: WardenActivities) => WardenActivities): Promise<Worker>;
  close(): Promise<void>;
}

/** Connects to the test server and bundles the workflow code once per test file. */
export async function createTestWorld(name: string): Promise<TestWorld> {
  if (!runtimeInstalled) {
    Runtime.install({ logger: new DefaultLogger('ERROR') });
    runtimeInstalled = true;
  }
  const address = temporalAddress();
  const connection = await NativeConnection.connect({ address });
  const clientConnection = await Connection.connect({ address });
  const client = new Client({ connection: clientConnection });
  const bundle = await bundleWorkflowCode({ workflowsPath: require.resolve('../../src/workflows'), logger: new DefaultLogger('WARN') });
  const dir = mkdtempSync(path.join(tmpdir(), `warden-${name}-`));
  const worktreeRoot = path.join(dir, 'worktrees');
  const lineageRoot = path.join(dir, 'lineage');
  const taskQueue = `test-${name}-${process.pid}-${Date.now()}`;
  const logger = pino({ level: 'silent' });
  return {
    client,
    connection,
    bundle,
    taskQueue,
    worktreeRoot,
    lineageRoot,
    async worker(wrap) {
      const activities = createActivities({ worktreeRoot, lineageRoot, logger });
      return Worker.create({
        connection,
        taskQueue,
        workflowBundle: bundle,
        activities: wrap ? wrap(activities) : activities,
        maxHeartbeatThrottleInterval: '1s',
        defaultHeartbeatThrottleInterval: '1s',
      });
    },
    async close() {
      await clientConnection.close();
      await connection.close();
    },
  };
}

/** A fresh sample repository (see src/client/sample-repo.ts) in a temp folder. */
export function makeSampleRepo(): string {
  return createSampleRepo(path.join(mkdtempSync(path.join(tmpdir(), 'warden-repo-')), 'sample'));
}

/** Writes a scripted-agent script to a temp file and returns its path. */
export function writeScript(script: AgentScript | Record<string, unknown>): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'warden-script-')), 'script.json');
  writeFileSync(file, JSON.stringify(script));
  return file;
}

/** The bundled demo script: impl fails once, then passes. */
export const DEMO_SCRIPT = path.resolve(__dirname, '../../examples/demo-agent.json');

export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8' }).trim();
}

/** Polls `check` until it returns a value (not undefined) or `timeoutMs` passes. */
export async function waitFor<T>(check: () => Promise<T | undefined> | T | undefined, timeoutMs = 30_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
