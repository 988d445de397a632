import { createHmac } from 'node:crypto';
import type { WorkflowHandle } from '@temporalio/client';
import pino from 'pino';
import { NotificationOutbox } from '../../src/ledger/notification-outbox';
import { NotificationDispatcher } from '../../src/workers/notification-dispatcher';
import { decideUpdate, stateQuery } from '../../src/shared/messages';
import { startSampleIntent, useTestWorld, waitFor } from '../helpers/env';
import { startReceiver, type Received } from '../helpers/webhook-receiver';

/**
 * Notifications from a real worker: the ledger events of a real intent reach a signed webhook
 * and a Slack-shaped endpoint; a failing, refusing or hanging endpoint never holds the intent up
 * and ends as a dead letter; events of no intent go to the worker's own channels, once each.
 */

const SECRET = 'notification-signing-key-for-tests';
let receiver: Awaited<ReturnType<typeof startReceiver>>;

const world = useTestWorld('notify', async () => {
  receiver = await startReceiver({ '/fails': 500, '/refuses': 404, '/hangs': 'hang' });
  process.env.WARDEN_TEST_HOOK_SECRET = SECRET;
  process.env.WARDEN_TEST_SLACK_URL = receiver.url('/slack');
  return {
    notify: [{ kind: 'webhook' as const, url: receiver.url('/worker') }],
    notifications: { everyMs: 200, attempts: 2, firstRetryMs: 200, timeoutMs: 6000 },
  };
});

afterAll(async () => {
  await receiver?.close();
});

function kinds(requests: Received[], intentId: string): string[] {
  return requests.filter((r) => r.json.intentId === intentId).map((r) => String(r.json.kind));
}

async function atGate(handle: WorkflowHandle, gate = 'merge') {
  return waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === gate ? true : undefined), 120_000, `the ${gate} gate`);
}

test('a gate, its decision and the merge reach a signed webhook and Slack, with the figures a person decides by', async () => {
  const { handle, id } = await startSampleIntent(world(), 'n', {
    notify: [
      { kind: 'webhook', url: receiver.url('/hook'), secretEnv: 'WARDEN_TEST_HOOK_SECRET' },
      { kind: 'slack', urlEnv: 'WARDEN_TEST_SLACK_URL' },
    ],
  });
  await atGate(handle);
  const opened = await waitFor(() => receiver.on('/hook').find((r) => r.json.intentId === id && r.json.kind === 'gate.opened'), 120_000, 'gate.opened at the webhook');
  expect(opened.json).toMatchObject({ gate: 'merge', title: `Intent ${id}: the merge gate is waiting for a decision`, fields: { Risk: expect.any(String), Spend: expect.stringMatching(/^\$/), Tests: expect.stringMatching(/^passed/) } });
  expect((opened.json.fields as Record<string, string>).Size).toMatch(/file\(s\)/);
  // Signed over timestamp.body with the shared secret; the delivery id is in the header and the body.
  const timestamp = String(opened.headers['x-warden-timestamp']);
  expect(opened.headers['x-warden-signature']).toBe(`sha256=${createHmac('sha256', SECRET).update(`${timestamp}.${opened.body}`).digest('hex')}`);
  expect(opened.headers['x-warden-delivery']).toBe(opened.json.deliveryId);
  expect(opened.body).not.toContain(SECRET);
  const slack = await waitFor(() => receiver.on('/slack').find((r) => JSON.stringify(r.json).includes(`Intent ${id}: the merge gate`)), 120_000, 'gate.opened at Slack');
  expect(slack.json.blocks).toEqual(expect.arrayContaining([expect.objectContaining({ type: 'header' }), expect.objectContaining({ type: 'section', fields: expect.any(Array) })]));

  expect(await handle.executeUpdate(decideUpdate, { args: [{ gate: 'merge', decision: 'approve', by: 'alice' }] })).toEqual({ accepted: true });
  expect((await handle.result()).status).toBe('merged');
  await waitFor(() => (kinds(receiver.on('/hook'), id).includes('intent.merged') ? true : undefined), 120_000, 'intent.merged');
  expect(kinds(receiver.on('/hook'), id).sort()).toEqual(['gate.decided', 'gate.opened', 'intent.merged']);
  const decided = receiver.on('/hook').find((r) => r.json.intentId === id && r.json.kind === 'gate.decided')!;
  expect(decided.json.title).toBe(`Intent ${id}: the merge gate was decided: approve by alice (unsigned)`);
  // Each delivery once: the ids are all different.
  const ids = receiver.on('/hook').filter((r) => r.json.intentId === id).map((r) => r.json.deliveryId);
  expect(new Set(ids).size).toBe(ids.length);
});

test('failing, refusing and hanging channels never delay the intent; each ends as a dead letter with its reason', async () => {
  const { handle, id } = await startSampleIntent(world(), 'n', {
    limits: { gateTimeout: '3s' },
    notify: [
      { kind: 'webhook', url: receiver.url('/fails') },
      { kind: 'webhook', url: receiver.url('/refuses') },
      { kind: 'webhook', url: receiver.url('/hangs') },
      { kind: 'webhook', url: receiver.url('/unset'), secretEnv: 'WARDEN_TEST_UNSET_SECRET' },
      { kind: 'webhook', url: receiver.url('/ok'), events: ['gate.timeout-near', 'gate.escalated', 'intent.rejected'] },
    ],
  });
  const outcome = await handle.result();
  expect(outcome).toMatchObject({ status: 'rejected', reason: 'no decision within 3s' });
  const closedAt = (await handle.describe()).closeTime!.getTime();
  const outbox = new NotificationOutbox(world().pool);
  await waitFor(() => (receiver.on('/hangs').some((r) => r.json.intentId === id) ? true : undefined), 120_000, 'the hanging endpoint to hold a request');

  // Each kind is delivered on its own, so on a busy machine they may arrive in any order.
  const wanted = ['gate.escalated', 'gate.timeout-near', 'intent.rejected'];
  await waitFor(() => (wanted.every((kind) => kinds(receiver.on('/ok'), id).includes(kind)) ? true : undefined), 120_000, 'the three kinds at /ok');
  expect(kinds(receiver.on('/ok'), id).sort()).toEqual(wanted);

  // gate.opened, gate.timeout-near, gate.escalated, gate.decided and intent.rejected, to each bad channel.
  const letters = await waitFor(async () => {
    const all = await outbox.deadLetters(id);
    return all.filter((l) => l.channel.endsWith('/hangs')).length === 5 ? all : undefined;
  }, 180_000, 'the dead letters of the hanging channel');
  const of = (path: string) => letters.filter((l) => l.channel.endsWith(path));
  // The intent was over before the hanging endpoint gave up on its first notification.
  expect(Math.min(...of('/hangs').map((l) => Date.parse(l.at!)))).toBeGreaterThan(closedAt);
  expect(of('/fails')).toHaveLength(5);
  expect(of('/fails')[0]).toMatchObject({ attempts: 2, error: expect.stringContaining('answered 500') });
  expect(of('/refuses')[0]).toMatchObject({ attempts: 1, error: expect.stringContaining('answered 404') });
  expect(of('/hangs')[0]).toMatchObject({ attempts: 2, error: expect.stringContaining('no answer within 6s') });
  expect(of('/unset')[0]).toMatchObject({ attempts: 1, error: "the webhook's signing secret: $WARDEN_TEST_UNSET_SECRET is not set in the worker's environment" });
  // A refusal is not retried: one request per notification.
  expect(receiver.on('/refuses').filter((r) => r.json.intentId === id)).toHaveLength(5);
  expect(receiver.on('/unset')).toHaveLength(0);
  // The dead letter is written before its safety event, so the last event may trail the letters.
  const undelivered = async () => (await world().pool.query("SELECT count(*)::int AS n FROM safety_events WHERE intent_id = $1 AND event_type = 'NOTIFICATION_UNDELIVERED'", [id])).rows[0].n as number;
  await waitFor(async () => ((await undelivered()) >= 20 ? true : undefined), 60_000, 'a NOTIFICATION_UNDELIVERED event for each dead letter');
  expect(await undelivered()).toBe(20);
});

test("events of no intent go to the worker's channels, each told once however many dispatchers race", async () => {
  const before = receiver.on('/worker').length;
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const id = `00000000-0000-8000-8000-00000000000${i}`;
    ids.push(id);
    await world().ledger.audit.recordSafetyEvent({
      id,
      timestamp: new Date(),
      eventType: 'CIRCUIT_TRIPPED',
      severity: 'high',
      reason: `endpoint ${i} failed 5 calls in a row`,
      breakerId: `model:test-${i}`,
      metadata: {},
    });
  }
  // Two more dispatchers besides the worker's, racing it over the same rows.
  const racers = [0, 1].map(
    () => new NotificationDispatcher({ client: world().client, outbox: new NotificationOutbox(world().pool), taskQueue: world().taskQueue, logger: pino({ level: 'silent' }), channels: [{ kind: 'webhook', url: receiver.url('/worker') }] }),
  );
  await Promise.all([...racers.map((d) => d.round()), ...racers.map((d) => d.round())]);
  const told = await waitFor(() => {
    const got = receiver.on('/worker').slice(before);
    return got.length >= 5 ? got : undefined;
  }, 120_000, 'five breaker notifications');
  await new Promise((r) => setTimeout(r, 1000));
  expect(receiver.on('/worker').slice(before)).toHaveLength(5);
  expect(told.map((r) => r.json.kind)).toEqual(Array(5).fill('breaker.opened'));
  expect(told.map((r) => r.json.title).sort()).toEqual(ids.map((_, i) => `Circuit model:test-${i} opened`));
  const { rows } = await world().pool.query('SELECT count(*)::int AS n FROM notification_dispatches WHERE event_id = ANY($1::uuid[])', [ids]);
  expect(rows[0].n).toBe(5);
});
