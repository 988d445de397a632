import { compareReplay, formatComparison } from '../../src/client/replay-comparison';
import { Ledger } from '../../src/ledger/ledger';
import { migrate } from '../../src/ledger/migrate';
import type { SafetyEventInput } from '../../src/ledger/types';
import { freshDatabase, type FreshDatabase } from '../helpers/database';
import { safetyEvent } from '../ledger/fixtures';

/**
 * What `warden replay` reports changed, from the ledger rows of an original and its replay: the
 * safety layers that fire now and did not then, and the reverse; findings made of time alone
 * (a replay waits on no model) are not a change.
 */

let db: FreshDatabase;
beforeAll(async () => {
  db = await freshDatabase(process.env.WARDEN_TEST_EMBEDDED_DATABASE_URL!);
  await migrate(db.pool);
});
afterAll(async () => db?.drop());

test('a layer that fires only now is added, one that fired only then removed; rapid actions, latency outliers and rapid calls are left out', async () => {
  const ledger = new Ledger(db.pool);
  const original = 'cmp-original';
  const replay = 'replay-1-cmp-original';
  const row = (intentId: string, eventType: SafetyEventInput['eventType'], pattern: string, stage = 'impl') =>
    ledger.audit.recordSafetyEvent(safetyEvent({ intentId, stage, eventType, severity: 'medium', metadata: { pattern } }));
  await row(original, 'ANOMALY_DETECTED', 'anomaly-loop');
  await row(original, 'COST_WARNING', 'cost-warning', 'spec');
  await row(replay, 'CASCADE_DETECTED', 'cascade-high');
  await row(replay, 'ANOMALY_DETECTED', 'anomaly-rapid-actions');
  await row(replay, 'ANOMALY_DETECTED', 'anomaly-latency-outlier');
  await row(replay, 'ANOMALY_DETECTED', 'call-rapid-calls');
  await row(replay, 'COST_WARNING', 'cost-warning', 'spec');
  const comparison = await compareReplay(db.pool, original, { intentId: replay, status: 'merged', gates: [] });
  expect(comparison.stages.map((s) => ({ stage: s.stage, added: s.added, removed: s.removed }))).toEqual([
    { stage: 'spec', added: [], removed: [] },
    { stage: 'impl', added: ['CASCADE_DETECTED'], removed: ['ANOMALY_DETECTED'] },
  ]);
  expect(comparison.changed).toBe(true);
});

test("--from: the stages before it are the original's, shown as then and not as removed; the stages from it compare as ever", async () => {
  const ledger = new Ledger(db.pool);
  const original = 'cmp-from-original';
  const replay = 'replay-1-cmp-from-original';
  const row = (intentId: string, eventType: SafetyEventInput['eventType'], pattern: string, stage: string) =>
    ledger.audit.recordSafetyEvent(safetyEvent({ intentId, stage, eventType, severity: 'medium', metadata: { pattern } }));
  await row(original, 'COST_WARNING', 'cost-warning', 'spec');
  await row(original, 'ANOMALY_DETECTED', 'anomaly-loop', 'impl');
  const comparison = await compareReplay(db.pool, original, { intentId: replay, status: 'merged', gates: [], from: 'impl' });
  expect(comparison.stages.map((s) => ({ stage: s.stage, now: s.fired.now, removed: s.removed, taken: s.taken === true }))).toEqual([
    { stage: 'spec', now: ['COST_WARNING'], removed: [], taken: true },
    { stage: 'impl', now: [], removed: ['ANOMALY_DETECTED'], taken: false },
  ]);
  expect(comparison).toMatchObject({ from: 'impl', changed: true });
  expect(formatComparison(comparison).join('\n')).toMatch(/from impl[\s\S]*spec .*the original's \(not run again\)[\s\S]*impl .*-ANOMALY_DETECTED/);
});
