import { mkdtempSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import type { WorkflowHandle } from '@temporalio/client';
import { initApproverKey } from '../../src/client/approver-keys';
import { startWebApp, type WebApp } from '../../src/client/web/server';
import { gatePageUrl, mintLinkToken } from '../../src/shared/decision-links';
import { stateQuery } from '../../src/shared/messages';
import { gateLinks } from '../../src/workers/gate-links';
import { GateViewLinks } from '../../src/ledger/gate-view-links';
import { git, startSampleIntent, useTestWorld, waitFor } from '../helpers/env';
import { startReceiver } from '../helpers/webhook-receiver';
import { hiddenOf, post } from '../helpers/gate-forms';

/**
 * The web app against a real worker: a notification's link opens the gate's page with its review
 * package and diff, decides once as the link's approver (signed with their key), and every bad
 * link (forged, expired, reused, for another gate) is refused with a clear page and a ledger row.
 */

const secret = randomBytes(32);
const keysDir = mkdtempSync(path.join(tmpdir(), 'warden-web-keys-'));
const alice = initApproverKey(keysDir, 'alice');
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let app: WebApp;

const world = useTestWorld('web-app', async () => {
  receiver = await startReceiver();
  app = await startWebApp({ client: world().client, ledger: world().ledger, linkSecret: { secret }, operator: 'olga', keysDir, host: '127.0.0.1', port: 0, logger: pino({ level: 'silent' }) });
  return { gateLink: gateLinks({ baseUrl: app.url, operator: 'nobody', linkSecret: { secret }, views: new GateViewLinks(world().pool) }), notifications: { everyMs: 200 } };
});

afterAll(async () => {
  await app?.close();
  await receiver?.close();
});

async function start(extra: Parameters<typeof startSampleIntent>[2] = {}) {
  const started = await startSampleIntent(world(), 'w', {
    notify: [{ kind: 'webhook', url: receiver.url('/alice'), approver: 'alice' }],
    approvals: { keys: { alice: alice.publicKey } },
    ...extra,
  });
  await atGate(started.handle, extra.gates?.lld ? 'lld' : 'merge');
  return started;
}

async function atGate(handle: WorkflowHandle, gate = 'merge') {
  return waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === gate ? true : undefined), 120_000, `the ${gate} gate`);
}

/** The link the gate's notification carried: one that decides, as the channel's approver. */
async function linkFor(intentId: string): Promise<string> {
  const told = await waitFor(() => receiver.on('/alice').find((r) => r.json.intentId === intentId && r.json.kind === 'gate.opened'), 120_000, 'the gate.opened notification');
  expect(told.json).toMatchObject({ linkKind: 'decide', linkNote: expect.stringMatching(/^The link decides once, as alice, until /) });
  return String(told.json.link);
}

async function refusals(intentId: string): Promise<string[]> {
  const { rows } = await world().pool.query("SELECT reason FROM safety_events WHERE event_type = 'DECISION_LINK_REFUSED' AND intent_id = $1 ORDER BY recorded_at", [intentId]);
  return rows.map((r: { reason: string }) => r.reason);
}

test("a notification's link shows the review package and the diff, and decides once, signed, as its approver", async () => {
  const { handle, id, repo } = await start();
  const link = await linkFor(id);
  expect(link.startsWith(`${app.url}/gates/${id}/merge?t=`)).toBe(true);
  const page = await fetch(link);
  expect(page.status).toBe(200);
  expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
  const html = await page.text();
  expect(html).toContain('Deciding as <strong>alice</strong>');
  expect(html).toContain("signed with alice's key on this machine");
  expect(html).toContain('Add slugify');
  expect(html).toMatch(/<h2>Files changed<\/h2><table><tr><td>lib\//);
  expect(html).toMatch(/<span class="add">\+/);

  expect(html).toContain('checked before the merge: run: COMMAND');
  const decided = await post(link, { ...hiddenOf(html), decision: 'approve-with-conditions', conditions: 'max-files: 5\r\nonly-paths: lib/**' });
  expect(decided).toMatchObject({ status: 200, text: expect.stringContaining(`The merge gate of ${id} is approved with 2 condition(s) by alice.`) });
  expect((await handle.result()).status).toBe('merged');
  expect(git(repo, 'log', '-1', '--format=%s', 'main')).toContain(`merge intent ${id}`);
  const { rows } = await world().pool.query("SELECT decided_by, decision, conditions FROM gate_decisions WHERE intent_id = $1 AND gate = 'merge'", [id]);
  expect(rows).toEqual([{ decided_by: 'alice', decision: 'approve-with-conditions', conditions: ['max-files: 5', 'only-paths: lib/**'] }]);
  const signed = await world().pool.query("SELECT metadata->>'signed' AS signed FROM safety_events WHERE intent_id = $1 AND event_type = 'GATE_DECIDED'", [id]);
  expect(signed.rows).toEqual([{ signed: 'true' }]);

  // The gate is closed: the same link decides nothing again, and the attempt is on record. The
  // intent has ended, so the server's description and the ledger say so: no query replays its history.
  const workflows = world().client.workflow;
  const getHandle = workflows.getHandle.bind(workflows);
  const noQueries = jest.spyOn(workflows, 'getHandle').mockImplementation((...args: Parameters<typeof getHandle>) => {
    const handle = getHandle(...args);
    return { ...handle, query: () => Promise.reject(new Error('an ended intent was queried')) } as unknown as ReturnType<typeof getHandle>;
  });
  let again, reopened;
  try {
    again = await post(link, { ...hiddenOf(html), decision: 'reject', reason: 'changed my mind' });
    reopened = await fetch(link);
  } finally {
    noQueries.mockRestore();
  }
  expect(again).toMatchObject({ status: 409, text: expect.stringContaining('is not waiting for a decision') });
  // Its page, opened again, says who decided the gate and how the intent ended: the ledger's record.
  expect(reopened.status).toBe(200);
  const reopenedHtml = await reopened.text();
  expect(reopenedHtml).toContain('This gate is not waiting for a decision: approve-with-conditions by alice (signed)');
  expect(reopenedHtml).toContain('The intent is merged.');
  expect(reopenedHtml).toContain('<strong>Goal:</strong> Add slugify');
  expect(reopenedHtml).toContain('This link decided already');
  expect(await refusals(id)).toEqual(['a decision from a link for the merge gate, which is not waiting (the intent is merged): nothing was decided']);
});

test('a link decides once even when the workflow refused its first decision', async () => {
  const { handle, id } = await start({ gates: { merge: { approvers: ['bob'] } } });
  const link = await linkFor(id);
  const html = await (await fetch(link)).text();
  const first = await post(link, { ...hiddenOf(html), decision: 'approve' });
  expect(first).toMatchObject({ status: 409, text: expect.stringContaining('alice may not decide the merge gate (approvers: bob)') });
  const second = await post(link, { ...hiddenOf(html), decision: 'approve' });
  expect(second).toMatchObject({ status: 403, text: expect.stringContaining('this link decided already: each link decides once') });
  expect(await refusals(id)).toEqual(['this link decided already: each link decides once']);
  expect((await handle.query(stateQuery)).pendingGate?.gate).toBe('merge');
  await handle.cancel();
});

test('forged, expired and misdirected links, a form from elsewhere, and no link at all are refused with a reason', async () => {
  const { handle, id } = await start();
  const link = await linkFor(id);
  const token = new URL(link).searchParams.get('t')!;
  const state = await handle.query(stateQuery);

  const forged = gatePageUrl(app.url, id, 'merge', `${token.slice(0, -3)}${token.endsWith('AAA') ? 'BBB' : 'AAA'}`);
  const forgedPage = await fetch(forged);
  expect(forgedPage.status).toBe(403);
  expect(await forgedPage.text()).toContain('its signature does not match');

  const expired = mintLinkToken(secret, { intentId: id, gate: 'merge', gateOpenedAt: state.pendingGate!.requestedAt, approver: 'alice', expiresAt: new Date(Date.now() - 1000).toISOString() });
  expect(await (await fetch(gatePageUrl(app.url, id, 'merge', expired))).text()).toMatch(/the link expired at /);

  const otherGate = mintLinkToken(secret, { intentId: id, gate: 'lld', gateOpenedAt: state.pendingGate!.requestedAt, approver: 'alice', expiresAt: new Date(Date.now() + 60_000).toISOString() });
  expect(await (await fetch(gatePageUrl(app.url, id, 'merge', otherGate))).text()).toContain(`the link was made for the lld gate of ${id}, not this page`);

  const earlier = mintLinkToken(secret, { intentId: id, gate: 'merge', gateOpenedAt: '2026-01-01T00:00:00.000Z', approver: 'alice', expiresAt: new Date(Date.now() + 60_000).toISOString() });
  expect(await (await fetch(gatePageUrl(app.url, id, 'merge', earlier))).text()).toContain('the link was made for an earlier opening of the merge gate');

  // A valid link, but the form's CSRF token is missing: a page elsewhere cannot post a decision.
  expect(await post(link, { t: token, decision: 'approve' })).toMatchObject({ status: 403, text: expect.stringContaining('The form did not come from this page') });
  // No link and no session: nothing to see, nothing to decide.
  expect((await fetch(gatePageUrl(app.url, id, 'merge'))).status).toBe(401);
  expect((await fetch(`${app.url}/`)).status).toBe(401);

  expect(await refusals(id)).toEqual([
    'the link was not made by this Warden (its signature does not match): it may have been altered',
    expect.stringMatching(/^the link expired at /),
    `the link was made for the lld gate of ${id}, not this page`,
    expect.stringMatching(/^the link was made for an earlier opening of the merge gate/),
  ]);
  expect((await handle.query(stateQuery)).pendingGate?.gate).toBe('merge');
  await handle.cancel();
});

test("the operator's session shows the inbox of waiting gates and decides as the operator", async () => {
  const { handle, id } = await start({ gates: { merge: { approvers: ['olga'] } } });
  const entry = await fetch(app.operatorUrl, { redirect: 'manual' });
  expect(entry.status).toBe(303);
  const cookie = entry.headers.get('set-cookie')!.split(';')[0]!;
  expect(entry.headers.get('set-cookie')).toMatch(/HttpOnly; SameSite=Strict/);
  const inbox = await waitFor(async () => {
    const html = await (await fetch(`${app.url}/`, { headers: { cookie } })).text();
    return html.includes(`/gates/${id}/merge`) ? html : undefined;
  }, 120_000, 'the gate in the inbox');
  expect(inbox).toContain('Waiting for a decision');
  const page = await (await fetch(gatePageUrl(app.url, id, 'merge'), { headers: { cookie } })).text();
  expect(page).toContain('Deciding as <strong>olga</strong> (this machine’s operator)');
  expect(page).toContain('unsigned: olga has no key on this machine');
  const decided = await post(gatePageUrl(app.url, id, 'merge'), { ...hiddenOf(page), decision: 'reject', reason: 'not this week' }, { cookie });
  expect(decided).toMatchObject({ status: 200, text: expect.stringContaining('is rejected by olga') });
  expect(await handle.result()).toMatchObject({ status: 'rejected', reason: 'not this week' });
});

test("the lld gate's page shows the design to edit; the edited version is approved, signed, and is what the spec stage reads", async () => {
  const { handle, id, repo } = await start({ gates: { lld: { minRisk: 'LOW' } } });
  const link = await waitFor(() => receiver.on('/alice').find((r) => r.json.intentId === id && r.json.kind === 'gate.opened' && r.json.gate === 'lld'), 120_000, 'the lld notification');
  const html = await (await fetch(String(link.json.link))).text();
  expect(html).toContain('<h2>The document</h2><table><tr><th>Checks</th><td>passed: its Files and Tests sections are there');
  const textarea = /<textarea name="document" rows="20" required>([\s\S]*?)<\/textarea>/.exec(html);
  expect(textarea?.[1]).toContain('# Low-level design');
  expect(html).toContain('Request changes');
  const edited = `${textarea![1]!.replace(/&amp;/g, '&').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&#39;/g, "'")}\n## Edited on the phone\nKeep slugify pure.\n`;
  const decided = await post(String(link.json.link), { ...hiddenOf(html), decision: 'approve-with-edits', document: edited });
  expect(decided).toMatchObject({ status: 200, text: expect.stringContaining('is approved with your edits by alice') });
  await atGate(handle, 'merge');
  expect(git(repo, 'show', `warden/${id}:docs/lineage/active/${id}/03-spec.prompt.md`)).toContain('Keep slugify pure.');
  const signed = await world().pool.query("SELECT metadata->>'signed' AS signed FROM safety_events WHERE intent_id = $1 AND event_type = 'GATE_DECIDED' AND metadata->>'gate' = 'lld'", [id]);
  expect(signed.rows).toEqual([{ signed: 'true' }]);
  await handle.cancel();
});
