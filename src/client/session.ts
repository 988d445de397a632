import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import { Runtime, DefaultLogger } from '@temporalio/worker';
import type { Logger } from 'pino';
import type { WardenConfig } from '../config/schema';
import { openDatabase, type LedgerDatabase } from '../ledger/database';
import { Ledger } from '../ledger/ledger';
import type { RuntimeConfig } from '../runtime/config';
import { connectTemporal, type TemporalTarget } from '../runtime/temporal';
import { TASK_QUEUE, workflowIdForIntent } from '../shared/ids';
import { createRedactor } from '../shared/redact';
import type { LadderLevel } from '../shared/ladder';
import { createWardenWorker } from '../workers/warden-worker';

/** A worker running in this process, and how to stop it. */
export interface RunningWorker {
  readonly worker: Worker;
  stop(): Promise<void>;
}

let runtimeInstalled = false;

/** Keeps the SDK's own logging to warnings, so CLI output stays readable. */
export function quietSdkRuntime(): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  Runtime.install({ logger: new DefaultLogger('WARN') });
}

/** Opens the ledger: DATABASE_URL, or the embedded PostgreSQL under `.warden/postgres`. */
export async function openLedger(config: RuntimeConfig, log: (message: string) => void): Promise<{ ledger: Ledger; database: LedgerDatabase }> {
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.postgresDataDir, log });
  return { ledger: new Ledger(database.pool), database };
}

/** Starts a Warden worker in this process against `target`, with the ledger it writes to. */
export async function startWorker(target: TemporalTarget, config: RuntimeConfig, warden: WardenConfig, logger: Logger): Promise<RunningWorker> {
  quietSdkRuntime();
  const { ledger, database } = await openLedger(config, (m) => logger.info(m));
  const worker = await createWardenWorker({
    connection: await target.nativeConnection(),
    namespace: target.namespace,
    worktreeRoot: config.worktreeRoot,
    lineageRoot: config.lineageRoot,
    ledger,
    logger,
    redact: createRedactor(process.env),
    safety: warden.worker,
    mode: warden.mode,
    automation: { level: warden.automation.level as LadderLevel, allowLevelUp: warden.automation.allowLevelUp },
    // WARDEN_ENABLED=false or an EMERGENCY_STOP file: this worker starts no agent work.
    killSwitch: { enabled: process.env.WARDEN_ENABLED !== 'false', emergencyStopFile: path.join(config.wardenHome, 'EMERGENCY_STOP') },
  });
  const running = worker.run();
  return {
    worker,
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
      await database.close();
    },
  };
}

/**
 * True if some worker polled Warden's task queue in the last minute. Pollers long-poll for up to
 * a minute, so an older entry is a worker that has gone.
 */
export async function hasLiveWorker(client: Client, namespace: string): Promise<boolean> {
  const response = await client.workflowService.describeTaskQueue({
    namespace,
    taskQueue: { name: TASK_QUEUE },
    taskQueueType: 1, // TASK_QUEUE_TYPE_WORKFLOW
  });
  const cutoff = Date.now() - 70_000;
  return (response.pollers ?? []).some((poller) => {
    const seconds = Number(poller.lastAccessTime?.seconds ?? 0);
    return seconds * 1000 >= cutoff;
  });
}

/** Link to an intent in the Temporal Web UI. */
export function webUiLink(target: TemporalTarget, intentId: string): string | undefined {
  return target.uiUrl ? `${target.uiUrl}/namespaces/${target.namespace}/workflows/${workflowIdForIntent(intentId)}` : undefined;
}

export { connectTemporal };
