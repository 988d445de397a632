/**
 * The Web UI, in a real browser: an intent waits at the merge gate, a person opens the embedded
 * server's Temporal Web UI in headless Chromium, sends the `decide` signal with its JSON payload
 * from the workflow page, and the intent merges.
 *
 * Needs Debian's `chromium` (the test setup installs it where it can) or WARDEN_TEST_CHROMIUM
 * pointing at a Chromium binary. Without one the test is skipped and the run's summary says so
 * (in CI it fails instead).
 *
 * Screenshots go to .warden/screenshots/; with WARDEN_UPDATE_SCREENSHOTS=1 they replace the
 * images of docs/gates.md in docs/images/ instead.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { WardenWorker } from '../../src/workers/host-worker';
import { chromium, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { intentHandle, startIntent } from '../../src/client/intents';
import { startDevServer, type DevServer } from '../../src/runtime/dev-server';
import type { Decision } from '../../src/shared/decisions';
import { workflowIdForIntent } from '../../src/shared/ids';
import type { IntentInput } from '../../src/shared/intent';
import { stateQuery } from '../../src/shared/messages';
import type { IntentState } from '../../src/shared/state';
import { describeWith, programPath } from '../setup/prerequisites';
import { DEMO_SCRIPT, createTestWorld, git, makeSampleRepo, waitFor, writeScript, type TestWorld } from '../helpers/env';

const repoRoot = path.resolve(__dirname, '..', '..');
const SCREENSHOT_DIR =
  process.env.WARDEN_UPDATE_SCREENSHOTS === '1'
    ? path.join(repoRoot, 'docs', 'images')
    : path.join(repoRoot, '.warden', 'screenshots');

/**
 * Flags for a closed network: without the background-networking ones Chromium's own connections
 * (component updates, sync, QUIC probes) are refused and slow everything down.
 */
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** The approver's name, typed into the payload: only the UI can have sent a decision by it. */
const APPROVER = 'Ada from the Web UI';

let server: DevServer | undefined;
let world: TestWorld | undefined;
let worker: WardenWorker | undefined;
let running: Promise<void> | undefined;
let browser: BrowserContext | undefined;
let profileDir: string | undefined;

describeWith('chromium', 'the Temporal Web UI', () => {
  beforeAll(async () => {
    const executablePath = programPath('chromium')!;
    const cliPath = process.env.WARDEN_TEST_CLI_PATH;
    if (!cliPath) throw new Error('WARDEN_TEST_CLI_PATH is not set: test/global-setup.ts installs the Temporal CLI');
    // The shared test server runs without its UI: this test starts its own, UI on, in memory.
    const logFile = path.join(repoRoot, '.warden', 'logs', 'test-web-ui-dev-server.log');
    rmSync(logFile, { force: true });
    server = await startDevServer({ cliPath, port: 0, uiPort: 0, logFile });
    world = await createTestWorld('web-ui', server.address);
    worker = await world.worker();
    running = worker.run();
    profileDir = mkdtempSync(path.join(tmpdir(), 'warden-chromium-'));
    browser = await chromium.launchPersistentContext(profileDir, {
      executablePath,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: 1280, height: 800 },
      locale: 'en-US',
      timezoneId: 'UTC',
    });
    // Playwright's waits below are hang guards: two minutes, not its 30 s, on a busy machine.
    browser.setDefaultTimeout(120_000);
    // The UI fetches a news feed from the internet; nothing but the local UI is reachable here.
    const uiOrigin = new URL(server.uiUrl!).origin;
    await browser.route((url) => url.origin !== uiOrigin, (route) => route.abort());
  });

  afterAll(async () => {
    await browser?.close();
    if (profileDir) rmSync(profileDir, { recursive: true, force: true });
    worker?.shutdown();
    await running;
    await world?.close();
    await server?.stop();
  });

  /** The demo script with no delays: impl fails once, then passes. */
  function fastScript(): string {
    const script = JSON.parse(readFileSync(DEMO_SCRIPT, 'utf8'));
    for (const attempts of Object.values(script.stages) as { delayMs?: number }[][]) for (const a of attempts) a.delayMs = 0;
    return writeScript(script);
  }

  async function screenshot(page: Page, name: string): Promise<void> {
    mkdirSync(SCREENSHOT_DIR, { recursive: true });
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, `web-ui-${name}.png`), animations: 'disabled', caret: 'hide' });
  }

  /**
   * Waits until `text` shows in one of the page's frames: the UI renders the workflow's summary
   * and current details (markdown) in iframes.
   */
  async function waitForTextInFrames(page: Page, text: string, what: string): Promise<void> {
    await waitFor(
      async () => {
        for (const frame of page.frames()) {
          const match = frame.getByText(text);
          // The UI replaces these iframes as it refreshes: a frame may go away while we look.
          const shown = await match
            .first()
            .isVisible()
            .catch(() => false);
          if (shown) return true;
        }
        return undefined;
      },
      120_000, // a hang guard
      what,
    );
  }

  /** Picks the signal in the dialog: from the list of the workflow's signals, or as free text. */
  async function chooseSignal(dialog: Locator, name: string): Promise<void> {
    // With a worker up the UI lists the signals the workflow defines in a select ("Select a
    // signal"); without one it asks for the name in a text field.
    const picker = dialog.getByRole('button', { name: /select a signal/i });
    const textbox = dialog.getByRole('textbox', { name: 'Signal name' });
    await picker.or(textbox).first().waitFor();
    if (await picker.isVisible()) {
      await picker.click();
      await dialog.getByRole('option', { name, exact: true }).click();
      // The select now shows (and is named by) the chosen signal.
      await dialog.getByRole('button', { name, exact: true }).waitFor();
    } else {
      await textbox.fill(name);
    }
  }

  test('an intent waiting at the merge gate is approved from the Web UI and merges', async () => {
    const repo = makeSampleRepo();
    const intent: IntentInput = {
      id: `web-ui-${Date.now()}`,
      goal: 'Add slugify() to the strings library',
      repoPath: repo,
      baseBranch: 'main',
      paths: ['lib/**'],
      agent: { kind: 'scripted', scriptPath: fastScript() },
      limits: { cooldown: '0s' },
    };
    const handle = await startIntent(world!.client, intent, world!.taskQueue);
    const atGate = await waitFor(async () => {
      const state = await intentHandle(world!.client, intent.id).query(stateQuery);
      return state.pendingGate ? state : undefined;
    }, 120_000, 'the intent to reach the merge gate');
    expect(atGate.pendingGate?.gate).toBe('merge');
    const baseBefore = git(repo, 'rev-parse', 'main');

    const page = browser!.pages()[0] ?? (await browser!.newPage());
    const workflowId = workflowIdForIntent(intent.id);

    // 1. The workflow page; its User Metadata tab shows the current details with the gate text.
    await page.goto(`${server!.uiUrl}/namespaces/${server!.namespace}/workflows/${encodeURIComponent(workflowId)}`);
    await page.getByRole('heading', { name: workflowId }).waitFor();
    await page.getByRole('status').getByText('Running', { exact: true }).waitFor();
    await page.getByRole('tab', { name: 'User Metadata' }).click();
    await page.getByRole('heading', { name: 'Current Details' }).waitFor();
    await waitForTextInFrames(page, 'Waiting at the merge gate', 'the gate text in the current details');
    await waitForTextInFrames(page, 'Approve: send signal decide', 'the approve instructions in the current details');
    await screenshot(page, 'gate');

    // 2. More Actions → Send a Signal: signal `decide`, the approval as its JSON payload.
    await page.getByRole('button', { name: 'More Actions' }).click();
    await page.getByRole('menuitem', { name: 'Send a Signal' }).click();
    const dialog = page.getByRole('dialog', { name: 'Send a Signal' });
    await dialog.waitFor();
    await chooseSignal(dialog, 'decide');
    const payload: Decision = { gate: 'merge', decision: 'approve', by: APPROVER };
    const data = dialog.getByRole('textbox', { name: 'Data' });
    await data.click();
    // insertText, not typing key by key: the JSON editor would auto-close brackets and quotes.
    await page.keyboard.insertText(JSON.stringify(payload));
    // The editor reformats its JSON when it loses focus, and the dialog grows: blur it first, or
    // the click on Submit can land where the button was a moment before and do nothing.
    await data.blur();
    await waitFor(async () => ((await data.innerText()).includes('\n') ? true : undefined), 120_000, 'the payload to be formatted');
    expect(JSON.parse(await data.innerText())).toEqual(payload);
    await expect(dialog.getByRole('radio', { name: 'json/plain' }).isChecked()).resolves.toBe(true);
    await screenshot(page, 'signal');
    const submit = dialog.getByRole('button', { name: 'Submit' });
    await expect(submit.isEnabled()).resolves.toBe(true);
    await submit.click();
    // The toast (its text is also echoed in a live region for screen readers).
    await page.getByText('Workflow signaled.').first().waitFor();
    await dialog.waitFor({ state: 'hidden' });

    // 3. The intent leaves the gate and merges, the decision recorded by the name typed in the UI.
    const afterGate: IntentState = await waitFor(async () => {
      const state = await handle.query(stateQuery);
      return state.pendingGate === undefined && state.status !== 'waiting' ? state : undefined;
    }, 120_000, 'the intent to leave the merge gate');
    expect(afterGate.decisions).toEqual([expect.objectContaining({ gate: 'merge', decision: 'approve', by: APPROVER, timedOut: false })]);
    const outcome = await handle.result();
    expect(outcome.status).toBe('merged');
    expect(git(repo, 'rev-parse', 'main')).toBe(outcome.mergedCommit);
    expect(outcome.mergedCommit).not.toBe(baseBefore);
    const final = await handle.query(stateQuery);
    expect(final.status).toBe('merged');
    expect(final.rejectedSignals).toBe(0);
    expect(final.decisions).toEqual([expect.objectContaining({ gate: 'merge', decision: 'approve', by: APPROVER, timedOut: false })]);

    // The UI shows it too: Completed, and the final details once reloaded.
    await page.getByRole('status').getByText('Completed', { exact: true }).waitFor();
    await page.reload();
    await page.getByRole('status').getByText('Completed', { exact: true }).waitFor();
    await page.getByRole('tab', { name: 'User Metadata' }).click();
    await waitForTextInFrames(page, 'Finished: merged', 'the final details');
    await screenshot(page, 'merged');
    expect(existsSync(path.join(SCREENSHOT_DIR, 'web-ui-merged.png'))).toBe(true);
  });
});
