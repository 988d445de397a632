import { gateStatistics, percentile, type GateFigures } from '../../src/ledger/gate-statistics';
import type { Ledger } from '../../src/ledger/ledger';
import { ladderDecider } from '../../src/shared/ladder';
import type { DecisionKind } from '../../src/shared/decisions';
import { describeOnBackends, type FreshDatabase } from '../helpers/database';
import { gateDecision, migratedLedger, safetyEvent } from './fixtures';

/** Every figure zero or empty, to be overridden with what a group came to. */
const none: GateFigures = {
  opened: 0,
  decided: 0,
  approved: 0,
  rejected: 0,
  changesRequested: 0,
  deferred: 0,
  autoPassed: 0,
  timedOut: 0,
  escalated: 0,
  approvalRate: null,
  rejectionRate: null,
  requestChangesRate: null,
  medianSecondsToDecision: null,
  p90SecondsToDecision: null,
};
const approver = { opened: null, escalated: null };

describeOnBackends('gate statistics on the %s PostgreSQL', (baseUrl) => {
  let db: FreshDatabase;
  let ledger: Ledger;
  beforeAll(async () => {
    ({ db, ledger } = await migratedLedger(baseUrl));
  });
  afterAll(async () => {
    await db?.drop();
  });

  const t = (iso: string): Date => new Date(`${iso}Z`);
  const requested = (intentId: string, gate: string, at: string): Promise<boolean> =>
    ledger.audit.recordSafetyEvent(safetyEvent({ intentId, eventType: 'GATE_REQUESTED', stage: gate, timestamp: t(at), metadata: { gate, requestedAt: t(at).toISOString() } }));
  const decided = (intentId: string, gate: string, by: string, decision: DecisionKind, from: string, to: string, timedOut = false): Promise<boolean> =>
    ledger.audit.recordGateDecision(gateDecision({ intentId, gate, by, decision, requestedAt: t(from), decidedAt: t(to), timedOut }));

  test('a scripted set of gates: the figures per gate kind, approver and day are the ones worked out by hand', async () => {
    // g1 merge: alice approves after 60 s.
    await requested('g1', 'merge', '2029-07-01T10:00:00');
    await decided('g1', 'merge', 'alice', 'approve', '2029-07-01T10:00:00', '2029-07-01T10:01:00');
    // g2 merge: bob rejects after 300 s.
    await requested('g2', 'merge', '2029-07-01T10:00:00');
    await decided('g2', 'merge', 'bob', 'reject', '2029-07-01T10:00:00', '2029-07-01T10:05:00');
    // g3 spec: alice asks for changes after 120 s; the gate opens again and she approves with conditions after 600 s.
    await requested('g3', 'spec', '2029-07-01T10:00:00');
    await decided('g3', 'spec', 'alice', 'request-changes', '2029-07-01T10:00:00', '2029-07-01T10:02:00');
    await requested('g3', 'spec', '2029-07-01T11:00:00');
    await decided('g3', 'spec', 'alice', 'approve-with-conditions', '2029-07-01T11:00:00', '2029-07-01T11:10:00');
    // g4 merge: bob defers, then approves two hours after the request (7200 s).
    await requested('g4', 'merge', '2029-07-01T10:00:00');
    await decided('g4', 'merge', 'bob', 'defer', '2029-07-01T10:00:00', '2029-07-01T10:30:00');
    await decided('g4', 'merge', 'bob', 'approve', '2029-07-01T10:00:00', '2029-07-01T12:00:00');
    // g5 spec: nobody decides; escalated and rejected by the timeout.
    await requested('g5', 'spec', '2029-07-01T10:00:00');
    await ledger.audit.recordSafetyEvent(safetyEvent({ intentId: 'g5', eventType: 'GATE_ESCALATED', severity: 'high', stage: 'spec', timestamp: t('2029-07-01T14:00:00'), metadata: { gate: 'spec' } }));
    await decided('g5', 'spec', 'warden', 'reject', '2029-07-01T10:00:00', '2029-07-01T14:00:00', true);
    // g6 merge: passed by the automation ladder (no request to a person).
    await decided('g6', 'merge', ladderDecider(3), 'approve', '2029-07-01T15:00:00', '2029-07-01T15:00:00');
    // g7 merge: requested late on the 1st, alice approves on the 2nd after 3600 s.
    await requested('g7', 'merge', '2029-07-01T23:00:00');
    await decided('g7', 'merge', 'alice', 'approve', '2029-07-01T23:00:00', '2029-07-02T00:00:00');
    // g8 lld: still waiting.
    await requested('g8', 'lld', '2029-07-02T09:00:00');
    // Outside the period: a decision the day before, a request at the period's (excluded) end.
    await decided('g0', 'merge', 'alice', 'reject', '2029-06-30T10:00:00', '2029-06-30T10:00:10');
    await requested('g9', 'merge', '2029-07-03T00:00:00');

    const stats = await gateStatistics(ledger.pool, { since: t('2029-07-01T00:00:00'), until: t('2029-07-03T00:00:00') });
    expect(stats.since).toBe('2029-07-01T00:00:00.000Z');
    expect(stats.until).toBe('2029-07-03T00:00:00.000Z');
    // Person decisions, sorted by seconds: 60 (g1) 120 (g3) 300 (g2) 600 (g3) 3600 (g7) 7200 (g4).
    // Median: between the 3rd and 4th, (300 + 600) / 2 = 450. p90: rank 0.9 × 5 = 4.5, 3600 + 0.5 × 3600 = 5400.
    expect(stats.total).toEqual({
      ...none,
      opened: 8,
      decided: 6,
      approved: 4,
      rejected: 1,
      changesRequested: 1,
      deferred: 1,
      autoPassed: 1,
      timedOut: 1,
      escalated: 1,
      approvalRate: 0.6667,
      rejectionRate: 0.1667,
      requestChangesRate: 0.1667,
      medianSecondsToDecision: 450,
      p90SecondsToDecision: 5400,
    });
    expect(stats.byGate).toEqual([
      { gate: 'lld', ...none, opened: 1 },
      // 60 300 3600 7200: median (300 + 3600) / 2 = 1950; p90 at rank 2.7: 3600 + 0.7 × 3600 = 6120.
      { gate: 'merge', ...none, opened: 4, decided: 4, approved: 3, rejected: 1, deferred: 1, autoPassed: 1, approvalRate: 0.75, rejectionRate: 0.25, requestChangesRate: 0, medianSecondsToDecision: 1950, p90SecondsToDecision: 6120 },
      // 120 600: median 360; p90 at rank 0.9: 120 + 0.9 × 480 = 552.
      { gate: 'spec', ...none, opened: 3, decided: 2, approved: 1, changesRequested: 1, timedOut: 1, escalated: 1, approvalRate: 0.5, rejectionRate: 0, requestChangesRate: 0.5, medianSecondsToDecision: 360, p90SecondsToDecision: 552 },
    ]);
    expect(stats.byApprover).toEqual([
      // 60 120 600 3600: median (120 + 600) / 2 = 360; p90 at rank 2.7: 600 + 0.7 × 3000 = 2700.
      { approver: 'alice', ...none, ...approver, decided: 4, approved: 3, changesRequested: 1, approvalRate: 0.75, rejectionRate: 0, requestChangesRate: 0.25, medianSecondsToDecision: 360, p90SecondsToDecision: 2700 },
      // 300 7200: median 3750; p90 at rank 0.9: 300 + 0.9 × 6900 = 6510.
      { approver: 'bob', ...none, ...approver, decided: 2, approved: 1, rejected: 1, deferred: 1, approvalRate: 0.5, rejectionRate: 0.5, requestChangesRate: 0, medianSecondsToDecision: 3750, p90SecondsToDecision: 6510 },
      { approver: 'warden', ...none, ...approver, timedOut: 1 },
      { approver: 'warden-ladder-L3', ...none, ...approver, autoPassed: 1 },
    ]);
    expect(stats.byDay).toEqual([
      // 60 120 300 600 7200: median 300; p90 at rank 3.6: 600 + 0.6 × 6600 = 4560.
      { day: '2029-07-01', ...none, opened: 7, decided: 5, approved: 3, rejected: 1, changesRequested: 1, deferred: 1, autoPassed: 1, timedOut: 1, escalated: 1, approvalRate: 0.6, rejectionRate: 0.2, requestChangesRate: 0.2, medianSecondsToDecision: 300, p90SecondsToDecision: 4560 },
      { day: '2029-07-02', ...none, opened: 1, decided: 1, approved: 1, approvalRate: 1, rejectionRate: 0, requestChangesRate: 0, medianSecondsToDecision: 3600, p90SecondsToDecision: 3600 },
    ]);

    // Without bounds, the rows outside the period count too.
    const all = await gateStatistics(ledger.pool);
    expect([all.since, all.until, all.total.opened, all.total.decided, all.total.rejected]).toEqual([null, null, 9, 7, 2]);
  });

  test('a time to decision keeps its milliseconds', async () => {
    await decided('ms', 'custom-gate', 'carol', 'approve', '2029-08-01T10:00:00.000', '2029-08-01T10:00:01.250');
    const stats = await gateStatistics(ledger.pool, { since: t('2029-08-01T00:00:00') });
    expect(stats.total.medianSecondsToDecision).toBe(1.25);
  });
});

test('percentile interpolates between the nearest ranks', () => {
  expect(percentile([], 0.5)).toBeNull();
  expect(percentile([7], 0.9)).toBe(7);
  expect(percentile([1, 2, 3, 4], 0.5)).toBe(2.5);
  expect(percentile([10, 20, 30, 40, 50, 60, 70, 80, 90, 100], 0.9)).toBe(91);
});
