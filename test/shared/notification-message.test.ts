import { createHmac } from 'node:crypto';
import { buildNotification, slackMessage, webhookRequest } from '../../src/activities/notifications/message';
import type { OutboxEvent } from '../../src/ledger/notification-outbox';
import { createRedactor } from '../../src/shared/redact';

const gateOpened: OutboxEvent = {
  id: '11111111-1111-8111-8111-111111111111',
  timestamp: '2026-11-26T10:00:00.000Z',
  eventType: 'GATE_REQUESTED',
  severity: 'info',
  intentId: 'add-retries',
  stage: 'review',
  reason: 'Merge warden/add-retries into main?',
  metadata: { gate: 'merge', risk: 'MEDIUM', spendUsd: '0.420000', tests: { passed: true, summary: '12 passed' }, predicted: { files: 2, lines: 40 }, actual: { files: 3, lines: 61 }, timeoutAt: '2026-11-27T10:00:00.000Z' },
};
const plain = { redact: (t: string) => t };

const decideLink = { kind: 'decide' as const, url: 'http://localhost:7431/gates/add-retries/merge?t=T', approver: 'olga', asOperator: true, expiresAt: '2026-11-27T10:00:00.000Z' };
const viewLink = { kind: 'view' as const, url: 'http://localhost:7431/gates/add-retries/merge?v=V', why: 'Warden has no secret to sign decision links with (EROFS)' };

test('a gate notification carries risk, spend, tests, size and the link, and says what the link does', () => {
  const n = buildNotification(gateOpened, 'gate.opened', { ...plain, link: decideLink });
  expect(n.title).toBe('Intent add-retries: the merge gate is waiting for a decision');
  expect(n.fields).toEqual({ Risk: 'MEDIUM', Spend: '$0.420000', Tests: 'passed (12 passed)', Size: '3 file(s), 61 line(s) (predicted 2 / 40)', 'Times out': '2026-11-27T10:00:00.000Z', Stage: 'review' });
  expect(n).toMatchObject({ link: decideLink.url, linkKind: 'decide', linkNote: 'The link decides once, as olga, the operator (no approver is named for this channel), until 2026-11-27T10:00:00.000Z.' });
  expect(buildNotification(gateOpened, 'gate.opened', { ...plain, link: { ...decideLink, approver: 'alice', asOperator: false } }).linkNote).toBe('The link decides once, as alice, until 2026-11-27T10:00:00.000Z.');

  const view = buildNotification(gateOpened, 'gate.opened', { ...plain, link: viewLink });
  expect(view).toMatchObject({ link: viewLink.url, linkKind: 'view' });
  expect(view.linkNote).toBe(
    'The link only shows the gate, until it closes: Warden has no secret to sign decision links with (EROFS). Decide with warden approve add-retries --gate merge (or warden reject add-retries --gate merge --reason "…").',
  );
  expect(buildNotification(gateOpened, 'gate.opened', plain)).not.toHaveProperty('linkKind');
});

test("Slack's button and the line above it say whether the link decides or only shows the gate", () => {
  const texts = (link: typeof decideLink | typeof viewLink) => JSON.stringify(slackMessage(buildNotification(gateOpened, 'gate.opened', { ...plain, link })).blocks.slice(-2));
  expect(texts(decideLink)).toContain('Review and decide');
  expect(texts(decideLink)).toContain('The link decides once, as olga');
  expect(texts(viewLink)).toContain('Review (read-only)');
  expect(texts(viewLink)).toContain('The link only shows the gate');
  expect(texts(viewLink)).not.toContain('Review and decide');
});

test('secrets in what an event says are redacted before anything leaves', () => {
  const redact = createRedactor({ PAYMENTS_API_KEY: 'pk_live_0123456789abcdef' });
  const n = buildNotification({ ...gateOpened, reason: 'failed calling with pk_live_0123456789abcdef and sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAA' }, 'intent.failed', { redact });
  expect(JSON.stringify(n)).not.toMatch(/pk_live_0123|sk-ant-api03-AAAA/);
  expect(n.text).toContain('[redacted]');
});

test('the webhook body is signed over timestamp.body; without a secret there is no signature', () => {
  const n = buildNotification(gateOpened, 'gate.opened', plain);
  const signed = webhookRequest(n, 'delivery-1', 'shh', new Date(1_700_000_000_000));
  expect(signed.headers['x-warden-timestamp']).toBe('1700000000');
  expect(signed.headers['x-warden-signature']).toBe(`sha256=${createHmac('sha256', 'shh').update(`1700000000.${signed.body}`).digest('hex')}`);
  expect(JSON.parse(signed.body)).toMatchObject({ deliveryId: 'delivery-1', kind: 'gate.opened', intentId: 'add-retries' });
  expect(webhookRequest(n, 'delivery-1', undefined, new Date()).headers['x-warden-signature']).toBeUndefined();
});

test("a Slack message fits Slack's limits however long the event's text, and escapes its control characters", () => {
  const long = buildNotification({ ...gateOpened, reason: `<script> & ${'x'.repeat(10_000)}`, metadata: { ...gateOpened.metadata, risk: 'y'.repeat(5000) } }, 'gate.opened', { ...plain, link: { ...decideLink, url: 'http://localhost:7431/g' } });
  const message = slackMessage(long);
  const blocks = message.blocks as Array<{ type: string; text?: { text: string }; fields?: Array<{ text: string }>; elements?: Array<{ url?: string }> }>;
  expect(blocks[0]!.text!.text.length).toBeLessThanOrEqual(150);
  expect(blocks[1]!.text!.text.length).toBeLessThanOrEqual(3000);
  expect(blocks[1]!.text!.text.startsWith('&lt;script&gt; &amp; ')).toBe(true);
  const fields = blocks.find((b) => b.fields)!.fields!;
  expect(fields.length).toBeLessThanOrEqual(10);
  for (const f of fields) expect(f.text.length).toBeLessThanOrEqual(2000);
  expect(blocks.at(-1)).toMatchObject({ type: 'actions', elements: [{ url: 'http://localhost:7431/g' }] });
  expect(JSON.stringify(message).length).toBeLessThan(40_000);
});

test("a notification's text shows the escape sequences a goal or an agent's answer held, never sends them", () => {
  const hostile: OutboxEvent = {
    ...gateOpened,
    reason: 'Merge?\x1b[2J\x1b]0;pwned\x07 \u009b31m',
    suggestion: 'run \x1b[8mhidden',
    metadata: { ...gateOpened.metadata, tests: { passed: false, summary: '\x1b[32m12 passed' } },
  };
  const n = buildNotification(hostile, 'gate.opened', plain);
  expect(n.text).toBe('Merge?\\x1b[2J\\x1b]0;pwned\\x07 \\x9b31m');
  expect(n.suggestion).toBe('run \\x1b[8mhidden');
  expect(n.fields.Tests).toBe('failed (\\x1b[32m12 passed)');
  // eslint-disable-next-line no-control-regex -- looking for control characters
  expect(JSON.stringify(slackMessage(n))).not.toMatch(/\\u001b|\x1b|\u009b/);
});
