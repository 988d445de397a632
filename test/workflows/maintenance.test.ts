import { readFileSync } from 'node:fs';
import path from 'node:path';
import { maintenanceWorkflow } from '../../src/workflows';
import { useTestWorld } from '../helpers/env';

const world = useTestWorld('maintenance');

test('the maintenance workflow deletes only rows past retention and reports on yesterday', async () => {
  const old = new Date(Date.now() - 100 * 86_400_000);
  const recent = new Date(Date.now() - 86_400_000);
  const ids = ['00000000-0000-4000-8000-000000000001', '00000000-0000-4000-8000-000000000002'];
  await world().ledger.audit.recordSafetyEvent({ id: ids[0]!, timestamp: old, eventType: 'ANOMALY_DETECTED', severity: 'high', reason: 'old' });
  await world().ledger.audit.recordSafetyEvent({ id: ids[1]!, timestamp: recent, eventType: 'ANOMALY_DETECTED', severity: 'high', reason: 'recent' });
  const result = await world().client.workflow.execute(maintenanceWorkflow, {
    taskQueue: world().taskQueue,
    workflowId: `maintenance-${Date.now()}`,
    args: [{ retentionDays: 90, dayBudgetUsd: '20' }],
  });
  expect(result.deleted.safety_events).toBe(1);
  const left = await world().pool.query('SELECT reason FROM safety_events WHERE id = ANY($1)', [ids]);
  expect(left.rows).toEqual([{ reason: 'recent' }]);
  expect(result.report.date).toBe(recent.toISOString().slice(0, 10));
  firstReportDate = result.report.date;
  expect(result.report.layers.anomalies.bySeverity.high).toBe(1);
  expect(result.report.layers.limits.budgetUsd).toBe('20');
  expect(result.report.health).toBe('YELLOW');
});

/** The first test's report day, to know which earlier report the second test's day already has. */
let firstReportDate: string | undefined;

test("without a budget the scheduled report uses the worker's day budget; a RED day is published loudly", async () => {
  // Yesterday, as the first test: spend over the budget makes it RED whatever else happened. The
  // report's day comes from the workflow's start; should midnight (UTC) pass between booking the
  // spend and the start, the spend is booked on the new yesterday and the run made again.
  let day = '';
  let result: Awaited<ReturnType<typeof runMaintenance>> | undefined;
  for (let tries = 0; result?.report.date !== day; tries += 1) {
    if (tries === 2) throw new Error(`the report's day moved twice (${day}, then ${result?.report.date})`);
    day = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
    await bookSpend(day);
    result = await runMaintenance();
  }
  // The test worker's config: worker.dayBudgetUsd of the default profile, $200.
  expect(result.report.layers.limits).toMatchObject({ budgetUsd: '200', spendUsd: expect.stringMatching(/^25\d\.\d{6}$/) });
  expect(result.report.health).toBe('RED');

  // Where a person finds it: a file under the Warden home, and a high-severity event in the ledger.
  expect(result.reportPath).toBe(path.join(path.dirname(world().lineageRoot), 'reports', `${day}.md`));
  const text = readFileSync(result.reportPath!, 'utf8');
  expect(text).toContain(`## Safety Net Daily Report - ${day}`);
  expect(text).toContain('### Overall Health: RED');
  expect(JSON.parse(readFileSync(result.reportPath!.replace(/\.md$/, '.json'), 'utf8'))).toEqual(JSON.parse(JSON.stringify(result.report)));
  const { rows } = await world().pool.query(
    `SELECT severity, reason, suggestion, metadata->>'health' AS health, metadata->>'path' AS path FROM safety_events WHERE event_type = 'DAILY_HEALTH_REPORT' AND metadata->>'date' = $1 ORDER BY "timestamp"`,
    [day],
  );
  // The first test's run published the same day as YELLOW (a medium event); this one is RED.
  const earlier = firstReportDate === day ? ['YELLOW medium'] : [];
  expect(rows.map((row: { health: string; severity: string }) => `${row.health} ${row.severity}`)).toEqual([...earlier, 'RED high']);
  expect(rows.at(-1)).toEqual(
    {
      severity: 'high',
      reason: expect.stringMatching(new RegExp(`^daily health report for ${day}: RED: spend \\$25\\d\\.\\d{6} is over the \\$200 budget\\.$`)),
      suggestion: expect.stringContaining(`warden report --date ${day}`),
      health: 'RED',
      path: result.reportPath,
    },
  );
});

/** $250 of impl spend on `day`, over the $200 day budget of the test worker. */
async function bookSpend(day: string): Promise<void> {
  await world().ledger.audit.recordCost({
    id: `00000000-0000-4000-8000-${day.replace(/-/g, '').padStart(12, '0')}`,
    timestamp: new Date(`${day}T12:00:00Z`),
    intentId: 'spender',
    stage: 'impl',
    attempt: 1,
    agentId: 'scripted',
    modelId: 'model-a',
    inputTokens: 1,
    outputTokens: 1,
    usd: '250.000000',
  });
}

function runMaintenance() {
  const workflowId = `maintenance-red-${Date.now()}`;
  return world().client.workflow.execute(maintenanceWorkflow, { taskQueue: world().taskQueue, workflowId, args: [{ retentionDays: 90 }] });
}
