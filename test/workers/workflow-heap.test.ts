import v8 from 'node:v8';
import { Worker as Thread } from 'node:worker_threads';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { TEST_CONFIG, startSampleIntent, useTestWorld, waitFor } from '../helpers/env';

/**
 * worker.workflowHeapMb bounds the V8 heap of the isolates the worker starts after it — its
 * workflow thread — and intents still run on it. The main thread keeps its own limit.
 */
const world = useTestWorld('workflow-heap', { safety: { ...TEST_CONFIG.worker, workflowHeapMb: 128 } });

function heapLimitOfNewThreadMb(): Promise<number> {
  return new Promise((resolve, reject) => {
    const thread = new Thread("require('node:worker_threads').parentPort.postMessage(require('node:v8').getHeapStatistics().heap_size_limit)", { eval: true });
    thread.once('message', (limit: number) => void thread.terminate().then(() => resolve(limit / 1024 / 1024)));
    thread.once('error', reject);
  });
}

test('a thread started after the worker has a heap near workflowHeapMb; the main thread does not', async () => {
  const limit = await heapLimitOfNewThreadMb();
  expect(limit).toBeGreaterThanOrEqual(128);
  expect(limit).toBeLessThan(256); // old space 128 MB plus the young generation
  expect(v8.getHeapStatistics().heap_size_limit / 1024 / 1024).toBeGreaterThan(512);
});

test('an intent runs to its merge gate and merges on the bounded worker', async () => {
  const { handle } = await startSampleIntent(world(), 'heap');
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');
});
