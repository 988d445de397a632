import { mkdtempSync, statSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gatePageUrl, linkExpiry, MAX_LINK_LIFETIME_MS, mintLinkToken, readLinkToken } from '../../src/shared/decision-links';
import { linkSecretPath, readLinkSecret } from '../../src/runtime/link-secret';
import { gateLinks } from '../../src/workers/gate-links';
import type { OutboxEvent } from '../../src/ledger/notification-outbox';
import { GateViewLinks } from '../../src/ledger/gate-view-links';
import pg from 'pg';

const secret = Buffer.from('a-secret-of-at-least-thirty-two-characters');
const claims = { intentId: 'add-retries', gate: 'merge', gateOpenedAt: '2026-11-26T10:00:00.000Z', approver: 'alice', expiresAt: '2026-11-27T10:00:00.000Z' };

test('a token reads back its claims under its secret; another secret, an edit or the expiry refuse it', () => {
  const token = mintLinkToken(secret, claims);
  expect(readLinkToken(secret, token, new Date('2026-11-26T12:00:00Z'))).toEqual({ ok: true, claims: { ...claims, nonce: expect.stringMatching(/^[0-9a-f]{32}$/) } });
  expect(mintLinkToken(secret, claims)).not.toBe(token); // a fresh nonce each time
  expect(readLinkToken(Buffer.from('another-secret-of-thirty-two-characters!'), token)).toMatchObject({ ok: false, reason: expect.stringContaining('signature does not match') });
  const [body, mac] = token.split('.');
  const edited = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(body!, 'base64url').toString()), approver: 'mallory' })).toString('base64url');
  expect(readLinkToken(secret, `${edited}.${mac}`)).toMatchObject({ ok: false, reason: expect.stringContaining('signature does not match') });
  expect(readLinkToken(secret, token, new Date('2026-11-28T00:00:00Z'))).toMatchObject({ ok: false, reason: 'the link expired at 2026-11-27T10:00:00.000Z' });
  expect(readLinkToken(secret, 'not-a-token')).toMatchObject({ ok: false, reason: expect.stringContaining('not a decision link') });
});

test('a link lives as long as its gate, at most a week', () => {
  const now = new Date('2026-11-26T00:00:00Z');
  expect(linkExpiry('2026-11-26T08:00:00.000Z', now)).toBe('2026-11-26T08:00:00.000Z');
  expect(Date.parse(linkExpiry('2027-01-01T00:00:00.000Z', now)) - now.getTime()).toBe(MAX_LINK_LIFETIME_MS);
  expect(gatePageUrl('https://warden.example.com/base', 'add retries', 'merge', 'T')).toBe('https://warden.example.com/base/gates/add%20retries/merge?t=T');
});

test("a gate's notification link decides as the channel's approver, else as the operator; never without a token", async () => {
  const event: OutboxEvent = { id: 'e', timestamp: '', eventType: 'GATE_REQUESTED', severity: 'info', intentId: 'i-1', reason: '', metadata: { gate: 'merge', requestedAt: claims.gateOpenedAt, timeoutAt: '2099-01-01T00:00:00.000Z' } };
  const webhook = { kind: 'webhook' as const, url: 'https://hooks.example.com/x' };
  // With a secret no view link is made: the store's pool is never connected (view-links.test.ts covers it).
  const links = gateLinks({ baseUrl: 'http://127.0.0.1:7431', operator: 'olga', linkSecret: { secret }, views: new GateViewLinks(new pg.Pool()) });
  const forBob = await links(event, { ...webhook, approver: 'bob' });
  expect(forBob).toMatchObject({ kind: 'decide', approver: 'bob', asOperator: false });
  const url = new URL(forBob!.url);
  expect(url.pathname).toBe('/gates/i-1/merge');
  const bobs = readLinkToken(secret, url.searchParams.get('t')!);
  expect(bobs).toMatchObject({ ok: true, claims: { approver: 'bob', gateOpenedAt: claims.gateOpenedAt } });
  expect(bobs.claims).not.toHaveProperty('asOperator');

  const forNobody = await links(event, webhook);
  expect(forNobody).toMatchObject({ kind: 'decide', approver: 'olga', asOperator: true, expiresAt: expect.any(String) });
  expect(readLinkToken(secret, new URL(forNobody!.url).searchParams.get('t')!)).toMatchObject({ ok: true, claims: { approver: 'olga', asOperator: true } });

  // An event that names no opening of the gate gets no link rather than one without a token.
  expect(await links({ ...event, metadata: { gate: 'merge' } }, webhook)).toBeUndefined();
});

test('the link secret: from WARDEN_LINK_SECRET (long enough), else a 0600 file made once and kept; a readable or short file is refused', () => {
  expect(() => readLinkSecret({ WARDEN_LINK_SECRET: 'short' })).toThrow(/at least 32 characters/);
  expect(readLinkSecret({ WARDEN_LINK_SECRET: 'x'.repeat(32) })).toEqual(Buffer.from('x'.repeat(32)));
  const env = { WARDEN_APPROVER_KEYS: path.join(mkdtempSync(path.join(tmpdir(), 'warden-links-')), 'keys') };
  const first = readLinkSecret(env);
  expect(first.length).toBe(64);
  expect(statSync(linkSecretPath(env)).mode & 0o777).toBe(0o600);
  expect(readLinkSecret(env)).toEqual(first);
  chmodSync(linkSecretPath(env), 0o644);
  expect(() => readLinkSecret(env)).toThrow(/can be read by others/);
  chmodSync(linkSecretPath(env), 0o600);
  writeFileSync(linkSecretPath(env), 'x');
  expect(() => readLinkSecret(env)).toThrow(/shorter than 32 characters/);
});
