import { Ledger } from '../../src/ledger/ledger';
import { BehaviourWatch, recentAgentRuns, type AgentCallFacts } from '../../src/safety/behaviour-watch';
import type { CircuitStateChange } from '../../src/safety/circuit-breaker';
import { migratedDatabaseForFile } from '../helpers/database';
import { testDatabaseUrl } from '../helpers/env';

const database = migratedDatabaseForFile(testDatabaseUrl);

let clock = 1_000_000;
function call(overrides: Partial<AgentCallFacts> = {}): AgentCallFacts {
  clock += 120_000;
  return { intentId: 'i1', stage: 'impl', agentId: 'claude', modelId: 'claude-sonnet-4-5', request: { feedback: 'tests failed' }, outputHash: 'same', costUsd: '0.01', latencyMs: 1_000, at: clock, ...overrides };
}

function flip(endpoint: string, to: 'OPEN' | 'CLOSED', at: number): CircuitStateChange {
  return { endpoint, from: to === 'OPEN' ? 'CLOSED' : 'HALF_OPEN', to, reason: 'consecutive-failures', detail: '', at };
}

test('every attempt counts, Temporal retries included: 5 identical answers to the same request are a HIGH loop, handed over once', () => {
  const watch = new BehaviourWatch();
  const findings = Array.from({ length: 5 }, () => watch.agentCall(call()));
  expect(findings.slice(0, 4).flat().filter((f) => f.kind === 'loop')).toEqual([]);
  expect(findings[4].map((f) => `${f.kind}:${f.severity}`)).toContain('loop:high');
  expect(watch.deliver('i1')).toEqual([expect.objectContaining({ kind: 'loop', severity: 'high' })]);
  expect(watch.deliver('i1')).toEqual([]);
  // A different request (new feedback) with the same answer is not the same action.
  const other = new BehaviourWatch();
  const varied = Array.from({ length: 6 }, (_, i) => other.agentCall(call({ request: { feedback: `failure ${i}` } }))).flat();
  expect(varied.filter((f) => f.kind === 'loop')).toEqual([]);
});

test('a flapping circuit is HIGH for the intent whose call saw it, kept until its next answer', () => {
  const watch = new BehaviourWatch();
  const seen = ['OPEN', 'CLOSED', 'OPEN', 'CLOSED'].flatMap((to, i) => watch.breakerChanges([flip('openai https://h/v1 m', to as 'OPEN' | 'CLOSED', i * 1_000)], 'i2'));
  expect(seen).toEqual([expect.objectContaining({ kind: 'breaker-oscillation', severity: 'high', endpoint: 'openai https://h/v1 m', scope: 'i2' })]);
  expect(watch.deliver('other-intent')).toEqual([]);
  expect(watch.deliver('i2')).toEqual([expect.objectContaining({ kind: 'breaker-oscillation' })]);
});

test("baselines start from the ledger's recent answered calls, per stage and agent", async () => {
  const ledger = new Ledger(database().pool);
  for (let i = 0; i < 12; i++) {
    const startedAt = new Date(Date.UTC(2030, 0, 1, 0, i));
    await ledger.activityRuns.record({
      workflowId: 'w',
      runId: 'r',
      activityId: String(i),
      attempt: 1,
      activityType: i === 11 ? 'runTests' : 'runAgentStage',
      taskQueue: 'q',
      stage: 'review',
      agentId: 'claude',
      modelId: 'claude-sonnet-4-5',
      startedAt,
      endedAt: new Date(startedAt.getTime() + 2_000 + (i % 2) * 500),
      outcome: i === 10 ? 'failed' : 'completed',
      spendUsd: i % 2 ? '0.021' : '0.019',
    });
  }
  const samples = await recentAgentRuns(database().pool);
  expect(samples).toHaveLength(10); // the failed call and the test run are not baseline material
  expect(samples[0]).toEqual({ stage: 'review', agent: 'claude/claude-sonnet-4-5', latencyMs: 2_000, costUsd: '0.019000' });

  const watch = new BehaviourWatch(() => recentAgentRuns(database().pool));
  await watch.ready();
  const first = watch.agentCall(call({ intentId: 'fresh', stage: 'review', costUsd: '0.50', latencyMs: 2_100 }));
  expect(first).toEqual([expect.objectContaining({ kind: 'cost-outlier', severity: 'high', scope: 'fresh' })]);

  const broken = new BehaviourWatch(() => Promise.reject(new Error('ledger down')));
  const errors: unknown[] = [];
  await broken.ready((e) => errors.push(e));
  expect(errors).toHaveLength(1);
  expect(broken.agentCall(call({ intentId: 'fresh', stage: 'review', costUsd: '0.50' }))).toEqual([]);
});
