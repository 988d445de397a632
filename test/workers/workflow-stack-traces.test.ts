import type { WorkflowHandle } from '@temporalio/client';
import { startIntent } from '../../src/client/intents';
import { stateQuery } from '../../src/shared/messages';
import { demoScript, makeSampleRepo, TEST_CONFIG, useTestWorld, waitFor } from '../helpers/env';

/**
 * A worker's workflow threads keep no promise stack traces unless the config asks for them
 * (worker.workflowStackTraces): the stack-trace query says so on a default worker, and answers
 * with the intent's stack on one that keeps them. A change of the SDK that made the switch a no-op
 * fails the first test.
 */

const world = useTestWorld('stack-traces');

let n = 0;
/** An "Add slugify" intent on `taskQueue`, once it waits at its merge gate (the ladder at L0). */
async function parkedAtMergeGate(taskQueue: string): Promise<WorkflowHandle> {
  n += 1;
  const input = { id: `st${n}-${Date.now()}`, goal: 'Add slugify', repoPath: makeSampleRepo(), paths: ['lib/**'], agent: { kind: 'scripted' as const, scriptPath: demoScript() }, limits: { cooldown: '0s' } };
  const handle = await startIntent(world().client, input, taskQueue);
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
  return handle;
}

test('a default worker keeps no stack traces: the query says they are not enabled', async () => {
  const handle = await parkedAtMergeGate(world().taskQueue);
  await expect(handle.query('__stack_trace')).rejects.toThrow(/stack traces are not enabled/i);
  await handle.terminate('test over');
});

test('with worker.workflowStackTraces the query shows where the intent waits', async () => {
  const taskQueue = `${world().taskQueue}-traced`;
  const worker = await world().worker({ taskQueue, safety: { ...TEST_CONFIG.worker, workflowStackTraces: true } });
  const running = worker.run();
  try {
    const handle = await parkedAtMergeGate(taskQueue);
    const stack = await handle.query<string>('__stack_trace');
    expect(stack).toMatch(/intentWorkflow|gate/i);
    await handle.terminate('test over');
  } finally {
    worker.shutdown();
    await running;
  }
});
