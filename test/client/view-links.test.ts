import { mkdtempSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import type { WorkflowHandle } from '@temporalio/client';
import { sendDecision } from '../../src/client/intents';
import { startWebApp, type WebApp } from '../../src/client/web/server';
import { GateViewLinks } from '../../src/ledger/gate-view-links';
import { linkSecretOrWhyNot } from '../../src/runtime/link-secret';
import { gatePageUrl, mintLinkToken } from '../../src/shared/decision-links';
import { stateQuery } from '../../src/shared/messages';
import { gateLinks } from '../../src/workers/gate-links';
import { git, startSampleIntent, useTestWorld, waitFor } from '../helpers/env';
import { startReceiver } from '../helpers/webhook-receiver';
import { post } from '../helpers/gate-forms';

/**
 * Where no decision link can be made (no link secret: here the approvers' folder sits under a
 * file, as a read-only home would refuse it), a gate's notification still links to its page:
 * a view link that shows the review and the diff while the gate waits, says why it cannot decide
 * and what to run instead, cannot decide itself, and ends when the gate closes.
 */

// mkdir under a file fails for every user, root too.
const noKeysHome = path.join(mkdtempSync(path.join(tmpdir(), 'warden-no-secret-')), 'a-file');
writeFileSync(noKeysHome, '');
const linkSecret = linkSecretOrWhyNot({ WARDEN_APPROVER_KEYS: path.join(noKeysHome, 'approvers') });
const keysDir = mkdtempSync(path.join(tmpdir(), 'warden-view-keys-'));
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let app: WebApp;

const world = useTestWorld('view-links', async () => {
  receiver = await startReceiver();
  app = await startWebApp({ client: world().client, ledger: world().ledger, linkSecret, operator: 'olga', keysDir, host: '127.0.0.1', port: 0, logger: pino({ level: 'silent' }) });
  return { gateLink: gateLinks({ baseUrl: app.url, operator: 'olga', linkSecret, views: new GateViewLinks(world().pool) }), notifications: { everyMs: 200 } };
});

afterAll(async () => {
  await app?.close();
  await receiver?.close();
});

async function atGate(handle: WorkflowHandle) {
  return waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 60_000, 'the merge gate');
}

async function refusals(intentId: string): Promise<string[]> {
  const { rows } = await world().pool.query("SELECT reason FROM safety_events WHERE event_type = 'DECISION_LINK_REFUSED' AND intent_id = $1 ORDER BY recorded_at", [intentId]);
  return rows.map((r: { reason: string }) => r.reason);
}

test('without a link secret the link shows the gate read-only, says why and what to run, cannot decide, and ends when the gate closes', async () => {
  expect(linkSecret.missing).toMatch(/^Warden has no secret to sign decision links with \(.*ENOTDIR/);
  const { handle, id, repo } = await startSampleIntent(world(), 'v', { notify: [{ kind: 'webhook', url: receiver.url('/hook') }] });
  await atGate(handle);
  const told = await waitFor(() => receiver.on('/hook').find((r) => r.json.intentId === id && r.json.kind === 'gate.opened'), 20_000, 'the gate.opened notification');
  expect(told.json).toMatchObject({ linkKind: 'view', linkNote: expect.stringContaining(`The link only shows the gate, until it closes: Warden has no secret to sign decision links with`) });
  expect(told.json.linkNote).toContain(`Decide with warden approve ${id} --gate merge`);
  const link = String(told.json.link);
  expect(link.startsWith(`${app.url}/gates/${id}/merge?v=`)).toBe(true);
  // The ledger keeps the token's hash and the opening it shows, not the token.
  const viewToken = new URL(link).searchParams.get('v')!;
  const { rows } = await world().pool.query('SELECT token_hash, gate, gate_opened_at FROM gate_view_links WHERE intent_id = $1', [id]);
  expect(rows).toEqual([{ token_hash: expect.stringMatching(/^[0-9a-f]{64}$/), gate: 'merge', gate_opened_at: (await handle.query(stateQuery)).pendingGate!.requestedAt }]);
  expect(JSON.stringify(rows)).not.toContain(viewToken);

  // The page: the review and the diff, why it cannot decide and what to run, and no form.
  const page = await fetch(link);
  expect(page.status).toBe(200);
  const html = await page.text();
  expect(html).toMatch(/<h2>Files changed<\/h2><table><tr><td>lib\//);
  expect(html).toMatch(/<span class="add">\+/);
  expect(html).toContain('This link shows the gate but cannot decide it: Warden has no secret to sign decision links with');
  expect(html).toContain(`<code>warden approve ${id} --gate merge</code>`);
  expect(html).not.toContain('<form');
  expect(html).not.toContain('Deciding as');

  // A view token cannot decide, posted as itself or as a decision link's token; nor can a made-up one show anything.
  const action = gatePageUrl(app.url, id, 'merge');
  expect(await post(action, { v: viewToken, decision: 'approve' })).toMatchObject({ status: 403, text: expect.stringContaining('a view link shows the gate only: it cannot decide') });
  expect(await post(action, { t: viewToken, decision: 'approve' })).toMatchObject({ status: 403, text: expect.stringContaining('this web app cannot check decision links') });
  // Nor is a decision link taken here, signed or not: there is no secret to check it with.
  const signed = mintLinkToken(randomBytes(32), { intentId: id, gate: 'merge', gateOpenedAt: (await handle.query(stateQuery)).pendingGate!.requestedAt, approver: 'olga', expiresAt: new Date(Date.now() + 60_000).toISOString() });
  expect((await fetch(gatePageUrl(app.url, id, 'merge', signed))).status).toBe(403);
  expect((await fetch(gatePageUrl(app.url, id, 'merge', `${viewToken}x`, 'view'))).status).toBe(403);
  expect((await handle.query(stateQuery)).pendingGate?.gate).toBe('merge');
  expect(await refusals(id)).toEqual([
    'a view link shows the gate only: it cannot decide',
    expect.stringMatching(/^this web app cannot check decision links: /),
    expect.stringMatching(/^this web app cannot check decision links: /),
    'the link is not a link Warden made (it may have been cut short when copied)',
  ]);

  // Decided the way the page says (as warden approve does); the link has ended with the gate.
  await sendDecision(world().client, id, { gate: 'merge', decision: 'approve', by: 'olga' }, { keysDir });
  expect((await handle.result()).status).toBe('merged');
  expect(git(repo, 'log', '-1', '--format=%s', 'main')).toContain(`merge intent ${id}`);
  const ended = await fetch(link);
  expect(ended.status).toBe(410);
  expect(await ended.text()).toContain(`It showed the merge gate of ${id} while it waited`);
}, 120_000);
