import { ZodError } from 'zod';
import type { Ledger } from '../../src/ledger/ledger';
import { ladderDecider } from '../../src/shared/ladder';
import { formatReport } from '../../src/ledger/report-text';
import type { DailyReport, SafetyEventInput } from '../../src/ledger/types';
import type { FreshDatabase } from '../helpers/database';
import { describeOnBackends } from '../helpers/database';
import { costEvent, gateDecision, migratedLedger, safetyEvent } from './fixtures';

/** The rule every daily report states, word for word. */
const HEALTH_RULE =
  'RED if an anomaly is critical, an emergency stop was set, or spend went over the day budget (0 = no limit); ' +
  'YELLOW if an anomaly is high, a gate timed out, a state snapshot is missing, or spend reached 80% of the day budget; GREEN otherwise';

describeOnBackends('daily health report on the %s PostgreSQL', (baseUrl) => {
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
    ledger.audit.recordSafetyEvent(safetyEvent({ timestamp: at(date), ...overrides }));

  test('a quiet day under budget is GREEN, and every layer is counted', async () => {
    const date = '2029-06-01';
    // Day edges: 00:00:00 UTC belongs to the day, 24:00 to the next one.
    await ledger.audit.recordCost(costEvent({ timestamp: new Date(`${date}T00:00:00.000Z`), usd: '1.000000' }));
    await ledger.audit.recordCost(costEvent({ timestamp: at(date), usd: '2.999999' }));
    await ledger.audit.recordCost(costEvent({ timestamp: new Date('2029-06-02T00:00:00.000Z'), usd: '50.000000' }));
    await event(date, { intentId: 'a', eventType: 'STAGE_COMPLETED' });
    await event(date, { intentId: 'a', eventType: 'STAGE_COMPLETED' });
    await event(date, { intentId: 'd', eventType: 'STAGE_COMPLETED' });
    await event(date, { intentId: 'a', eventType: 'ROLLBACK', severity: 'medium' });
    await event(date, { intentId: 'a', eventType: 'OVERRIDE', severity: 'medium' });
    await event(date, { intentId: 'a', eventType: 'ANOMALY_DETECTED', severity: 'low', metadata: { pattern: 'rapid identical requests' } });
    await event(date, { intentId: 'a', eventType: 'STAGNATION_DETECTED', severity: 'medium' });
    await event(date, { intentId: 'a', eventType: 'STAGE_FAILED', severity: 'high' }); // not an anomaly
    // The deciders the gate keeper writes: the ladder's pass (auto-executed), a person, a timeout.
    await ledger.audit.recordGateDecision(gateDecision({ intentId: 'a', decidedAt: at(date), by: ladderDecider(3) }));
    await ledger.audit.recordGateDecision(gateDecision({ intentId: 'b', decidedAt: at(date), by: 'alice' }));
    await ledger.audit.recordGateDecision(gateDecision({ intentId: 'e', decidedAt: at(date), by: 'warden', decision: 'reject', timedOut: true }));
    // Gates handed to a person: b's was decided; c's is still waiting at the end of the day; d's intent was cancelled.
    await event(date, { intentId: 'b', eventType: 'GATE_REQUESTED', metadata: { gate: 'merge' }, timestamp: at(date, -5) });
    await event(date, { intentId: 'c', eventType: 'GATE_REQUESTED', metadata: { gate: 'merge' } });
    await event(date, { intentId: 'd', eventType: 'GATE_REQUESTED', metadata: { gate: 'merge' } });
    await event(date, { intentId: 'd', eventType: 'INTENT_CANCELLED', timestamp: at(date, 1), metadata: { lineagePath: '/lineage/d' } });
    // Triage confidence: 0.9 and 0.75 average to 82.5%; an assessment without a number is left out.
    await event(date, { intentId: 'a', eventType: 'RISK_ASSESSED', metadata: { confidence: 0.9 } });
    await event(date, { intentId: 'b', eventType: 'RISK_ASSESSED', metadata: { confidence: 0.75 } });
    await event(date, { intentId: 'c', eventType: 'RISK_ASSESSED', metadata: {} });
    // a merged with its lineage kept; d (above) was cancelled with it kept; f failed before any stage finished.
    await event(date, { intentId: 'a', eventType: 'INTENT_MERGED', metadata: { lineagePath: '/repo/docs/lineage/done/a' } });
    await event(date, { intentId: 'f', eventType: 'INTENT_FAILED', severity: 'high', metadata: { lineagePath: null } });

    const report = await ledger.queries.dailyReport({ date, dayBudgetUsd: '10' });
    expect(report).toEqual({
      date,
      layers: {
        limits: { iterations: 2, spendUsd: '3.999999', budgetUsd: '10', remainingUsd: '6.000001', remainingPct: 60 },
        thresholds: { autoExecuted: 1, escalated: 3, timedOut: 0, averageConfidencePct: 82.5, assessments: 2 },
        history: { commits: 4, rollbacks: 1, snapshots: { status: 'OK', ended: 3, kept: 2, missing: [] } },
        // alice's decision and the OVERRIDE; not the ladder's pass, not the timeout
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
    expect((await ledger.queries.dailyReport({ date: '2029-06-02' })).layers.humanOverride.decisionQueue).toBe(1);
    await ledger.audit.recordGateDecision(gateDecision({ intentId: 'c', decidedAt: at('2029-06-03') }));
    expect((await ledger.queries.dailyReport({ date: '2029-06-03' })).layers.humanOverride.decisionQueue).toBe(0);
  });

  test.each([
    ['a high anomaly', '2029-07-01', async (d: string) => void (await event(d, { eventType: 'CASCADE_DETECTED', severity: 'high' })), /1 high anomaly/],
    ['a gate timeout', '2029-07-02', async (d: string) => void (await event(d, { eventType: 'GATE_ESCALATED', severity: 'high' })), /1 gate timeout/],
    ['a missing state snapshot', '2029-07-04', async (d: string) => {
      await event(d, { intentId: 'lost', eventType: 'STAGE_COMPLETED' });
      await event(d, { intentId: 'lost', eventType: 'INTENT_FAILED', severity: 'high', metadata: { lineagePath: null } });
    }, /no state snapshot \(lineage\) kept for lost/],
    ['spend at 80% of the budget', '2029-07-03', async (d: string) => void (await ledger.audit.recordCost(costEvent({ timestamp: at(d), usd: '8.00' }))), /spend \$8\.000000 is at least 80% of the \$10 budget/],
  ])('YELLOW: %s', async (_what, date, setup, why) => {
    await setup(date);
    const report = await ledger.queries.dailyReport({ date, dayBudgetUsd: '10' });
    expect(report.health).toBe('YELLOW');
    expect(report.rule.startsWith(HEALTH_RULE)).toBe(true);
    expect(report.rule).toMatch(why);
  });

  test.each([
    ['a critical anomaly', '2029-08-01', async (d: string) => void (await event(d, { eventType: 'SANDBOX_ESCAPE_ATTEMPTED', severity: 'critical' })), /1 critical anomaly/],
    ['spend over the budget', '2029-08-02', async (d: string) => void (await ledger.audit.recordCost(costEvent({ timestamp: at(d), usd: '10.000001' }))), /over the \$10 budget/],
    ['an emergency stop (and a high anomaly too)', '2029-08-03', async (d: string) => {
      await event(d, { eventType: 'GLOBAL_STOP_SET', severity: 'critical' });
      await event(d, { eventType: 'ANOMALY_DETECTED', severity: 'high' });
    }, /RED: 1 emergency stop\(s\)\.$/],
  ])('RED: %s', async (_what, date, setup, why) => {
    await setup(date);
    const report = await ledger.queries.dailyReport({ date, dayBudgetUsd: '10' });
    expect(report.health).toBe('RED');
    expect(report.rule).toMatch(why);
  });

  test('a stop set through the ledger today makes today RED', async () => {
    const today = new Date().toISOString().slice(0, 10);
    await ledger.globalStop.set('alice', 'everything is on fire');
    const report = await ledger.queries.dailyReport({ date: today });
    expect(report.layers.humanOverride.emergencyStops).toBeGreaterThanOrEqual(1);
    expect(report.health).toBe('RED');
    await ledger.globalStop.clear('alice', 'out');
  });

  test('a day budget of 0 is no limit, as the worker treats it: any spend stays GREEN and nothing "remains"', async () => {
    const date = '2029-09-03';
    await ledger.audit.recordCost(costEvent({ timestamp: at(date), usd: '0.505000' }));
    for (const zero of ['0', '0.00']) {
      const report = await ledger.queries.dailyReport({ date, dayBudgetUsd: zero });
      expect(report.health).toBe('GREEN');
      expect(report.layers.limits).toEqual({ iterations: 1, spendUsd: '0.505000', budgetUsd: zero, unlimited: true });
    }
  });

  test('exactly at the budget is YELLOW, not RED; without a budget spend does not count; an empty day is GREEN', async () => {
    const date = '2029-09-01';
    await ledger.audit.recordCost(costEvent({ timestamp: at(date), usd: '10.000000' }));
    const atBudget = await ledger.queries.dailyReport({ date, dayBudgetUsd: '10.00' });
    expect(atBudget.health).toBe('YELLOW');
    expect(atBudget.layers.limits).toMatchObject({ remainingUsd: '0.000000', remainingPct: 0 });
    const noBudget = await ledger.queries.dailyReport({ date });
    expect(noBudget.health).toBe('GREEN');
    expect(noBudget.layers.limits).toEqual({ iterations: 1, spendUsd: '10.000000' });
    const empty = await ledger.queries.dailyReport({ date: '2029-09-02' });
    expect(empty.health).toBe('GREEN');
    expect(empty.layers.thresholds).toEqual({ autoExecuted: 0, escalated: 0, timedOut: 0, averageConfidencePct: null, assessments: 0 });
    expect(empty.layers.history.snapshots).toEqual({ status: 'OK', ended: 0, kept: 0, missing: [] });
    await expect(ledger.queries.dailyReport({ date: '2029-13-01' })).rejects.toBeInstanceOf(ZodError);
    await expect(ledger.queries.dailyReport({ date, dayBudgetUsd: 'ten' })).rejects.toBeInstanceOf(ZodError);
  });
});

describe('the report as the template writes it', () => {
  const report: DailyReport = {
    date: '2029-06-01',
    layers: {
      limits: { iterations: 2, spendUsd: '3.999999', budgetUsd: '10', remainingUsd: '6.000001', remainingPct: 60 },
      thresholds: { autoExecuted: 1, escalated: 3, timedOut: 1, averageConfidencePct: 82.5, assessments: 2 },
      history: { commits: 4, rollbacks: 1, snapshots: { status: 'MISSING', ended: 3, kept: 2, missing: ['lost'] } },
      humanOverride: { emergencyStops: 0, manualInterventions: 2, decisionQueue: 1 },
      anomalies: { total: 0, bySeverity: { info: 0, low: 0, medium: 0, high: 0, critical: 0 }, patterns: [] },
    },
    health: 'YELLOW',
    rule: 'the rule',
  };

  test('a past day says "that day"; every line of the template is there', () => {
    const text = formatReport(report, '2029-06-05').join('\n');
    expect(text).toContain('- Total iterations that day: 2\n- API cost that day: $3.999999\n- Budget remaining: $6.000001 (60%) of $10');
    expect(text).toContain('- Actions auto-executed: 1\n- Actions escalated: 3 (gate timeouts: 1)\n- Average confidence: 82.5% (2 triage assessments)');
    expect(text).toContain('- Commits that day: 4\n- Rollbacks that day: 1\n- State snapshots: MISSING (no lineage kept for lost)');
    expect(text).toContain('### Overall Health: YELLOW');
  });

  test('today says "today"; an unlimited budget and an empty day read plainly', () => {
    const quiet: DailyReport = {
      ...report,
      layers: {
        ...report.layers,
        limits: { iterations: 0, spendUsd: '0.000000', budgetUsd: '0', unlimited: true },
        thresholds: { autoExecuted: 0, escalated: 0, timedOut: 0, averageConfidencePct: null, assessments: 0 },
        history: { commits: 0, rollbacks: 0, snapshots: { status: 'OK', ended: 0, kept: 0, missing: [] } },
      },
    };
    const text = formatReport(quiet, '2029-06-01').join('\n');
    expect(text).toContain('- Total iterations today: 0');
    expect(text).toContain('- Budget remaining: unlimited (a day budget of 0 sets no limit)');
    expect(text).toContain('- Average confidence: n/a (no triage assessment)');
    expect(text).toContain('- State snapshots: OK (no intent ended)');
  });
});
