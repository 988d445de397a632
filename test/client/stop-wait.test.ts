import { Client, Connection } from '@temporalio/client';
import { InterceptingCall, type Interceptor } from '@grpc/grpc-js';
import { stopIntent } from '../../src/client/stop-intents';
import { workflowIdForIntent } from '../../src/shared/ids';
import { createTestWorld, type TestWorld } from '../helpers/env';

/**
 * A stop waits for the intent's workflow to close with one long poll, not by describing it every
 * moment: `warden stop --all` waits for a hundred intents at once, on the server that has to
 * close them. Against the real dev server, counting the describe calls the stop makes.
 */

let world: TestWorld;
let connection: Connection;
let client: Client;
let describes = 0;

/** Counts the DescribeWorkflowExecution calls made through this file's own client. */
const countDescribes: Interceptor = (options, nextCall) => {
  if (options.method_definition.path.endsWith('/DescribeWorkflowExecution')) describes++;
  return new InterceptingCall(nextCall(options));
};

beforeAll(async () => {
  world = await createTestWorld('stop-wait');
  connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS!, interceptors: [countDescribes] });
  client = new Client({ connection });
});

afterAll(async () => {
  await connection?.close();
  await world?.close();
});

/** An intent workflow on a task queue no worker polls: it stays running, whatever it is told. */
async function unservedIntent(id: string): Promise<void> {
  await client.workflow.start('intentWorkflow', { taskQueue: `nobody-polls-${id}`, workflowId: workflowIdForIntent(id), args: [] });
}

async function eventTypes(id: string): Promise<string[]> {
  return (await world.pool.query<{ event_type: string }>('SELECT event_type FROM safety_events WHERE intent_id = $1 ORDER BY timestamp', [id])).rows.map((r) => r.event_type);
}

test('a stop that waits the whole wait describes the intent twice: before the cancel and once the wait is over', async () => {
  const id = `stop-wait-${Date.now()}`;
  await unservedIntent(id);
  describes = 0;
  const outcome = await stopIntent(client, world.ledger, id, { by: 'tester', reason: 'drill', waitMs: 3_000 });
  expect(outcome).toMatchObject({ intentId: id, outcome: 'terminated' });
  expect(outcome.outcome === 'terminated' && outcome.stillRunning).toMatch(/a workflow task waiting for a worker/);
  // Looking every 250 ms, the 3 s wait alone made a dozen.
  expect(describes).toBe(2);
  expect(await eventTypes(id)).toEqual(['INTENT_STOPPED', 'STOP_ESCALATED']);
  expect((await client.workflow.getHandle(workflowIdForIntent(id)).describe()).status.name).toBe('TERMINATED');
});

test('a stop returns once the intent closes, and says how it closed', async () => {
  const id = `stop-closes-${Date.now()}`;
  await unservedIntent(id);
  const stopping = stopIntent(client, world.ledger, id, { by: 'tester', reason: 'drill', waitMs: 600_000 });
  // Closed some other way than the cancel: once INTENT_STOPPED is written, the cancel has been sent or is next.
  while ((await eventTypes(id)).length === 0) await new Promise((resolve) => setTimeout(resolve, 50));
  await client.workflow.getHandle(workflowIdForIntent(id)).terminate('closed from outside');
  expect(await stopping).toMatchObject({ intentId: id, outcome: 'ended', status: 'terminated' });
});
