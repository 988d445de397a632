import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import type { IntentInput } from '../../src/shared/intent';
import { decideSignal, pauseSignal, resumeSignal, stateQuery } from '../../src/shared/messages';
import type { IntentState } from '../../src/shared/state';
import { demoScript, demoStages, git, startSampleIntent, useTestWorld, waitFor } from '../helpers/env';
import { HeldAgentCalls } from '../helpers/held-agent-calls';
import { untilIdle } from '../helpers/workflow-idle';

/** One integration test per workflow-side layer, through a real workflow with the scripted agent. */


const demo = { stages: demoStages() };
const script = demoScript;
const BAD_IMPL = demo.stages.impl![0]!;

const held = new HeldAgentCalls();
const world = useTestWorld('safety', { wrap: held.wrap });

function start(overrides: Partial<IntentInput> & { scriptPath?: string } = {}) {
  const { scriptPath, ...rest } = overrides;
  return startSampleIntent(world(), 's', { agent: { kind: 'scripted', scriptPath: scriptPath ?? script() }, ...rest });
}

async function failure(handle: WorkflowHandle): Promise<string> {
  const error = await handle.result().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(WorkflowFailedError);
  return String((error as WorkflowFailedError).cause?.message);
}

async function events(id: string): Promise<Array<{ event_type: string; severity: string; reason: string }>> {
  return (await world().pool.query('SELECT event_type, severity, reason FROM safety_events WHERE intent_id = $1 ORDER BY timestamp', [id])).rows;
}

async function until(handle: WorkflowHandle, test: (s: IntentState) => boolean, what: string): Promise<IntentState> {
  return waitFor(async () => {
    const s = await handle.query(stateQuery);
    return test(s) ? s : undefined;
  }, 60_000, what);
}

test('iteration cap: the total attempt cap halts the intent before the call over it, with MAX_ITERATIONS_EXCEEDED', async () => {
  // triage, lld, spec, impl#1 fit in 4; impl#2 would be the 5th call
  const { handle, repo, id } = await start({ limits: { totalAttempts: 4 } });
  const before = git(repo, 'rev-parse', 'main');
  expect(await failure(handle)).toMatch(/^MAX_ITERATIONS_EXCEEDED: intent \(all stages\): attempt 5 would exceed the cap of 4/);
  const state = await handle.query(stateQuery);
  expect(state.attempts.impl).toBe(2); // entered, but the agent was never called a second time
  expect((await world().pool.query('SELECT count(*)::int AS n FROM cost_events WHERE intent_id = $1', [id])).rows[0].n).toBe(4);
  expect((await events(id)).filter((e) => e.event_type === 'MAX_ITERATIONS_EXCEEDED')).toHaveLength(1);
  expect(git(repo, 'rev-parse', 'main')).toBe(before);
});

test('two-strike rule: two impl attempts with the same failing tests halt with STAGNATION_DETECTED', async () => {
  const { handle, id } = await start({ scriptPath: script({ impl: [BAD_IMPL] }) });
  expect(await failure(handle)).toMatch(/^STAGNATION_DETECTED/);
  const state = await handle.query(stateQuery);
  expect(state.tests).toHaveLength(2);
  expect(state.tests.every((t) => !t.passed)).toBe(true);
  expect((await events(id)).find((e) => e.event_type === 'STAGNATION_DETECTED')).toMatchObject({ severity: 'high' });
});

test('intent budget: warns at 80% and asks at the cost-overrun gate, then halts before a call whose maximum cost would pass the limit', async () => {
  // triage 0.004 → lld (0.004 + max 0.010 ≤ 0.014) → spent 0.012 ≥ 80% → spec would need 0.022 > 0.014
  const { handle, id } = await start({ limits: { budgetUsd: '0.014', maxCallUsd: '0.010' } });
  const asked = await until(handle, (s) => s.pendingGate?.gate === 'cost-overrun', 'the cost-overrun gate');
  expect(asked.pendingGate!.prompt).toBe('Spend is $0.012000 of the $0.014 budget (80% reached). Continue?');
  await handle.signal(decideSignal, { gate: 'cost-overrun', decision: 'approve', by: 'tester' });
  expect(await failure(handle)).toMatch(/^COST_BUDGET_EXCEEDED/);
  const state = await handle.query(stateQuery);
  expect(state.spendUsd).toBe('0.012000');
  const types = (await events(id)).map((e) => e.event_type);
  expect(types).toContain('COST_WARNING');
  expect(types).toContain('COST_BUDGET_EXCEEDED');
  expect(types.indexOf('COST_WARNING')).toBeLessThan(types.indexOf('COST_BUDGET_EXCEEDED'));
});

test('stage budget: impl is halted once its own budget cannot take another call, whatever the intent has left', async () => {
  // impl #1 costs 0.012; a second impl call (max 0.012) would pass impl's 0.020
  const { handle, id } = await start({ scriptPath: script({ impl: [BAD_IMPL, demo.stages.impl![1]!] }), limits: { stageBudgetUsd: { impl: '0.020' }, maxCallUsd: '0.012' } });
  expect(await failure(handle)).toMatch(/^COST_BUDGET_EXCEEDED: stage impl: /);
  const calls = await world().pool.query('SELECT stage FROM cost_events WHERE intent_id = $1 ORDER BY timestamp', [id]);
  expect(calls.rows.map((r: { stage: string }) => r.stage)).toEqual(['triage', 'lld', 'spec', 'impl']);
});

test('cooldown: the same stage is not dispatched again before its cooldown has passed', async () => {
  const { handle } = await start({ limits: { cooldown: '3s' } });
  await until(handle, (s) => Boolean(s.pendingGate), 'the merge gate');
  const history = await handle.fetchHistory();
  const timers = history.events!.filter((e) => e.timerStartedEventAttributes);
  expect(timers.length).toBeGreaterThanOrEqual(2); // the total time limit, and the cooldown wait: workflow timers
  const times = history.events!
    .filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runAgentStage')
    .map((e) => Number(e.eventTime!.seconds) * 1000 + Math.floor((e.eventTime!.nanos ?? 0) / 1e6));
  // impl #1 and impl #2 are the 4th and 5th agent calls
  expect(times[4]! - times[3]!).toBeGreaterThanOrEqual(2900);
  await handle.signal(decideSignal, { gate: 'merge', decision: 'reject', by: 'tester', reason: 'done' });
  await handle.result();
});

test('pause holds the next stage until resume', async () => {
  // Triage is held open until the pause is in: the pause certainly comes while it runs.
  const releaseTriage = held.holdNext((input) => input.stage === 'triage');
  const { handle, id } = await start();
  await until(handle, (s) => s.attempts.triage === 1, 'triage to start');
  await handle.signal(pauseSignal, { by: 'operator', reason: 'look first' });
  const paused = await until(handle, (s) => s.status === 'paused', 'paused');
  expect(paused.paused).toMatchObject({ by: 'operator', reason: 'look first' });
  releaseTriage();
  // Triage ends; without the hold, lld would be scheduled before the workflow goes idle.
  await waitFor(async () => ((await world().pool.query("SELECT 1 FROM safety_events WHERE intent_id = $1 AND event_type = 'STAGE_COMPLETED'", [id])).rowCount ? true : undefined), 120_000, 'triage to end');
  await untilIdle(handle);
  const still = await handle.query(stateQuery);
  expect(still.status).toBe('paused');
  expect(still.tests).toEqual([]);
  const calls = await world().pool.query('SELECT stage FROM cost_events WHERE intent_id = $1', [id]);
  expect(calls.rows.map((r: { stage: string }) => r.stage)).toEqual(['triage']);
  await handle.signal(resumeSignal, { by: 'operator' });
  await until(handle, (s) => Boolean(s.pendingGate), 'the merge gate');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'operator' });
  expect((await handle.result()).status).toBe('merged');
  expect((await events(id)).filter((e) => e.event_type === 'OVERRIDE').map((e) => e.reason)).toEqual(['paused by operator: look first (for at most 24h, then: stop)', 'resumed by operator']);
});

test('blast radius: a change far beyond triage\'s prediction stops at a gate with both numbers; reject halts it', async () => {
  const prediction = JSON.stringify({ risk: 'LOW', confidence: 0.9, predicted: { files: 1, lines: 2 } });
  const { handle, repo } = await start({ scriptPath: script({ triage: [{ output: `Small change.\n${prediction}\n` }] }) });
  const atGate = await until(handle, (s) => s.pendingGate?.gate === 'blast-radius', 'the blast-radius gate');
  expect(atGate.pendingGate!.prompt).toMatch(/The change is 2 files \/ \d+ lines; triage predicted 1 files \/ 2 lines/);
  expect(atGate.blastRadius?.predicted).toEqual({ files: 1, lines: 2 });
  const before = git(repo, 'rev-parse', 'main');
  await handle.signal(decideSignal, { gate: 'blast-radius', decision: 'reject', by: 'tester', reason: 'too big' });
  expect(await failure(handle)).toMatch(/stopped at the blast-radius gate: too big/);
  expect(git(repo, 'rev-parse', 'main')).toBe(before);
});

test('blast radius: approving the gate lets the intent go on to the merge gate', async () => {
  const prediction = JSON.stringify({ predicted: { files: 1, lines: 2 } });
  const { handle } = await start({ scriptPath: script({ triage: [{ output: prediction }] }) });
  await until(handle, (s) => s.pendingGate?.gate === 'blast-radius', 'the blast-radius gate');
  await handle.signal(decideSignal, { gate: 'blast-radius', decision: 'approve', by: 'tester' });
  await until(handle, (s) => s.pendingGate?.gate === 'merge', 'the merge gate');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');
});

test('total time limit: a workflow timer stops the intent, kills the agent and removes the worktree', async () => {
  // The agent would answer in ten minutes, after the test's own timeout: only the limit can end it.
  const { handle, repo, id } = await start({ scriptPath: script({ triage: [{ output: 'slow', delayMs: 600_000 }] }), limits: { totalTimeout: '3s' } });
  expect(await failure(handle)).toBe('TIME_LIMIT_EXCEEDED: the intent has worked 3 s, its limit is 3 s');
  expect(git(repo, 'worktree', 'list').split('\n')).toHaveLength(1);
  expect((await events(id)).map((e) => e.event_type)).toContain('INTENT_FAILED');
});
