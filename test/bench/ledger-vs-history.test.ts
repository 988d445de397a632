import { randomUUID } from 'node:crypto';
import { ledgerAgainstHistory } from '../../bench/chaos/ledger-vs-history';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { startSampleIntent, useTestWorld, waitFor } from '../helpers/env';

/**
 * The chaos run's ledger check (npm run chaos): a replay of an intent's history names exactly the
 * rows its workflow wrote, so a row missing from the ledger is lost and a workflow-written row no
 * history wrote is doubled.
 */

const world = useTestWorld('ledger-vs-history');

test('a merged intent: every row its history wrote is in the ledger once; a row taken away is lost, a copy is doubled', async () => {
  const { handle, id } = await startSampleIntent(world(), 'lvh');
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');

  const clean = await ledgerAgainstHistory(world().client, world().pool, [id]);
  expect(clean).toMatchObject({ lost: [], doubled: [], unreplayable: [] });
  const { rows: written } = await world().pool.query<{ type: string }>(
    "SELECT event_type AS type FROM safety_events WHERE intent_id = $1 AND metadata ? 'historyLength' UNION ALL SELECT 'GATE_DECISION' FROM gate_decisions WHERE intent_id = $1",
    [id],
  );
  expect(written.map((r) => r.type)).toEqual(expect.arrayContaining(['INTENT_STARTED', 'STAGE_STARTED', 'STAGE_COMPLETED', 'GATE_REQUESTED', 'GATE_DECISION', 'GATE_DECIDED']));
  expect(clean.inHistories).toBe(written.length);
  expect(clean.inLedger).toBe(written.length);

  // The ledger is append-only: the test takes a row away past its triggers, as a lost write would.
  const pool = world().pool;
  const decision = (await pool.query<{ id: string }>('SELECT id::text AS id FROM gate_decisions WHERE intent_id = $1', [id])).rows[0]!.id;
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SET LOCAL session_replication_role = replica');
    await client.query('DELETE FROM gate_decisions WHERE id = $1', [decision]);
    await client.query('COMMIT');
  } finally {
    client.release();
  }
  // A copy of a stage's start under a new id, as a write repeated by a replay that made new ids would be.
  await pool.query(
    `INSERT INTO safety_events (id, "timestamp", event_type, severity, reason, intent_id, stage, metadata)
     SELECT $2, "timestamp", event_type, severity, reason, intent_id, stage, metadata FROM safety_events
      WHERE intent_id = $1 AND event_type = 'STAGE_STARTED' ORDER BY "timestamp" LIMIT 1`,
    [id, randomUUID()],
  );
  const broken = await ledgerAgainstHistory(world().client, pool, [id]);
  expect(broken.lost).toEqual([`${id}: ${decision}`]);
  expect(broken.doubled).toEqual([expect.stringMatching(new RegExp(`^${id}: STAGE_STARTED `))]);
});
