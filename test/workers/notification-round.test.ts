import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import type pg from 'pg';
import pino from 'pino';
import { Ledger } from '../../src/ledger/ledger';
import { migrate } from '../../src/ledger/migrate';
import { NotificationOutbox } from '../../src/ledger/notification-outbox';
import type { SafetyEventType } from '../../src/shared/safety-events';
import { NotificationDispatcher, notificationWorkflowId } from '../../src/workers/notification-dispatcher';
import { freshDatabase, type FreshDatabase } from '../helpers/database';
import { testDatabaseUrl } from '../helpers/env';

/**
 * One dispatcher round on a ledger of its own: its reads and writes are one query each for the
 * round, however many events and intents it hands on (a stop of a hundred intents records two
 * notifiable events for each); each intent's own channels still decide where its events go.
 */

let database: FreshDatabase;
let ledger: Ledger;
let connection: Connection;
let client: Client;
const queue = `notification-round-${randomUUID()}`;

beforeAll(async () => {
  database = await freshDatabase(testDatabaseUrl());
  await migrate(database.pool);
  ledger = new Ledger(database.pool);
  connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS });
  client = new Client({ connection });
});

afterAll(async () => {
  await connection?.close();
  await database?.drop();
});

/** The pool, with every query it is sent counted (pool.query is what the outbox uses). */
function countingPool(pool: pg.Pool): { pool: pg.Pool; queries: () => number } {
  let count = 0;
  const counted = new Proxy(pool, {
    get(target, property, receiver) {
      if (property !== 'query') return Reflect.get(target, property, receiver);
      return (...args: unknown[]) => {
        count += 1;
        return (target.query as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { pool: counted, queries: () => count };
}

async function record(eventType: SafetyEventType, intentId: string | undefined, metadata: Record<string, unknown> = {}): Promise<string> {
  const id = randomUUID();
  await ledger.audit.recordSafetyEvent({ id, timestamp: new Date(), eventType, severity: 'info', reason: `${eventType} of ${intentId ?? 'no intent'}`, ...(intentId ? { intentId } : {}), metadata });
  return id;
}

test('a round reads and writes with one query each, not one per event; an intent that asked for a channel gets its delivery', async () => {
  // Twenty intents that asked for no channel, stopped: two notifiable events each.
  const quiet = Array.from({ length: 20 }, (_, i) => `quiet-${i}-${randomUUID().slice(0, 8)}`);
  const toNobody: string[] = [];
  for (const id of quiet) {
    await record('INTENT_STARTED', id, { notify: [] });
    toNobody.push(await record('INTENT_STOPPED', id), await record('INTENT_CANCELLED', id));
  }
  // One intent that asked to hear of its gates only: its gate is told, its stop is not.
  const watched = `watched-${randomUUID().slice(0, 8)}`;
  await record('INTENT_STARTED', watched, { notify: [{ kind: 'webhook', url: 'http://127.0.0.1:9/hook', events: ['gate.opened'] }] });
  const gateOpened = await record('GATE_REQUESTED', watched, { gate: 'merge' });
  toNobody.push(await record('INTENT_STOPPED', watched));
  // An event of no intent, with the worker's own channels empty.
  toNobody.push(await record('CIRCUIT_TRIPPED', undefined));

  const { pool, queries } = countingPool(database.pool);
  const dispatcher = new NotificationDispatcher({ client, outbox: new NotificationOutbox(pool), taskQueue: queue, logger: pino({ level: 'silent' }), channels: [] });
  expect(await dispatcher.round()).toBe(toNobody.length + 1);
  // The events, the intents' channels, the gate's dispatch, and the rest's in one write.
  expect(queries()).toBe(4);

  const { rows } = await database.pool.query<{ event_id: string; workflow_id: string | null }>('SELECT event_id, workflow_id FROM notification_dispatches');
  const dispatched = new Map(rows.map((r) => [r.event_id, r.workflow_id]));
  expect(dispatched.size).toBe(toNobody.length + 1);
  for (const id of toNobody) expect(dispatched.get(id)).toBeNull();
  expect(dispatched.get(gateOpened)).toBe(notificationWorkflowId(gateOpened));
  const delivery = client.workflow.getHandle(notificationWorkflowId(gateOpened));
  expect((await delivery.describe()).status.name).toBe('RUNNING'); // no worker polls this queue
  await delivery.terminate('test over');

  // Nothing is left: the next round reads once and writes nothing.
  expect(await dispatcher.round()).toBe(0);
  expect(queries()).toBe(5);
});
