import { Worker, type NativeConnection, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { Logger } from 'pino';
import { createActivities } from '../activities';
import { TASK_QUEUE } from '../shared/ids';

export interface WardenWorkerOptions {
  readonly connection: NativeConnection;
  readonly namespace: string;
  readonly taskQueue?: string;
  readonly worktreeRoot: string;
  readonly lineageRoot: string;
  readonly logger: Logger;
  /** A prebuilt bundle (tests bundle once per file); otherwise the workflows are bundled here. */
  readonly workflowBundle?: WorkflowBundleWithSourceMap;
}

/** Builds the worker that runs intent workflows and their activities on one task queue. */
export async function createWardenWorker(options: WardenWorkerOptions): Promise<Worker> {
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue ?? TASK_QUEUE,
    ...(options.workflowBundle
      ? { workflowBundle: options.workflowBundle }
      : { workflowsPath: require.resolve('../workflows') }),
    activities: createActivities({
      worktreeRoot: options.worktreeRoot,
      lineageRoot: options.lineageRoot,
      logger: options.logger,
    }),
    // Cancellation reaches an activity on its next heartbeat: keep that within a second or so.
    maxHeartbeatThrottleInterval: '1s',
    defaultHeartbeatThrottleInterval: '1s',
  });
}
