/**
 * Deciding from a phone, in a real browser: a gate's notification reaches a webhook; headless
 * Chromium, sized as a phone, opens the link in it, reads the review package, asks for changes;
 * impl and review run again and the gate opens again with a new notification; its link approves;
 * the intent merges.
 *
 * Needs Debian's `chromium` (the test setup installs it where it can) or WARDEN_TEST_CHROMIUM.
 * Screenshots go to .warden/screenshots/; with WARDEN_UPDATE_SCREENSHOTS=1 they replace the
 * images of docs/gates.md in docs/images/ instead.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import type { WardenWorker } from '../../src/workers/host-worker';
import { initApproverKey } from '../../src/client/approver-keys';
import { startWebApp, type WebApp } from '../../src/client/web/server';
import { stateQuery } from '../../src/shared/messages';
import { gateLinks } from '../../src/workers/gate-links';
import { GateViewLinks } from '../../src/ledger/gate-view-links';
import { createTestWorld, git, startSampleIntent, waitFor, type TestWorld } from '../helpers/env';
import { startReceiver } from '../helpers/webhook-receiver';
import { describeWith, programPath } from '../setup/prerequisites';

const repoRoot = path.resolve(__dirname, '..', '..');
const SCREENSHOT_DIR = process.env.WARDEN_UPDATE_SCREENSHOTS === '1' ? path.join(repoRoot, 'docs', 'images') : path.join(repoRoot, '.warden', 'screenshots');
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

let world: TestWorld | undefined;
let worker: WardenWorker | undefined;
let running: Promise<void> | undefined;
let app: WebApp | undefined;
let receiver: Awaited<ReturnType<typeof startReceiver>> | undefined;
let browser: BrowserContext | undefined;
let profileDir: string | undefined;

describeWith('chromium', 'deciding a gate from a phone', () => {
  const secret = randomBytes(32);
  const keysDir = mkdtempSync(path.join(tmpdir(), 'warden-phone-keys-'));
  const ada = initApproverKey(keysDir, 'ada');

  beforeAll(async () => {
    world = await createTestWorld('phone');
    receiver = await startReceiver();
    app = await startWebApp({ client: world.client, ledger: world.ledger, linkSecret: { secret }, operator: 'nobody', keysDir, host: '127.0.0.1', port: 0, logger: pino({ level: 'silent' }) });
    worker = await world.worker({ gateLink: gateLinks({ baseUrl: app.url, operator: 'nobody', linkSecret: { secret }, views: new GateViewLinks(world.pool) }), notifications: { everyMs: 200 } });
    running = worker.run();
    profileDir = mkdtempSync(path.join(tmpdir(), 'warden-chromium-'));
    browser = await chromium.launchPersistentContext(profileDir, {
      executablePath: programPath('chromium')!,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: 390, height: 844 },
      deviceScaleFactor: 2,
      isMobile: true,
      hasTouch: true,
      locale: 'en-US',
      timezoneId: 'UTC',
    });
    // Playwright's waits are hang guards: two minutes, not its 30 s, on a busy machine.
    browser.setDefaultTimeout(120_000);
    const origin = new URL(app.url).origin;
    await browser.route((url) => url.origin !== origin, (route) => route.abort());
  });

  afterAll(async () => {
    await browser?.close();
    if (profileDir) rmSync(profileDir, { recursive: true, force: true });
    await app?.close();
    await receiver?.close();
    worker?.shutdown();
    await running;
    await world?.close();
  });

  async function screenshot(page: Page, name: string): Promise<void> {
    mkdirSync(SCREENSHOT_DIR, { recursive: true });
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, `phone-${name}.png`), fullPage: false, animations: 'disabled', caret: 'hide' });
  }

  /** The link of the n-th gate.opened notification of the intent. */
  async function link(intentId: string, nth: number): Promise<string> {
    const told = await waitFor(() => receiver!.on('/ada').filter((r) => r.json.intentId === intentId && r.json.kind === 'gate.opened')[nth - 1], 120_000, `gate.opened #${nth}`);
    return String(told.json.link);
  }

  test('a notification link opens the review on a phone; changes requested, then approved; the intent merges', async () => {
    const { handle, id, repo, before } = await startSampleIntent(world!, 'phone', {
      notify: [{ kind: 'webhook', url: receiver!.url('/ada'), approver: 'ada' }],
      approvals: { keys: { ada: ada.publicKey }, unsignedGates: [] },
    });
    const page = browser!.pages()[0] ?? (await browser!.newPage());

    // 1. The first notification's link: the review package, and who the decision is made as.
    await page.goto(await link(id, 1));
    await page.getByRole('heading', { name: `${id}: the merge gate` }).waitFor();
    await page.getByText('Deciding as').waitFor();
    await expectText(page, '#deciding-as', /Deciding as ada .*signed with ada's key/s);
    await page.getByRole('heading', { name: 'Review package' }).waitFor();
    await page.getByRole('heading', { name: 'Diff' }).waitFor();
    await screenshot(page, 'review');

    // 2. Ask for changes.
    const implBefore = (await handle.query(stateQuery)).attempts.impl!;
    await page.getByLabel('Changes to make (the stage runs again with these comments)').fill('Document slugify with a JSDoc comment.');
    await screenshot(page, 'request-changes');
    await page.getByRole('button', { name: 'Request changes' }).click();
    await page.getByText(`The merge gate of ${id} is sent back with changes requested by ada.`).waitFor();

    // 3. impl and review ran again; the gate opened again with a new notification and link.
    const second = await link(id, 2);
    const state = await handle.query(stateQuery);
    expect(state.attempts.impl).toBe(implBefore + 1);
    expect(git(repo, 'show', `warden/${id}:docs/lineage/active/${id}/04-impl-attempt-${implBefore + 1}.prompt.md`)).toContain('Document slugify with a JSDoc comment.');

    // 4. Approve from the new link.
    await page.goto(second);
    await page.getByRole('button', { name: 'Approve', exact: true }).waitFor();
    await page.getByRole('button', { name: 'Approve', exact: true }).click();
    await page.getByText(`The merge gate of ${id} is approved by ada.`).waitFor();
    await screenshot(page, 'approved');

    const outcome = await handle.result();
    expect(outcome.status).toBe('merged');
    expect(git(repo, 'rev-parse', 'main')).not.toBe(before);
    const { rows } = await world!.pool.query("SELECT decision, decided_by FROM gate_decisions WHERE intent_id = $1 AND gate = 'merge' ORDER BY decided_at", [id]);
    expect(rows).toEqual([
      { decision: 'request-changes', decided_by: 'ada' },
      { decision: 'approve', decided_by: 'ada' },
    ]);
    // Only signed decisions count here (no unsigned gate): both were signed by ada's key.
    const signed = await world!.pool.query("SELECT count(*)::int AS n FROM safety_events WHERE intent_id = $1 AND event_type = 'GATE_DECIDED' AND metadata->>'signed' = 'true'", [id]);
    expect(signed.rows[0].n).toBe(2);
  });
});

async function expectText(page: Page, selector: string, pattern: RegExp): Promise<void> {
  const text = await page.locator(selector).innerText();
  expect(text).toMatch(pattern);
}
