import { maintenanceWorkflow } from '../../src/workflows';
import { useTestWorld } from '../helpers/env';

const world = useTestWorld('maintenance');

test('the maintenance workflow deletes only rows past retention and reports on yesterday', async () => {
  const old = new Date(Date.now() - 100 * 86_400_000);
  const recent = new Date(Date.now() - 86_400_000);
  const ids = ['00000000-0000-4000-8000-000000000001', '00000000-0000-4000-8000-000000000002'];
  await world().ledger.recordSafetyEvent({ id: ids[0]!, timestamp: old, eventType: 'ANOMALY_DETECTED', severity: 'high', reason: 'old' });
  await world().ledger.recordSafetyEvent({ id: ids[1]!, timestamp: recent, eventType: 'ANOMALY_DETECTED', severity: 'high', reason: 'recent' });
  const result = await world().client.workflow.execute(maintenanceWorkflow, {
    taskQueue: world().taskQueue,
    workflowId: `maintenance-${Date.now()}`,
    args: [{ retentionDays: 90, dayBudgetUsd: '20' }],
  });
  expect(result.deleted.safety_events).toBe(1);
  const left = await world().pool.query('SELECT reason FROM safety_events WHERE id = ANY($1)', [ids]);
  expect(left.rows).toEqual([{ reason: 'recent' }]);
  expect(result.report.date).toBe(recent.toISOString().slice(0, 10));
  expect(result.report.layers.anomalies.bySeverity.high).toBe(1);
  expect(result.report.health).toBe('YELLOW');
});
