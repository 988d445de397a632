import { resolveConfig } from '../../src/config/load';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import type { WardenWorker } from '../../src/workers/host-worker';
import { createTestWorld, startSampleIntent, waitFor, type TestWorld } from '../helpers/env';

/**
 * worker.slots turns on the SDK's resource-based slot tuner: the worker hands out task slots
 * while the machine's CPU and memory stay below the targets, and an intent still runs through
 * it. Out-of-range targets are refused when the config is read.
 */
const config = resolveConfig({ limits: { cooldown: '0s' }, worker: { slots: { targetCpu: 0.95, targetMemory: 0.95 } } });
let world: TestWorld;
let worker: WardenWorker;
let running: Promise<void>;
beforeAll(async () => {
  world = await createTestWorld('resource-slots');
  worker = await world.worker({ safety: config.worker });
  running = worker.run();
});
afterAll(async () => {
  worker?.shutdown();
  await running;
  await world?.close();
});

test('the worker is built with the resource-based tuner at the configured targets', () => {
  // The SDK's compiled form: each kind of slot resource-based, all against the configured targets,
  // on the shared queue's worker and on the host's own.
  for (const part of [worker.shared, worker.host]) {
    expect(part.options.tuner).toMatchObject({
      resourceBasedTunerConfig: { targetCpuUsage: 0.95, targetMemoryUsage: 0.95 },
      workflowTaskSlotSupplier: { type: 'resource-based' },
      activityTaskSlotSupplier: { type: 'resource-based' },
    });
  }
});

test('an intent runs to its merge gate and merges on a worker with resource-based slots', async () => {
  const { handle } = await startSampleIntent(world, 'slots');
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');
});

test('targets outside (0, 1] and unknown keys are refused', () => {
  expect(() => resolveConfig({ worker: { slots: { targetCpu: 0, targetMemory: 0.8 } } })).toThrow(/worker\.slots\.targetCpu/);
  expect(() => resolveConfig({ worker: { slots: { targetCpu: 0.8, targetMemory: 1.5 } } })).toThrow(/worker\.slots\.targetMemory/);
  expect(() => resolveConfig({ worker: { slots: { targetCpu: 0.8 } } })).toThrow(/worker\.slots\.targetMemory/);
  expect(() => resolveConfig({ worker: { slots: { targetCpu: 0.8, targetMemory: 0.8, maxSlots: 4 } } as never })).toThrow(/maxSlots/);
});
