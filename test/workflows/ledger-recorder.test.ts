import type { LedgerBatch, LedgerRow } from '../../src/activities';
import { LedgerRecorder } from '../../src/workflows/ledger-recorder';

// The recorder is workflow code: outside a workflow, its ids and run come from here.
let nextId = 0;
jest.mock('@temporalio/workflow', () => ({
  uuid4: () => `row-${++nextId}`,
  workflowInfo: () => ({ runId: 'run-1', historyLength: 1 }),
}));

/** What the rows in `batch` are, by their reasons. */
const reasons = (batch: LedgerBatch): string[] => batch.rows.map((row: LedgerRow) => ('safetyEvent' in row ? row.safetyEvent.reason : row.gateDecision.gate));

/** A recorder whose ledger writes are collected in `written`. */
function recorder(): { ledger: LedgerRecorder; written: string[][] } {
  const written: string[][] = [];
  const append = async (batch: LedgerBatch): Promise<unknown> => void written.push(reasons(batch));
  return { ledger: new LedgerRecorder('intent-1', { local: append, 'task-queue': append }), written };
}

/** An activity the test ends by hand, with what it was handed. */
function heldActivity(): { call: (batch: LedgerBatch) => Promise<string>; carried: string[][]; end: (ok: boolean) => void } {
  const carried: string[][] = [];
  let end: (ok: boolean) => void = () => undefined;
  const call = (batch: LedgerBatch) =>
    new Promise<string>((resolve, reject) => {
      carried.push(reasons(batch));
      end = (ok) => (ok ? resolve('done') : reject(new Error('never started')));
    });
  return { call, carried, end: (ok) => end(ok) };
}

test('rows sent ahead go with the activity, and a write while it is under way writes them again first, in the order they were recorded', async () => {
  const { ledger, written } = recorder();
  ledger.event('STAGE_COMPLETED', 'info', 'triage done');
  ledger.event('STAGE_STARTED', 'info', 'lld starts');
  ledger.writeBeforeWaiting();
  const activity = heldActivity();
  const sent = ledger.sendAhead(activity.call);
  expect(activity.carried).toEqual([['triage done', 'lld starts']]);
  expect(ledger.pending).toBe(false);

  // A pause arrives while the activity waits in its queue: its rows must not come after the pause's.
  ledger.event('OVERRIDE', 'info', 'paused by someone');
  await ledger.flush('task-queue');
  expect(written).toEqual([['triage done', 'lld starts', 'paused by someone']]);

  activity.end(true);
  await expect(sent).resolves.toBe('done');
  ledger.event('OVERRIDE', 'info', 'resumed');
  await ledger.flush();
  expect(written[1]).toEqual(['resumed']);
});

test('rows sent ahead with an activity that failed go back to the front of the queue, still due', async () => {
  const { ledger, written } = recorder();
  ledger.event('STAGE_COMPLETED', 'info', 'spec done');
  ledger.writeBeforeWaiting();
  const activity = heldActivity();
  const sent = ledger.sendAhead(activity.call);
  ledger.event('STAGE_FAILED', 'high', 'impl failed');
  activity.end(false);
  await expect(sent).rejects.toThrow('never started');
  expect(ledger.due).toBe(true);
  await ledger.flushIfDue();
  expect(written).toEqual([['spec done', 'impl failed']]);
});
