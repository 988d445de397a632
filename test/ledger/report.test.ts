import { ZodError } from 'zod';
import { HEALTH_RULE, POLICY_DECIDER, type Ledger } from '../../src/ledger/ledger';
import type { SafetyEventInput } from '../../src/ledger/types';
import type { FreshDatabase } from '../helpers/database';
import { testBackends } from '../helpers/database';
import { costEvent, gateDecision, migratedLedger, safetyEvent } from './fixtures';

describe.each(testBackends())('daily health report on the %s PostgreSQL', (_backend, baseUrl) => {
  let db: FreshDatabase;
  let ledger: Ledger;
  beforeAll(async () => {
    ({ db, ledger } = await migratedLedger(baseUrl));
  });
  afterAll(async () => {
    await db?.drop();
  });

  /** Noon (UTC) of `date`, plus `minutes`. */
  const at = (date: string, minutes = 0): Date => new Date(Date.parse(`${date}T12:00:00Z`) + minutes * 60_000);
  const event = (date: string, overrides: Partial<SafetyEventInput>): Promise<boolean> =>
    ledger.recordSafetyEvent(safetyEvent({ timestamp: at(date), ...overrides }));

  test('a quiet day under budget is GREEN, and every layer is counted', async () => {
    const date = '2029-06-01';
    // Day edges: 00:00:00 UTC belongs to the day, 24:00 to the next one.
    await ledger.recordCost(costEvent({ timestamp: new Date(`${date}T00:00:00.000Z`), usd: '1.000000' }));
    await ledger.recordCost(costEvent({ timestamp: at(date), usd: '2.999999' }));
    await ledger.recordCost(costEvent({ timestamp: new Date('2029-06-02T00:00:00.000Z'), usd: '50.000000' }));
    await event(date, { intentId: 'a', eventType: 'STAGE_COMPLETED' });
    await event(date, { intentId: 'a', eventType: 'STAGE_COMPLETED' });
    await event(date, { intentId: 'a', eventType: 'INTENT_MERGED' });
    await event(date, { intentId: 'a', eventType: 'ROLLBACK', severity: 'medium' });
    await event(date, { intentId: 'a', eventType: 'OVERRIDE', severity: 'medium' });
    await event(date, { intentId: 'a', eventType: 'ANOMALY_DETECTED', severity: 'low', metadata: { pattern: 'rapid identical requests' } });
    await event(date, { intentId: 'a', eventType: 'STAGNATION_DETECTED', severity: 'medium' });
    await event(date, { intentId: 'a', eventType: 'STAGE_FAILED', severity: 'high' }); // not an anomaly
    await ledger.recordGateDecision(gateDecision({ intentId: 'a', decidedAt: at(date), by: POLICY_DECIDER }));
    await ledger.recordGateDecision(gateDecision({ intentId: 'b', decidedAt: at(date), by: 'alice' }));
    // Gates: b's was decided; c's is still waiting at the end of the day; d's intent was cancelled.
    await event(date, { intentId: 'b', eventType: 'GATE_REQUESTED', metadata: { gate: 'merge' }, timestamp: at(date, -5) });
    await event(date, { intentId: 'c', eventType: 'GATE_REQUESTED', metadata: { gate: 'merge' } });
    await event(date, { intentId: 'd', eventType: 'GATE_REQUESTED', metadata: { gate: 'merge' } });
    await event(date, { intentId: 'd', eventType: 'INTENT_CANCELLED', timestamp: at(date, 1) });

    const report = await ledger.dailyReport({ date, dayBudgetUsd: '10' });
    expect(report).toEqual({
      date,
      layers: {
        limits: { iterations: 2, spendUsd: '3.999999', budgetUsd: '10', remainingUsd: '6.000001', remainingPct: 60 },
        thresholds: { autoExecuted: 1, escalated: 0 },
        history: { commits: 3, rollbacks: 1 },
        humanOverride: { emergencyStops: 0, manualInterventions: 2, decisionQueue: 1 },
        anomalies: {
          total: 2,
          bySeverity: { info: 0, low: 1, medium: 1, high: 0, critical: 0 },
          patterns: ['STAGNATION_DETECTED', 'rapid identical requests'],
        },
      },
      health: 'GREEN',
      rule: `${HEALTH_RULE}. GREEN: none of these happened.`,
    });
    // The waiting gate is still queued a day later, and gone once decided.
    expect((await ledger.dailyReport({ date: '2029-06-02' })).layers.humanOverride.decisionQueue).toBe(1);
    await ledger.recordGateDecision(gateDecision({ intentId: 'c', decidedAt: at('2029-06-03') }));
    expect((await ledger.dailyReport({ date: '2029-06-03' })).layers.humanOverride.decisionQueue).toBe(0);
  });

  test.each([
    ['a high anomaly', '2029-07-01', async (d: string) => void (await event(d, { eventType: 'CASCADE_DETECTED', severity: 'high' })), /1 high anomaly/],
    ['a gate escalation', '2029-07-02', async (d: string) => void (await event(d, { eventType: 'GATE_ESCALATED', severity: 'high' })), /1 escalation/],
    ['spend at 80% of the budget', '2029-07-03', async (d: string) => void (await ledger.recordCost(costEvent({ timestamp: at(d), usd: '8.00' }))), /spend \$8\.000000 is at least 80% of the \$10 budget/],
  ])('YELLOW: %s', async (_what, date, setup, why) => {
    await setup(date);
    const report = await ledger.dailyReport({ date, dayBudgetUsd: '10' });
    expect(report.health).toBe('YELLOW');
    expect(report.rule.startsWith(HEALTH_RULE)).toBe(true);
    expect(report.rule).toMatch(why);
  });

  test.each([
    ['a critical anomaly', '2029-08-01', async (d: string) => void (await event(d, { eventType: 'SANDBOX_ESCAPE_ATTEMPTED', severity: 'critical' })), /1 critical anomaly/],
    ['spend over the budget', '2029-08-02', async (d: string) => void (await ledger.recordCost(costEvent({ timestamp: at(d), usd: '10.000001' }))), /over the \$10 budget/],
    ['an emergency stop (and a high anomaly too)', '2029-08-03', async (d: string) => {
      await event(d, { eventType: 'GLOBAL_STOP_SET', severity: 'critical' });
      await event(d, { eventType: 'ANOMALY_DETECTED', severity: 'high' });
    }, /RED: 1 emergency stop\(s\)\.$/],
  ])('RED: %s', async (_what, date, setup, why) => {
    await setup(date);
    const report = await ledger.dailyReport({ date, dayBudgetUsd: '10' });
    expect(report.health).toBe('RED');
    expect(report.rule).toMatch(why);
  });

  test('a stop set through the ledger today makes today RED', async () => {
    const today = new Date().toISOString().slice(0, 10);
    await ledger.setGlobalStop('alice', 'everything is on fire');
    const report = await ledger.dailyReport({ date: today });
    expect(report.layers.humanOverride.emergencyStops).toBeGreaterThanOrEqual(1);
    expect(report.health).toBe('RED');
    await ledger.clearGlobalStop('alice', 'out');
  });

  test('exactly at the budget is YELLOW, not RED; without a budget spend does not count; an empty day is GREEN', async () => {
    const date = '2029-09-01';
    await ledger.recordCost(costEvent({ timestamp: at(date), usd: '10.000000' }));
    const atBudget = await ledger.dailyReport({ date, dayBudgetUsd: '10.00' });
    expect(atBudget.health).toBe('YELLOW');
    expect(atBudget.layers.limits).toMatchObject({ remainingUsd: '0.000000', remainingPct: 0 });
    const noBudget = await ledger.dailyReport({ date });
    expect(noBudget.health).toBe('GREEN');
    expect(noBudget.layers.limits).toEqual({ iterations: 1, spendUsd: '10.000000' });
    const empty = await ledger.dailyReport({ date: '2029-09-02', dayBudgetUsd: '0' });
    expect(empty.health).toBe('GREEN');
    expect(empty.layers.limits).toEqual({ iterations: 0, spendUsd: '0.000000', budgetUsd: '0', remainingUsd: '0.000000', remainingPct: 0 });
    await expect(ledger.dailyReport({ date: '2029-13-01' })).rejects.toBeInstanceOf(ZodError);
    await expect(ledger.dailyReport({ date, dayBudgetUsd: 'ten' })).rejects.toBeInstanceOf(ZodError);
  });
});
