import { LadderStore } from '../../src/ledger/ladder-store';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { demoScript, startSampleIntent, useTestWorld, waitFor } from '../helpers/env';

/**
 * The daily report and the audit timeline read what real intent runs wrote: the gate keeper's
 * own deciders, the workflow's stage starts and test results. (The ledger tests write rows by hand.)
 */
const world = useTestWorld('report-from-runs');

test('a ladder pass is auto-executed, a person at a gate is a manual intervention and an escalation', async () => {
  const today = new Date().toISOString().slice(0, 10);
  const agentName = `agent-l3-${Date.now()}`;
  await new LadderStore(world().pool).setLevel({ scope: `agent:${agentName}`, level: 3, pinned: true, by: 'tester', defaults: { level: 0, allowLevelUp: false } });
  const auto = await startSampleIntent(world(), 'auto', { agent: { kind: 'scripted', name: agentName, scriptPath: demoScript() } });
  expect((await auto.handle.result()).status).toBe('merged');

  const byHand = await startSampleIntent(world(), 'hand');
  await waitFor(async () => ((await byHand.handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
  await byHand.handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'alice' });
  expect((await byHand.handle.result()).status).toBe('merged');

  const report = await world().ledger.queries.dailyReport({ date: today });
  expect(report.layers.thresholds).toEqual({ autoExecuted: 1, escalated: 1, timedOut: 0, averageConfidencePct: 90, assessments: 2 });
  expect(report.layers.humanOverride).toEqual({ emergencyStops: 0, manualInterventions: 1, decisionQueue: 0 });
  expect(report.layers.history.snapshots).toEqual({ status: 'OK', ended: 2, kept: 2, missing: [] });

  // The timeline tells each stage's start, and that impl attempt 1 failed its tests.
  const timeline = await world().ledger.queries.timeline(auto.id);
  const story = timeline.filter((e) => ['STAGE_STARTED', 'STAGE_COMPLETED', 'TESTS_PASSED', 'TESTS_FAILED', 'GATE_AUTO_PASSED'].includes(e.type)).map((e) => `${e.type} ${e.stage}`);
  expect(story).toEqual([
    'STAGE_STARTED triage', 'STAGE_COMPLETED triage',
    'STAGE_STARTED lld', 'STAGE_COMPLETED lld',
    'STAGE_STARTED spec', 'STAGE_COMPLETED spec',
    'STAGE_STARTED impl', 'STAGE_COMPLETED impl', 'TESTS_FAILED impl',
    'STAGE_STARTED impl', 'STAGE_COMPLETED impl', 'TESTS_PASSED impl',
    'STAGE_STARTED review', 'STAGE_COMPLETED review',
    'GATE_AUTO_PASSED review',
    'STAGE_STARTED merge',
  ]);
  expect(timeline.find((e) => e.type === 'TESTS_FAILED')).toMatchObject({ severity: 'medium', summary: expect.stringMatching(/^impl attempt 1: tests /) });
});
