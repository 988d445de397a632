import { chmodSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { initApproverKey, readApproverKey, signDecision } from '../../src/client/approver-keys';
import { approvalsFrom } from '../../src/client/intent-input';
import { sendDecision } from '../../src/client/intents';
import { intentStatus, renderIntentStatus } from '../../src/client/intent-status';
import type { Decision } from '../../src/shared/decisions';
import type { IntentInput } from '../../src/shared/intent';
import { decideSignal, decideUpdate, stateQuery } from '../../src/shared/messages';
import type { IntentState } from '../../src/shared/state';
import { answeringDesignStages } from '../../src/client/sample-repo';
import { demoScript, demoStages, startSampleIntent, useTestWorld, waitFor } from '../helpers/env';

/**
 * Approvals carry proof: a decision signed with an approver's key counts; a free-text name alone
 * counts only at gates where the intent trusts unsigned decisions; every refusal is answered and
 * recorded, and the gate stays closed.
 */

const world = useTestWorld('signed');

let keysDir: string;
let alicePublic: string;
beforeAll(() => {
  keysDir = mkdtempSync(path.join(os.tmpdir(), 'warden-keys-'));
  alicePublic = initApproverKey(keysDir, 'alice').publicKey;
  initApproverKey(keysDir, 'mallory'); // a key of her own, listed nowhere
});
afterAll(() => rmSync(keysDir, { recursive: true, force: true }));

/** Only alice has a key in the intent; unsigned decisions count nowhere unless `unsignedGates` says. */
function start(extra: Partial<IntentInput> = {}) {
  return startSampleIntent(world(), 'sg', {
    agent: { kind: 'scripted', scriptPath: demoScript() },
    approvals: { keys: { alice: alicePublic }, unsignedGates: [] },
    ...extra,
  });
}

async function atGate(handle: WorkflowHandle, gate = 'merge'): Promise<IntentState> {
  return waitFor(async () => {
    const s = await handle.query(stateQuery);
    return s.pendingGate?.gate === gate ? s : undefined;
  }, 120_000, `the ${gate} gate`);
}

function signed(name: string, intentId: string, decision: Decision, gateOpenedAt: string, now?: Date): Decision {
  return { ...decision, proof: signDecision(readApproverKey(keysDir, name)!, intentId, decision, gateOpenedAt, now) };
}

async function refusals(id: string): Promise<string[]> {
  const { rows } = await world().pool.query("SELECT reason FROM safety_events WHERE intent_id = $1 AND event_type = 'DECISION_REFUSED' ORDER BY timestamp, recorded_at", [id]);
  return rows.map((r: { reason: string }) => r.reason);
}

test('a key is created 0600 in a 0700 folder; a key others can read is refused', () => {
  expect(statSync(path.join(keysDir, 'alice.key')).mode & 0o777).toBe(0o600);
  expect(statSync(keysDir).mode & 0o777).toBe(0o700);
  expect(alicePublic).toMatch(/^ed25519:[0-9a-f]{64}$/);
  expect(() => initApproverKey(keysDir, 'alice')).toThrow(/exists already/);
  const loose = mkdtempSync(path.join(os.tmpdir(), 'warden-keys-'));
  try {
    initApproverKey(loose, 'bob');
    chmodSync(path.join(loose, 'bob.key'), 0o644);
    expect(() => readApproverKey(loose, 'bob')).toThrow(/can be read by others \(mode 644\)/);
    expect(readApproverKey(loose, 'nobody')).toBeUndefined();
    expect(() => readApproverKey(loose, '../etc/passwd')).toThrow(/an approver name is/);
  } finally {
    rmSync(loose, { recursive: true, force: true });
  }
});

test('only a valid, fresh signature by a listed key opens the gate; every other attempt is refused and recorded', async () => {
  const { handle, id } = await start();
  const { pendingGate } = await atGate(handle);
  const openedAt = pendingGate!.requestedAt;
  const approve: Decision = { gate: 'merge', decision: 'approve', by: 'alice' };
  const answer = (d: unknown) => handle.executeUpdate(decideUpdate, { args: [d] });

  // The name alone, as any local process or the Web UI could send it.
  expect(await answer(approve)).toMatchObject({ accepted: false, reason: expect.stringMatching(/^unsigned decision refused: the merge gate takes only signed decisions/) });
  await handle.signal(decideSignal, approve);
  // Mallory's own key, under her name: she has no key in this intent.
  expect(await answer(signed('mallory', id, { ...approve, by: 'mallory' }, openedAt))).toMatchObject({ accepted: false, reason: 'signed as mallory, who has no public key in this intent\'s approvers' });
  // Mallory's key, claiming to be alice.
  expect(await answer({ ...approve, proof: signed('mallory', id, approve, openedAt).proof })).toMatchObject({ accepted: false, reason: "the signature is not alice's signature of this decision" });
  // Alice's signature of a rejection, turned into an approval.
  const rejection = signed('alice', id, { gate: 'merge', decision: 'reject', by: 'alice', reason: 'no' }, openedAt);
  expect(await answer({ ...approve, proof: rejection.proof })).toMatchObject({ accepted: false, reason: "the signature is not alice's signature of this decision" });
  // Alice's signature for another intent, an earlier opening of the gate, or an hour ago.
  expect(await answer(signed('alice', 'another-intent', approve, openedAt))).toMatchObject({ accepted: false, reason: "the signature is not alice's signature of this decision" });
  expect(await answer(signed('alice', id, approve, '2020-01-01T00:00:00.000Z'))).toMatchObject({ accepted: false, reason: expect.stringMatching(/signed for an earlier opening of the merge gate/) });
  expect(await answer(signed('alice', id, approve, openedAt, new Date(Date.now() - 3_600_000)))).toMatchObject({ accepted: false, reason: expect.stringMatching(/more than 15 minutes from now/) });
  // A name too long to be one is refused before anything is recorded.
  await expect(answer({ ...approve, by: 'a'.repeat(1_000_000) })).rejects.toThrow();
  expect((await handle.query(stateQuery)).pendingGate?.gate).toBe('merge');

  // Alice, properly: the gate opens; the same signature sent again is a replay.
  const good = signed('alice', id, approve, openedAt);
  expect(await answer(good)).toEqual({ accepted: true });
  expect((await handle.result()).status).toBe('merged');
  const state = await handle.query(stateQuery);
  expect(state.decisions.map((d) => ({ by: d.by, signed: d.signed }))).toEqual([{ by: 'alice', signed: true }]);
  expect(JSON.stringify(state.decisions)).not.toContain(good.proof!.signature); // the record keeps the fact, not the proof
  expect(state.rejectedSignals).toBe(8);
  expect(state.refusedDecisions!.map((r) => r.reason)).toHaveLength(5); // the latest five are shown
  expect(state.refusedDecisions!.at(-1)).toMatchObject({ gate: 'merge', by: 'alice', reason: expect.stringMatching(/more than 15 minutes/) });

  expect(await refusals(id)).toEqual([
    expect.stringMatching(/^unsigned decision refused: the merge gate/),
    expect.stringMatching(/^unsigned decision refused: the merge gate/),
    "signed as mallory, who has no public key in this intent's approvers",
    "the signature is not alice's signature of this decision",
    "the signature is not alice's signature of this decision",
    "the signature is not alice's signature of this decision",
    expect.stringMatching(/earlier opening/),
    expect.stringMatching(/more than 15 minutes/),
  ]);
  const { rows } = await world().pool.query("SELECT metadata FROM safety_events WHERE intent_id = $1 AND event_type = 'GATE_DECIDED'", [id]);
  expect(rows[0].metadata).toMatchObject({ by: 'alice', signed: true });
});

test('a signature is used once: replayed to the same gate it is refused', async () => {
  const { handle, id } = await start();
  const { pendingGate } = await atGate(handle);
  const good = signed('alice', id, { gate: 'merge', decision: 'defer', by: 'alice' }, pendingGate!.requestedAt);
  expect(await handle.executeUpdate(decideUpdate, { args: [good] })).toEqual({ accepted: true });
  expect(await handle.executeUpdate(decideUpdate, { args: [good] })).toEqual({ accepted: false, reason: 'this signature was used before: each signed decision counts once' });
  await handle.terminate('done');
});

test('sendDecision (what warden approve uses) signs with the key of the approver it names', async () => {
  const { handle, id } = await start();
  await atGate(handle);
  await sendDecision(world().client, id, { gate: 'merge', decision: 'approve', by: 'alice' }, { keysDir });
  expect((await handle.result()).status).toBe('merged');
  expect((await handle.query(stateQuery)).decisions[0]).toMatchObject({ by: 'alice', signed: true });
});

test('unsigned decisions count where the intent trusts them, never where its code may run unconfined', async () => {
  const trusted = await start({ approvals: { keys: {}, unsignedGates: ['merge'] } });
  await atGate(trusted.handle);
  await trusted.handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'alice' });
  expect((await trusted.handle.result()).status).toBe('merged');
  expect((await trusted.handle.query(stateQuery)).decisions[0]).toMatchObject({ by: 'alice', signed: false });

  const unconfined = await start({ approvals: { keys: { alice: alicePublic }, unsignedGates: ['merge'] }, confinement: { allowUnconfinedCode: true } });
  const { pendingGate } = await atGate(unconfined.handle);
  expect(await unconfined.handle.executeUpdate(decideUpdate, { args: [{ gate: 'merge', decision: 'approve', by: 'alice' }] })).toMatchObject({
    accepted: false,
    reason: expect.stringMatching(/only signed decisions count/),
  });
  const good = signed('alice', unconfined.id, { gate: 'merge', decision: 'approve', by: 'alice' }, pendingGate!.requestedAt);
  expect(await unconfined.handle.executeUpdate(decideUpdate, { args: [good] })).toEqual({ accepted: true });
  expect((await unconfined.handle.result()).status).toBe('merged');

  // An agent with the worker's network could reach the frontend itself: the same holds.
  const right = Buffer.from(String((demoStages().impl![1]!.edits as Array<{ content: string }>)[0]!.content)).toString('base64');
  const command = answeringDesignStages(`if grep -q '^# Warden: impl'; then printf %s ${right} | base64 -d > lib/strings.js; fi; echo done`);
  const networked = await start({ agent: { kind: 'command', command, network: 'host' }, approvals: { keys: { alice: alicePublic }, unsignedGates: ['merge'] } });
  await atGate(networked.handle);
  expect(await networked.handle.executeUpdate(decideUpdate, { args: [{ gate: 'merge', decision: 'approve', by: 'alice' }] })).toMatchObject({
    accepted: false,
    reason: expect.stringMatching(/with the worker's network, so only signed decisions count/),
  });
  await networked.handle.terminate('checked');
});

test('a keyed approver\'s name without the key counts nowhere: refused under embedded-server and always; a keyless approver\'s unsigned decision counts and says unsigned', async () => {
  const approvers = { alice: { publicKey: alicePublic } };
  const gates = { merge: { approvers: ['alice', 'bob'] } };
  for (const accept of ['embedded-server', 'always'] as const) {
    // What `warden run` puts in the intent from this config, on Warden's embedded server.
    const approvals = approvalsFrom({ approvers, unsignedDecisions: { accept }, embeddedServer: true });
    expect(approvals.unsignedGates).toContain('merge'); // unsigned decisions are trusted at this gate…
    const { handle, id } = await start({ approvals, gates });
    await atGate(handle);
    // …but not in alice's name: `temporal workflow signal`, or the Web UI's HTTP API, sending it.
    await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'alice' });
    expect(await handle.executeUpdate(decideUpdate, { args: [{ gate: 'merge', decision: 'approve', by: 'alice' }] })).toMatchObject({
      accepted: false,
      reason: expect.stringMatching(/^unsigned decision refused: alice has a key in this intent's approvers, so a decision in that name counts only when signed with it/),
    });
    const state = await handle.query(stateQuery);
    expect(state.pendingGate?.gate).toBe('merge');
    expect(state.decisions).toEqual([]);
    const refused = await waitFor(async () => ((await refusals(id)).length === 2 ? refusals(id) : undefined), 60_000, 'the refusals in the ledger');
    expect(refused).toEqual([expect.stringMatching(/^unsigned decision refused: alice has a key/), expect.stringMatching(/^unsigned decision refused: alice has a key/)]);

    // Bob has no key: where unsigned decisions are trusted his counts, and is shown as unsigned.
    await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'bob' });
    expect((await handle.result()).status).toBe('merged');
    expect((await handle.query(stateQuery)).decisions).toEqual([expect.objectContaining({ by: 'bob', signed: false })]);
    const { rows } = await world().pool.query("SELECT reason FROM safety_events WHERE intent_id = $1 AND event_type = 'GATE_DECIDED'", [id]);
    expect(rows.map((r: { reason: string }) => r.reason)).toEqual(['merge gate: approve by bob (unsigned)']);
    const status = renderIntentStatus(await intentStatus(world().client, world().ledger, id));
    expect(status).toContainEqual(expect.stringMatching(/^ {2}decision: merge gate: approve by bob \(unsigned\) at /));
    const audit = await world().ledger.queries.timeline(id);
    expect(audit.filter((e) => e.type === 'GATE_DECISION').map((e) => e.summary)).toEqual(['merge gate: approve by bob (unsigned)']);
  }
});
