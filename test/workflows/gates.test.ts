import { WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { waitingGates } from '../../src/client/list-intents';
import type { IntentInput } from '../../src/shared/intent';
import { decideSignal, decideUpdate, stateQuery } from '../../src/shared/messages';
import type { IntentState } from '../../src/shared/state';
import { demoScript, git, startSampleIntent, useTestWorld, waitFor } from '../helpers/env';

/** Decisions at gates: who may decide, approve with conditions, defer once, the update's answer. */

const world = useTestWorld('gates');

function start(extra: Partial<IntentInput> = {}, scriptPath = demoScript()) {
  return startSampleIntent(world(), 'g', { agent: { kind: 'scripted', scriptPath }, ...extra });
}

async function atGate(handle: WorkflowHandle, gate = 'merge'): Promise<IntentState> {
  return waitFor(async () => {
    const s = await handle.query(stateQuery);
    return s.pendingGate?.gate === gate ? s : undefined;
  }, 120_000, `the ${gate} gate`);
}

test('only a listed approver decides; the agent never does; refusals are answered and recorded', async () => {
  const { handle, repo, id } = await start({ gates: { merge: { approvers: ['alice'] } } });
  await atGate(handle);
  expect(await handle.executeUpdate(decideUpdate, { args: [{ gate: 'merge', decision: 'approve', by: 'bob' }] })).toEqual({
    accepted: false,
    reason: 'bob may not decide the merge gate (approvers: alice)',
  });
  const asAgent = await handle.executeUpdate(decideUpdate, { args: [{ gate: 'merge', decision: 'approve', by: 'scripted' }] });
  expect(asAgent).toMatchObject({ accepted: false, reason: expect.stringMatching(/is the agent/) });
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'mallory' });
  // a payload that does not parse is refused by the validator and never reaches history
  await expect(handle.executeUpdate(decideUpdate, { args: [{ gate: 'merge', decision: 'yes' }] })).rejects.toBeInstanceOf(WorkflowUpdateFailedError);
  expect((await handle.query(stateQuery)).pendingGate?.gate).toBe('merge');
  expect(await handle.executeUpdate(decideUpdate, { args: [{ gate: 'merge', decision: 'approve', by: 'alice' }] })).toEqual({ accepted: true });
  expect((await handle.result()).status).toBe('merged');
  expect(git(repo, 'log', '-1', '--format=%s', 'main')).toContain(`merge intent ${id}`);
  const { rows } = await world().pool.query("SELECT reason FROM safety_events WHERE intent_id = $1 AND event_type = 'DECISION_REFUSED' ORDER BY timestamp", [id]);
  expect(rows.map((r: { reason: string }) => r.reason)).toEqual([
    'bob may not decide the merge gate (approvers: alice)',
    'scripted is the agent: it may not decide its own gate',
    'mallory may not decide the merge gate (approvers: alice)',
  ]);
});

test('approve with conditions: the conditions reach the next stage prompt and the ledger', async () => {
  const prediction = JSON.stringify({ predicted: { files: 1, lines: 2 } });
  const { handle, repo, id } = await start({}, demoScript({ triage: [{ output: prediction }] }));
  await atGate(handle, 'blast-radius');
  const answer = await handle.executeUpdate(decideUpdate, {
    args: [{ gate: 'blast-radius', decision: 'approve-with-conditions', by: 'carol', conditions: ['keep capitalize() unchanged', 'no new dependencies'] }],
  });
  expect(answer).toEqual({ accepted: true });
  await atGate(handle, 'merge');
  const prompt = git(repo, 'show', `warden/${id}:docs/lineage/active/${id}/04-impl-attempt-2.prompt.md`);
  expect(prompt).toMatch(/## Conditions set by the approver[\s\S]*- keep capitalize\(\) unchanged\n- no new dependencies/);
  const { rows } = await world().pool.query('SELECT decision, conditions FROM gate_decisions WHERE intent_id = $1 ORDER BY decided_at', [id]);
  expect(rows[0]).toEqual({ decision: 'approve-with-conditions', conditions: ['keep capitalize() unchanged', 'no new dependencies'] });
  await handle.signal(decideSignal, { gate: 'merge', decision: 'reject', by: 'carol', reason: 'done here' });
  expect((await handle.result()).status).toBe('rejected');
});

test('defer extends the timeout once; a second defer is refused; then the timeout rejects', async () => {
  // Long enough that the defer below reaches the gate before it times out, however slow the machine.
  const { handle, id } = await start({ limits: { gateTimeout: '20s' }, gates: { merge: { deferPeriod: '4s', escalateTo: 'team-lead' } } });
  const waiting = await atGate(handle);
  const first = new Date(waiting.pendingGate!.timeoutAt).getTime();
  expect(await handle.executeUpdate(decideUpdate, { args: [{ gate: 'merge', decision: 'defer', by: 'dave' }] })).toEqual({ accepted: true });
  const deferred = await handle.query(stateQuery);
  expect(new Date(deferred.pendingGate!.timeoutAt).getTime() - first).toBe(4000);
  expect(await handle.executeUpdate(decideUpdate, { args: [{ gate: 'merge', decision: 'defer', by: 'dave' }] })).toEqual({
    accepted: false,
    reason: 'the merge gate was deferred once already',
  });
  const outcome = await handle.result();
  expect(outcome).toMatchObject({ status: 'rejected', reason: 'no decision within 20s' });
  const { rows } = await world().pool.query("SELECT reason, metadata FROM safety_events WHERE intent_id = $1 AND event_type = 'GATE_ESCALATED'", [id]);
  expect(rows[0].metadata).toMatchObject({ escalateTo: 'team-lead' });
});

test('waitingGates lists every intent waiting at a gate, with its age and timeout', async () => {
  const { handle, id } = await start();
  await atGate(handle);
  const gates = await waitFor(async () => {
    const all = await waitingGates(world().client);
    return all.some((g) => g.intentId === id) ? all : undefined;
  }, 120_000, 'the gate to be listed');
  expect(gates.find((g) => g.intentId === id)).toMatchObject({ gate: 'merge', ageMinutes: 0, prompt: expect.stringMatching(/^Merge warden\//) });
  await handle.signal(decideSignal, { gate: 'merge', decision: 'reject', by: 'erin', reason: 'listed, thanks' });
  await handle.result();
});
