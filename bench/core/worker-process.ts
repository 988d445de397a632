/**
 * One Warden worker process with the no-op core (noop-activities.ts), for benchmarks that need
 * workers to be real separate processes (bench/cluster-throughput.ts). Everything it needs comes
 * in the environment:
 *
 *   BENCH_TEMPORAL_ADDRESS, BENCH_NAMESPACE, BENCH_TASK_QUEUE, BENCH_DATABASE_URL, BENCH_DIR
 *   BENCH_SLOTS (optional): `worker.slots` as JSON, e.g. {"targetCpu":0.8,"targetMemory":0.8}
 *
 * It prints `worker ready` once polling, and shuts down on SIGTERM or SIGINT (exit 0).
 */
import path from 'node:path';
import { NativeConnection } from '@temporalio/worker';
import pino from 'pino';
import { quietSdkRuntime } from '../../src/client/in-process-worker';
import { WorkerSafetyConfigSchema } from '../../src/config/schema';
import { openDatabase } from '../../src/ledger/database';
import { Ledger } from '../../src/ledger/ledger';
import { createRedactor } from '../../src/shared/redact';
import { createWardenWorker } from '../../src/workers/warden-worker';
import { unthrottledConfig } from '../harness';
import { noopStageActivities } from './noop-activities';

export const WORKER_READY_LINE = 'worker ready';

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: bench/core/worker-process.ts is started by a benchmark, which sets it`);
  return value;
}

async function main(): Promise<void> {
  const address = required('BENCH_TEMPORAL_ADDRESS');
  const namespace = required('BENCH_NAMESPACE');
  const taskQueue = required('BENCH_TASK_QUEUE');
  const dir = path.join(required('BENCH_DIR'), `worker-${process.pid}`);
  quietSdkRuntime();
  const database = await openDatabase({ databaseUrl: required('BENCH_DATABASE_URL'), dataDir: dir });
  const connection = await NativeConnection.connect({ address });
  const worker = await createWardenWorker({
    connection,
    namespace,
    taskQueue,
    worktreeRoot: path.join(dir, 'worktrees'),
    lineageRoot: path.join(dir, 'lineage'),
    ledger: new Ledger(database.pool),
    logger: pino({ level: 'silent' }),
    redact: createRedactor(process.env),
    safety: { ...unthrottledConfig().worker, ...(process.env.BENCH_SLOTS ? { slots: WorkerSafetyConfigSchema.shape.slots.parse(JSON.parse(process.env.BENCH_SLOTS)) } : {}) },
    // Nothing in the benchmark observes the stages from outside: it waits for each intent's result.
    wrapActivities: (real) => noopStageActivities(real, { reviewPackageBuilt: () => undefined, mergeStarted: () => undefined }),
    killSwitch: { enabled: true, emergencyStopFile: path.join(dir, 'EMERGENCY_STOP') },
    sweepSchedule: false,
  });
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => worker.shutdown());
  const running = worker.run();
  process.stdout.write(`${WORKER_READY_LINE}\n`);
  await running;
  await connection.close();
  await database.close();
}

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`bench worker failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exit(1);
    },
  );
}
