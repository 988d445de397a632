import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import type { WorkflowHandle } from '@temporalio/client';
import { sendDecision } from '../../src/client/intents';
import { GATE_KINDS } from '../../src/shared/gates';
import { decideSignal, decideUpdate, resumeSignal, stateQuery } from '../../src/shared/messages';
import { workflowIdForIntent } from '../../src/shared/ids';
import { testApprover } from '../helpers/approvers';
import { startSampleIntent, useTestWorld, waitFor } from '../helpers/env';

/**
 * Property-based: whatever arrives as a decision (any JSON, anything shaped like a decision,
 * payloads in any encoding, undecodable bytes), through the real server, fails no workflow task,
 * decides nothing, and leaves the intent answering and able to take the one decision that counts.
 */

const world = useTestWorld('fuzz');
const RUNS = Number(process.env.WARDEN_FUZZ_RUNS ?? 1000);

const text = fc.oneof(fc.string({ maxLength: 40 }), fc.string({ unit: 'binary', maxLength: 200 }), fc.constantFrom('', ' ', 'alice', 'scripted', 'warden', 'a'.repeat(5000)));
const decisionLike = fc.record(
  {
    gate: fc.oneof(fc.constantFrom(...GATE_KINDS), text, fc.jsonValue()),
    decision: fc.oneof(fc.constantFrom('approve', 'reject', 'approve-with-conditions', 'defer'), text, fc.jsonValue()),
    by: fc.oneof(text, fc.jsonValue()),
    reason: fc.oneof(text, fc.jsonValue()),
    conditions: fc.oneof(fc.array(text, { maxLength: 30 }), fc.jsonValue()),
    agentSession: fc.oneof(text, fc.jsonValue()),
    proof: fc.oneof(
      fc.record({ nonce: fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: 64, maxLength: 64 }), signedAt: fc.date({ noInvalidDate: true }).map((d) => d.toISOString()), gateOpenedAt: text, signature: fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: 128, maxLength: 128 }) }),
      fc.jsonValue(),
    ),
  },
  { requiredKeys: [] },
);
const payload = fc.oneof(fc.jsonValue(), decisionLike);

async function waiting(handle: WorkflowHandle) {
  return waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
}

/** temporal.api.enums.v1.WorkflowTaskFailedCause: the server force-closed the task. */
const WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND = 17;

/**
 * Why each workflow task the worker failed, failed (none, when all is well). The server's own
 * force-close is left out: under a flood of signals it fails the task in flight when too many
 * events are buffered behind it, and hands them all to the next one. That is flow control, not
 * a failure of the workflow, and the intent answering afterwards shows it did not wedge.
 */
async function workflowTaskFailures(handle: WorkflowHandle): Promise<string[]> {
  const history = await handle.fetchHistory();
  return (history.events ?? [])
    .filter((e) => e.workflowTaskFailedEventAttributes)
    .filter((e) => e.workflowTaskFailedEventAttributes!.cause !== WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND)
    .map((e) => `${e.workflowTaskFailedEventAttributes!.cause}: ${e.workflowTaskFailedEventAttributes!.failure?.message ?? ''}`.slice(0, 300));
}

test(`${RUNS} signals and ${RUNS} updates of any shape decide nothing and fail no workflow task`, async () => {
  const alice = testApprover('alice');
  // No unsigned decision counts at this intent's gates: nothing fuzzed can be a valid decision.
  const { handle, id } = await startSampleIntent(world(), 'fz', { approvals: { keys: { alice: alice.publicKey }, unsignedGates: [] } });
  await waiting(handle);

  let accepted = 0;
  await fc.assert(
    fc.asyncProperty(payload, payload, async (asSignal, asUpdate) => {
      await handle.signal(decideSignal, asSignal);
      try {
        const answer = await handle.executeUpdate(decideUpdate, { args: [asUpdate] });
        if (answer.accepted) accepted++;
      } catch {
        // refused by the validator: nothing reached history
      }
    }),
    { numRuns: RUNS },
  );
  expect(accepted).toBe(0);
  const state = await handle.query(stateQuery);
  expect(state.pendingGate?.gate).toBe('merge');
  expect(state.decisions).toEqual([]);
  expect(state.rejectedSignals).toBeGreaterThan(0);
  expect(await workflowTaskFailures(handle)).toEqual([]);

  // Still able to decide.
  await sendDecision(world().client, id, { gate: 'merge', decision: 'approve', by: 'alice' }, { keysDir: alice.keysDir });
  expect((await handle.result()).status).toBe('merged');
}, 300_000);

test(`${RUNS} raw decide, pause and resume signals in any encoding, undecodable ones too, wedge nothing`, async () => {
  const alice = testApprover('alice');
  const { handle, id } = await startSampleIntent(world(), 'fzraw', { approvals: { keys: { alice: alice.publicKey }, unsignedGates: [] } });
  await waiting(handle);
  const encodings = ['json/plain', 'binary/plain', 'binary/null', 'json/protobuf', 'binary/protobuf', 'binary/encrypted', 'text/plain', ''];
  const rawPayload = fc.record({
    encoding: fc.oneof(fc.constantFrom(...encodings), fc.string({ maxLength: 20 })),
    data: fc.oneof(fc.uint8Array({ maxLength: 300 }), fc.jsonValue().map((v) => new TextEncoder().encode(JSON.stringify(v))), fc.constant(new TextEncoder().encode('{"gate":'))),
    messageType: fc.option(fc.string({ maxLength: 30 }), { nil: undefined }),
  });
  await fc.assert(
    fc.asyncProperty(fc.constantFrom('decide', 'decide', 'pause', 'resume'), fc.array(rawPayload, { minLength: 0, maxLength: 3 }), async (signalName, payloads) => {
      await world().client.workflowService.signalWorkflowExecution({
        namespace: 'default',
        workflowExecution: { workflowId: workflowIdForIntent(id) },
        signalName,
        identity: 'fuzzer',
        requestId: randomBytes(16).toString('hex'),
        input: {
          payloads: payloads.map((p) => ({
            metadata: { encoding: new TextEncoder().encode(p.encoding), ...(p.messageType ? { messageType: new TextEncoder().encode(p.messageType) } : {}) },
            data: p.data,
          })),
        },
      });
    }),
    { numRuns: RUNS },
  );
  // Every signal has been handled once the workflow answers a query after them (a thousand
  // pauses and resumes each write to the ledger first: that may take a while on a busy machine).
  const state = await waitFor(() => handle.query(stateQuery).catch(() => undefined), 120_000, 'the workflow to answer after the signals');
  expect(state.pendingGate?.gate).toBe('merge');
  expect(state.decisions).toEqual([]);
  expect(await workflowTaskFailures(handle)).toEqual([]);
  // Pauses and resumes took effect whatever they carried (a pause is the safe side); the last word was one or the other.
  expect(state.paused === undefined || state.paused.by.length <= 100).toBe(true);
  await handle.signal(resumeSignal, { by: 'alice' });
  await sendDecision(world().client, id, { gate: 'merge', decision: 'approve', by: 'alice' }, { keysDir: alice.keysDir });
  expect((await handle.result()).status).toBe('merged');
}, 300_000);
