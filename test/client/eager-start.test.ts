import { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { startIntent } from '../../src/client/intents';
import type { IntentInput } from '../../src/shared/intent';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { demoScript, makeSampleRepo, useTestWorld, waitFor } from '../helpers/env';

/**
 * An intent started by a process whose worker polls the intent's queue (`warden run`, the
 * benchmarks) is started eagerly: the server hands its first workflow task to that worker in the
 * start's answer, with no trip through the task queue. The dev server Warden starts allows it
 * (DEV_SERVER_DYNAMIC_CONFIG); the start asks for it through a client on the worker's connection.
 */
const world = useTestWorld('eager-start');

let intents = 0;
function input(): IntentInput {
  intents += 1;
  return { id: `eager${intents}-${Date.now()}`, goal: 'Add slugify', repoPath: makeSampleRepo(), paths: ['lib/**'], agent: { kind: 'scripted', scriptPath: demoScript() }, limits: { cooldown: '0s' } };
}

test('started through the worker’s connection, the intent’s first workflow task comes with the start, and the intent runs to its merge', async () => {
  const client = new Client({ connection: world().connection });
  const handle = await startIntent(client, input(), world().taskQueue, { eager: true });
  expect(handle.eagerlyStarted).toBe(true);

  const pending = await waitFor(async () => {
    const gate = (await handle.query(stateQuery)).pendingGate;
    return gate?.gate === 'merge' && gate.package ? gate : undefined;
  }, 120_000, 'the merge gate');
  expect(pending.gate).toBe('merge');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');
  // The task handed over with the start was taken at once: none timed out or failed.
  const types = ((await handle.fetchHistory()).events ?? []).map((e) => temporal.api.enums.v1.EventType[e.eventType ?? 0]);
  expect(types).toContain('EVENT_TYPE_WORKFLOW_TASK_COMPLETED');
  expect(types.filter((t) => /WORKFLOW_TASK_(TIMED_OUT|FAILED)/.test(t))).toEqual([]);
});

test('a start that does not ask for it (a client with no worker beside it) goes through the task queue', async () => {
  const handle = await startIntent(world().client, input(), world().taskQueue);
  expect(handle.eagerlyStarted).toBe(false);
  await handle.terminate('test done');
});
