import type { WorkflowHandle } from '@temporalio/client';
import { LadderStore } from '../../src/ledger/ladder-store';
import { sendDecision } from '../../src/client/intents';
import { testApprover } from '../helpers/approvers';
import type { IntentInput } from '../../src/shared/intent';
import type { LadderLevel } from '../../src/shared/ladder';
import { decideSignal, decideUpdate, stateQuery } from '../../src/shared/messages';
import type { IntentState } from '../../src/shared/state';
import { demoScript, demoStages, git, startSampleIntent, useTestWorld, waitFor } from '../helpers/env';

/**
 * Every gate kind opens on its condition and not otherwise, and the automation ladder passes
 * only what its level allows. Each test has its own agent name: its own ladder scope.
 */

const world = useTestWorld('gate-kinds');
const demo = demoStages();

const triageSaying = (answer: Record<string, unknown>) => [{ output: `# Triage\n\n\`\`\`json\n${JSON.stringify(answer)}\n\`\`\`\n` }];
const reviewSaying = (answer: Record<string, unknown>) => [{ output: `APPROVE\n\n\`\`\`json\n${JSON.stringify(answer)}\n\`\`\`\n` }];
const GOOD_SCORES = { strategicAlignment: 5, autonomyAppropriateness: 4, outputQuality: 4, resourceEfficiency: 5, learningApplication: 4 };

let n = 0;
/** Starts an intent; `ladder` puts its agent's scope at a level first (pinned unless said otherwise). */
async function start(extra: Partial<IntentInput> = {}, script: Record<string, Array<Record<string, unknown>>> = {}, ladder?: { level: LadderLevel; pinned?: boolean }) {
  n += 1;
  const agentName = `agent-k${n}-${Date.now()}`;
  if (ladder) {
    await new LadderStore(world().pool).setLevel({ scope: `agent:${agentName}`, level: ladder.level, pinned: ladder.pinned ?? true, by: 'tester', defaults: { level: 0, allowLevelUp: false } });
  }
  const started = await startSampleIntent(world(), 'k', { agent: { kind: 'scripted', name: agentName, scriptPath: demoScript(script) }, ...extra });
  return { ...started, scope: `agent:${agentName}` };
}

async function atGate(handle: WorkflowHandle, gate: string): Promise<IntentState> {
  return waitFor(async () => {
    const s = await handle.query(stateQuery);
    if (s.status === 'merged' || s.status === 'rejected' || s.status === 'failed') throw new Error(`intent ended (${s.status}) before the ${gate} gate`);
    return s.pendingGate?.gate === gate ? s : undefined;
  }, 120_000, `the ${gate} gate`);
}

const approve = (handle: WorkflowHandle, gate: string) => handle.signal(decideSignal, { gate, decision: 'approve', by: 'tester' });

async function eventTypes(id: string): Promise<string[]> {
  const { rows } = await world().pool.query('SELECT event_type FROM safety_events WHERE intent_id = $1 ORDER BY timestamp, recorded_at', [id]);
  return rows.map((r: { event_type: string }) => r.event_type);
}

async function costStages(id: string): Promise<string[]> {
  const { rows } = await world().pool.query('SELECT stage FROM cost_events WHERE intent_id = $1 ORDER BY timestamp', [id]);
  return rows.map((r: { stage: string }) => r.stage);
}

test('a LOW-risk intent meets only the merge gate', async () => {
  const { handle, id, scope } = await start();
  await atGate(handle, 'merge');
  await approve(handle, 'merge');
  expect((await handle.result()).status).toBe('merged');
  const state = await handle.query(stateQuery);
  expect(state.decisions.map((d) => d.gate)).toEqual(['merge']);
  expect(state.risk).toEqual({ class: 'LOW', confidence: 0.9, structured: true });
  expect(state.review).toEqual({ verdict: 'APPROVE', findings: 1, criticalSecurity: 0 });
  // A named profile is one agent everywhere: its cost rows carry its name, which the worker's
  // per-agent day budget sums.
  const { rows } = await world().pool.query('SELECT DISTINCT agent_id FROM cost_events WHERE intent_id = $1', [id]);
  expect(rows).toEqual([{ agent_id: scope.replace(/^agent:/, '') }]);
});

test('HIGH risk: the architecture gate before the LLD, then the LLD approval gate before the spec', async () => {
  const { handle, id } = await start({}, { triage: triageSaying({ risk: 'HIGH', confidence: 0.95, rationale: 'touches every caller' }) });
  const architecture = await atGate(handle, 'architecture');
  expect(architecture.pendingGate!.prompt).toMatch(/HIGH risk \(touches every caller\)/);
  expect(await costStages(id)).toEqual(['triage']); // nothing designed yet
  await approve(handle, 'architecture');
  await atGate(handle, 'lld');
  expect(await costStages(id)).toEqual(['triage', 'lld']);
  await handle.signal(decideSignal, { gate: 'lld', decision: 'reject', by: 'tester', reason: 'split it first' });
  expect(await handle.result()).toMatchObject({ status: 'rejected', reason: 'split it first' });
  expect(await costStages(id)).toEqual(['triage', 'lld']);
  const types = await eventTypes(id);
  expect(types).toContain('RISK_ASSESSED');
  expect(types.at(-1)).toBe('INTENT_REJECTED');
});

test('PROHIBITED risk never reaches a gate: the intent halts after triage', async () => {
  const { handle, id, repo } = await start({}, { triage: triageSaying({ risk: 'PROHIBITED', confidence: 0.99, rationale: 'rotates production credentials' }) });
  const before = git(repo, 'rev-parse', 'main');
  await expect(handle.result()).rejects.toThrow();
  const state = await handle.query(stateQuery);
  expect(state.error).toMatch(/^RISK_PROHIBITED: .*rotates production credentials/);
  expect(state.decisions).toEqual([]);
  expect(await costStages(id)).toEqual(['triage']);
  expect(await eventTypes(id)).not.toContain('GATE_REQUESTED');
  const { rows } = await world().pool.query("SELECT severity FROM safety_events WHERE intent_id = $1 AND event_type = 'RISK_ASSESSED'", [id]);
  expect(rows).toEqual([{ severity: 'critical' }]);
  expect(git(repo, 'rev-parse', 'main')).toBe(before);
});

test('the LLD gate follows its configured minRisk; switched off it never opens', async () => {
  const asked = await start({ gates: { lld: { minRisk: 'LOW' } } });
  await atGate(asked.handle, 'lld');
  expect(await costStages(asked.id)).toEqual(['triage', 'lld']);
  await approve(asked.handle, 'lld');
  await atGate(asked.handle, 'merge');
  await approve(asked.handle, 'merge');
  expect((await asked.handle.result()).status).toBe('merged');

  const off = await start({ gates: { lld: { enabled: false } } }, { triage: triageSaying({ risk: 'HIGH', confidence: 0.95 }) });
  await atGate(off.handle, 'architecture');
  await approve(off.handle, 'architecture');
  await atGate(off.handle, 'merge');
  expect((await off.handle.query(stateQuery)).decisions.map((d) => d.gate)).toEqual(['architecture']);
  await approve(off.handle, 'merge');
  expect((await off.handle.result()).status).toBe('merged');
});

test('a critical security finding opens the human-only security gate, with the review package', async () => {
  const finding = { severity: 'critical', category: 'security', message: 'slugify output is used unescaped in an HTML attribute', path: 'lib/strings.js' };
  // even full autonomy does not pass it
  const { handle } = await start({}, { review: reviewSaying({ verdict: 'APPROVE', findings: [finding], scores: GOOD_SCORES }) }, { level: 4 });
  const security = await atGate(handle, 'security');
  expect(security.pendingGate).toMatchObject({ humanOnly: true, prompt: expect.stringContaining('unescaped in an HTML attribute') });
  const pkg = await waitFor(async () => (await handle.query(stateQuery)).pendingGate?.package, 120_000, 'the review package');
  expect(pkg.review?.findings).toEqual([finding]);
  expect(pkg.diffSummary.map((f) => f.path)).toEqual(['lib/strings.js', 'lib/strings.test.js']);
  expect(pkg.tests.map((t) => t.passed)).toEqual([false, true]);
  expect(pkg.ledgerTrace.some((line) => line.includes('RISK_ASSESSED'))).toBe(true);
  await handle.signal(decideSignal, { gate: 'security', decision: 'reject', by: 'tester', reason: 'escape it first' });
  expect(await handle.result()).toMatchObject({ status: 'rejected', reason: 'escape it first' });
});

test('production adds a human-only gate before merge, even where the ladder passes the merge itself', async () => {
  const tester = testApprover('tester');
  const { handle, id } = await start({ environment: 'production', approvals: { keys: { tester: tester.publicKey } } }, {}, { level: 4 });
  const production = await atGate(handle, 'production');
  expect(production.pendingGate!.humanOnly).toBe(true);
  // The production gate takes only signed decisions.
  await approve(handle, 'production');
  await waitFor(async () => ((await eventTypes(id)).includes('DECISION_REFUSED') ? true : undefined), 120_000, 'the unsigned approval to be refused');
  await sendDecision(world().client, id, { gate: 'production', decision: 'approve', by: 'tester' }, { keysDir: tester.keysDir });
  expect((await handle.result()).status).toBe('merged');
  const state = await handle.query(stateQuery);
  expect(state.decisions.map((d) => `${d.gate}:${d.by}`)).toEqual(['production:tester', 'merge:warden-ladder-L4']);
  expect(await eventTypes(id)).toContain('GATE_AUTO_PASSED');
});

test('a cascade HIGH answer opens the cascade gate right after its stage', async () => {
  const widening = 'Design done. I went ahead and upgraded React. Would you like me to upgrade Vue too?';
  const { handle, id } = await start({}, { lld: [{ output: widening }] });
  const cascade = await atGate(handle, 'cascade');
  expect(cascade.pendingGate!.humanOnly).toBe(true);
  expect(await costStages(id)).toEqual(['triage', 'lld']);
  await handle.signal(decideSignal, { gate: 'cascade', decision: 'reject', by: 'tester', reason: 'stay on task' });
  expect((await handle.result()).status).toBe('rejected');
});

test('reaching 80% of the budget opens the cost-overrun gate once; it can be switched off', async () => {
  // triage 0.004 + lld = at least 80% of 0.012; each call's declared maximum (maxCallUsd) covers its cost
  const { handle, id } = await start({ limits: { budgetUsd: '0.012', maxCallUsd: '0.008' } });
  await atGate(handle, 'cost-overrun');
  expect(await costStages(id)).toEqual(['triage', 'lld']);
  await handle.signal(decideSignal, { gate: 'cost-overrun', decision: 'reject', by: 'tester', reason: 'too dear' });
  expect((await handle.result()).status).toBe('rejected');

  const off = await start({ limits: { budgetUsd: '0.012', maxCallUsd: '0.008' }, gates: { 'cost-overrun': { enabled: false } } });
  await expect(off.handle.result()).rejects.toThrow(); // no gate: the budget itself halts it later
  expect((await off.handle.query(stateQuery)).decisions).toEqual([]);
  expect(await eventTypes(off.id)).toContain('COST_WARNING');
});

test('timeout policy wait-again: escalates, waits one more timeout, then rejects', async () => {
  const { handle, id } = await start({ gates: { merge: { timeout: '2s', onTimeout: 'wait-again', escalateTo: 'oncall' } } });
  const opened = Date.parse((await atGate(handle, 'merge')).pendingGate!.requestedAt);
  expect(await handle.result()).toMatchObject({ status: 'rejected', reason: 'no decision within 2s' });
  // Two timeouts, by the workflow's clock (a rejection after one would come 2 s after the opening).
  const [rejection] = (await handle.query(stateQuery)).decisions;
  expect(rejection).toMatchObject({ decision: 'reject', timedOut: true });
  expect(Date.parse(rejection!.at) - opened).toBeGreaterThanOrEqual(3000);
  const { rows } = await world().pool.query("SELECT metadata FROM safety_events WHERE intent_id = $1 AND event_type = 'GATE_ESCALATED' ORDER BY timestamp", [id]);
  expect(rows.map((r: { metadata: { policy: string; escalateTo: string } }) => `${r.metadata.escalateTo}:${r.metadata.policy}`)).toEqual(['oncall:wait once more', 'oncall:reject']);
});

test("a decision sent from an agent's process is refused and recorded", async () => {
  const { handle, id } = await start();
  await atGate(handle, 'merge');
  const answer = await handle.executeUpdate(decideUpdate, { args: [{ gate: 'merge', decision: 'approve', by: 'alice', agentSession: `${id}/impl/2` }] });
  expect(answer).toEqual({ accepted: false, reason: `sent from inside an agent's process (${id}/impl/2): an agent may not decide its own gate` });
  expect((await handle.query(stateQuery)).pendingGate?.gate).toBe('merge');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'reject', by: 'alice', reason: 'checked' });
  await handle.result();
  expect(await eventTypes(id)).toContain('DECISION_REFUSED');
});

describe('the automation ladder', () => {
  test('L3 merges a LOW-risk intent whose checks hold without a person; L2 does not', async () => {
    const l3 = await start({}, {}, { level: 3 });
    expect((await l3.handle.result()).status).toBe('merged');
    expect((await l3.handle.query(stateQuery)).decisions.map((d) => d.by)).toEqual(['warden-ladder-L3']);

    const l2 = await start({}, {}, { level: 2 });
    const waiting = await atGate(l2.handle, 'merge');
    expect(waiting.pendingGate!.whyNotAutomatic).toBe('level L2 does not auto-pass the merge gate');
    await approve(l2.handle, 'merge');
    await l2.handle.result();
  });

  test('L3 never passes the merge gate of an intent whose agent-written code may run unconfined, or whose tests reach the network; the choice is recorded', async () => {
    for (const confinement of [{ allowUnconfinedCode: true }, { testNetwork: 'host' as const }]) {
      const { handle, id } = await start({ confinement }, {}, { level: 3 });
      const waiting = await atGate(handle, 'merge');
      expect(waiting.pendingGate!.whyNotAutomatic).toMatch(/agent-written code was allowed to run unconfined/);
      expect(await eventTypes(id)).toContain('UNCONFINED_CODE_ALLOWED');
      await handle.terminate('checked');
    }
  });

  test('L3 still asks when the judge scores fail the rule, confidence is too low, or the risk is not LOW', async () => {
    const cases: Array<[Record<string, Array<Record<string, unknown>>>, RegExp]> = [
      [{ review: reviewSaying({ verdict: 'APPROVE', scores: { ...GOOD_SCORES, autonomyAppropriateness: 2 } }) }, /judge rule: (judge average|autonomy appropriateness)/],
      [{ triage: triageSaying({ risk: 'LOW', confidence: 0.4 }) }, /confidence gate: confidence 40% < 50% for LOW risk/],
      [{ triage: triageSaying({ risk: 'MEDIUM', confidence: 0.9 }) }, /^risk is MEDIUM, not LOW$/],
      [{ triage: [{ output: demo.triage![0]!.output!.toString().split('```')[0]! }] }, /triage gave no valid structured assessment/],
    ];
    for (const [script, why] of cases) {
      const { handle } = await start({}, script, { level: 3 });
      const waiting = await atGate(handle, 'merge');
      expect(waiting.pendingGate!.whyNotAutomatic).toMatch(why);
      await handle.signal(decideSignal, { gate: 'merge', decision: 'reject', by: 'tester', reason: 'checked' });
      await handle.result();
    }
  });

  test('each finished intent counts on its profile ladder; a rejection drops the level', async () => {
    const { handle, scope } = await start({}, {}, { level: 2, pinned: false });
    await atGate(handle, 'merge');
    await handle.signal(decideSignal, { gate: 'merge', decision: 'reject', by: 'tester', reason: 'not yet' });
    await handle.result();
    const state = await waitFor(async () => {
      const s = await new LadderStore(world().pool).state(scope, { level: 0, allowLevelUp: false });
      return s.metrics.totalRuns === 1 ? s : undefined;
    }, 120_000, 'the run to be counted');
    expect(state).toMatchObject({ level: 1, pinned: false, metrics: { totalRuns: 1, successfulRuns: 0, falsePositives: 1, approvalRate: 0 } });
  });
});
