import type { WorkflowHandle } from '@temporalio/client';
import { LadderStore } from '../../src/ledger/ladder-store';
import type { IntentInput } from '../../src/shared/intent';
import { decideUpdate, stateQuery } from '../../src/shared/messages';
import type { IntentState } from '../../src/shared/state';
import { demoScript, startSampleIntent, useTestWorld, waitFor } from '../helpers/env';

/**
 * Custom gates from the config: after their stage, only when their conditions hold, decided by
 * their approvers within their timeout, sending the work back when asked, and passed by the
 * automation ladder only when they allow it.
 */

const world = useTestWorld('custom-gates');
const REVIEW_SCORES = { strategicAlignment: 5, autonomyAppropriateness: 4, outputQuality: 4, resourceEfficiency: 5, learningApplication: 4 };

let n = 0;
async function start(customGates: NonNullable<IntentInput['customGates']>, ladder?: 4) {
  n += 1;
  const agentName = `agent-c${n}-${Date.now()}`;
  if (ladder) await new LadderStore(world().pool).setLevel({ scope: `agent:${agentName}`, level: ladder, pinned: true, by: 'tester', defaults: { level: 0, allowLevelUp: false } });
  const review = [{ output: `APPROVE\n\n\`\`\`json\n${JSON.stringify({ verdict: 'APPROVE', summary: 'fine', findings: [{ severity: 'medium', category: 'api_change', message: 'slugify is new public API' }], scores: REVIEW_SCORES })}\n\`\`\`\n` }];
  return startSampleIntent(world(), 'c', { agent: { kind: 'scripted', name: agentName, scriptPath: demoScript({ review }) }, customGates });
}

async function atGate(handle: WorkflowHandle, gate: string, after = 0): Promise<IntentState> {
  return waitFor(async () => {
    const s = await handle.query(stateQuery);
    if (s.status === 'merged' || s.status === 'rejected' || s.status === 'failed') throw new Error(`intent ended (${s.status}) before the ${gate} gate`);
    return s.pendingGate?.gate === gate && s.decisions.length >= after ? s : undefined;
  }, 120_000, `the ${gate} gate`);
}

const decide = (handle: WorkflowHandle, decision: Record<string, unknown>) => handle.executeUpdate(decideUpdate, { args: [decision] });

test('a gate after review opens when the change touches its paths, only its approvers decide it; one whose paths are not touched never opens', async () => {
  const { handle } = await start([
    { id: 'api-change', after: 'review', prompt: 'Public API changed: check the breaking changes.', when: { paths: ['lib/**'], findingCategory: 'api_change' }, approvers: ['ana'], timeout: '1h', escalateTo: 'api-owners' },
    { id: 'db-change', after: 'review', prompt: 'Migrations changed.', when: { paths: ['db/**'] } },
  ]);
  const waiting = await atGate(handle, 'api-change');
  expect(waiting.pendingGate).toMatchObject({
    humanOnly: true,
    changes: true,
    // The demo's change: slugify and the test the spec plans for it.
    prompt: 'Public API changed: check the breaking changes. (the change touches lib/strings.js, lib/strings.test.js; review reported a api_change finding)',
  });
  expect(Date.parse(waiting.pendingGate!.timeoutAt) - Date.parse(waiting.pendingGate!.requestedAt)).toBe(3_600_000);
  expect(await decide(handle, { gate: 'api-change', decision: 'approve', by: 'bob' })).toEqual({ accepted: false, reason: 'bob may not decide the api-change gate (approvers: ana)' });
  expect(await decide(handle, { gate: 'api-change', decision: 'approve', by: 'ana' })).toEqual({ accepted: true });
  await atGate(handle, 'merge');
  await decide(handle, { gate: 'merge', decision: 'approve', by: 'ana' });
  expect((await handle.result()).status).toBe('merged');
  expect((await handle.query(stateQuery)).decisions.map((d) => d.gate)).toEqual(['api-change', 'merge']);
});

test('a gate after impl that asks for changes sends impl back, then asks again; a rejection ends the intent', async () => {
  const { handle } = await start([{ id: 'style', after: 'impl', prompt: 'Does the change follow the house style?' }]);
  const first = await atGate(handle, 'style');
  expect(await decide(handle, { gate: 'style', decision: 'request-changes', by: 'ana', reason: 'Name the regex.' })).toEqual({ accepted: true });
  const second = await atGate(handle, 'style', first.decisions.length + 1);
  expect(second.attempts.impl).toBe(first.attempts.impl! + 1);
  await decide(handle, { gate: 'style', decision: 'reject', by: 'ana', reason: 'still not' });
  expect(await handle.result()).toMatchObject({ status: 'rejected', reason: 'still not' });
});

test('at L4 the ladder passes the merge gate of a LOW-risk intent but not a custom gate, unless that gate lets it', async () => {
  const { handle } = await start([{ id: 'human-check', after: 'review', prompt: 'A person looks.' }], 4);
  await atGate(handle, 'human-check');
  expect((await handle.query(stateQuery)).pendingGate?.whyNotAutomatic).toBe('the human-check gate always needs a person (a custom gate without ladder: true)');
  await decide(handle, { gate: 'human-check', decision: 'approve', by: 'ana' });
  expect((await handle.result()).status).toBe('merged');

  const trusted = await start([{ id: 'ladder-check', after: 'triage', prompt: 'Fine by the ladder.', ladder: true }], 4);
  expect((await trusted.handle.result()).status).toBe('merged');
  const decisions = (await trusted.handle.query(stateQuery)).decisions;
  expect(decisions.map((d) => `${d.gate}:${d.by}`)).toEqual(['ladder-check:warden-ladder-L4', 'merge:warden-ladder-L4']);
});
