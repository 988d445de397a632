import { randomUUID } from 'node:crypto';
import { ZodError } from 'zod';
import type { Ledger } from '../../src/ledger/ledger';
import type { FreshDatabase } from '../helpers/database';
import { describeOnBackends } from '../helpers/database';
import { costEvent, countRows, gateDecision, migratedLedger, safetyEvent } from './fixtures';

const DAY = 86_400_000;

describeOnBackends('retention cleanup on the %s PostgreSQL', (baseUrl) => {
  let db: FreshDatabase;
  let ledger: Ledger;
  beforeAll(async () => {
    ({ db, ledger } = await migratedLedger(baseUrl));
  });
  afterAll(async () => {
    await db?.drop();
  });

  test('deletes only what is past retention, never an open reservation nor the current stop flag', async () => {
    const now = new Date();
    const ago = (days: number): Date => new Date(now.getTime() - days * DAY);
    // Just past and just inside 90 days, for each audit table.
    const oldIds = { safety: randomUUID(), cost: randomUUID(), gate: randomUUID() };
    await ledger.audit.recordSafetyEvent(safetyEvent({ id: oldIds.safety, timestamp: new Date(ago(90).getTime() - 1000) }));
    await ledger.audit.recordSafetyEvent(safetyEvent({ timestamp: new Date(ago(90).getTime() + 60_000) }));
    await ledger.audit.recordSafetyEvent(safetyEvent({ timestamp: now }));
    await ledger.audit.recordCost(costEvent({ id: oldIds.cost, timestamp: ago(365) }));
    await ledger.audit.recordCost(costEvent({ timestamp: ago(89) }));
    await ledger.audit.recordGateDecision(gateDecision({ id: oldIds.gate, requestedAt: ago(200), decidedAt: ago(100) }));
    await ledger.audit.recordGateDecision(gateDecision({ requestedAt: ago(100), decidedAt: ago(10) }));
    const modelCall = (id: string, timestamp: Date) => ({
      id, timestamp, intentId: 'i', stage: 'impl', attempt: 1, agentId: 'aider', api: 'chat' as const, modelId: 'm', streamed: true,
      status: 200, outcome: 'answered' as const, inputTokens: 10, outputTokens: 5, usd: '0.000105', estimated: false, latencyMs: 12,
    });
    const oldCall = randomUUID();
    await ledger.modelCalls.record(modelCall(oldCall, ago(91)));
    await ledger.modelCalls.record(modelCall(randomUUID(), ago(30)));

    // Reservations and controls carry their own write time: backdate them the way time would.
    await db.pool.query(
      `INSERT INTO budget_reservations (id, day, intent_id, amount_usd, limit_usd, granted, committed_usd, created_at) VALUES
         ('old-settled', '2020-01-01', 'i', 1, 5, true, 0, $1),
         ('old-released', '2020-01-01', 'i', 1, 5, true, 1, $1),
         ('old-denied', '2020-01-01', 'i', 9, 5, false, 1, $1),
         ('old-open', '2020-01-01', 'i', 1, 5, true, 1, $1),
         ('new-settled', '2020-01-01', 'i', 1, 5, true, 0, $2)`,
      [ago(120), ago(5)],
    );
    await ledger.budget.settle('old-settled', '0.5');
    await ledger.budget.release('old-released');
    await ledger.budget.settle('new-settled', '1');
    await db.pool.query(
      `INSERT INTO controls (control, active, set_by, reason, at) VALUES
         ('global_stop', true, 'a', 'old', $1), ('global_stop', false, 'b', 'old', $1), ('global_stop', true, 'c', 'current', $1)`,
      [ago(400)],
    );
    await db.pool.query(
      `INSERT INTO ladder_metrics (id, recorded_at, scope, level, total_runs, successful_runs) VALUES
         ($1, $3, 'global', 1, 10, 9), ($2, $4, 'global', 2, 30, 29)`,
      [randomUUID(), randomUUID(), ago(300), ago(200)],
    );
    // One old and one new row of each notification table, of the used decision links and of the view links.
    for (const [when, n] of [[ago(200), 1], [ago(1), 2]] as const) {
      const event = randomUUID();
      await db.pool.query('INSERT INTO notification_dispatches (event_id, workflow_id, at) VALUES ($1, $2, $3)', [event, `w-${n}`, when]);
      await db.pool.query(
        "INSERT INTO notification_dead_letters (delivery_id, event_id, kind, channel, attempts, error, at) VALUES ($1, $2, 'intent.merged', 'webhook at x', 5, 'down', $3)",
        [`d-${n}`, event, when],
      );
      await db.pool.query("INSERT INTO decision_links (nonce, intent_id, gate, approver, decision, used_at) VALUES ($1, 'i', 'merge', 'a', 'approve', $2)", [`n-${n}`, when]);
      await db.pool.query("INSERT INTO gate_view_links (token_hash, intent_id, gate, gate_opened_at, why, made_at) VALUES ($1, 'i', 'merge', 'x', 'no secret', $2)", [`h-${n}`, when]);
    }
    const before = {
      safety_events: await countRows(db.pool, 'safety_events'),
      cost_events: await countRows(db.pool, 'cost_events'),
      gate_decisions: await countRows(db.pool, 'gate_decisions'),
    };

    const deleted = await ledger.retention.cleanup(90, now);
    expect(deleted).toEqual({
      activity_runs: 0,
      safety_events: 1,
      cost_events: 1,
      gate_decisions: 1,
      budget_reservations: 3,
      budget_settlements: 2,
      controls: 2,
      ladder_metrics: 1,
      model_calls: 1,
      notification_dispatches: 1,
      notification_dead_letters: 1,
      decision_links: 1,
      gate_view_links: 1,
    });
    expect((await db.pool.query('SELECT 1 FROM model_calls WHERE id = $1', [oldCall])).rowCount).toBe(0);
    expect(await countRows(db.pool, 'model_calls')).toBe(1);
    // One cut, one LEDGER_CHECKPOINT row that says what left the hash chains.
    expect(await countRows(db.pool, 'safety_events')).toBe(before.safety_events - 1 + 1);
    expect(await countRows(db.pool, 'cost_events')).toBe(before.cost_events - 1);
    expect(await countRows(db.pool, 'gate_decisions')).toBe(before.gate_decisions - 1);
    for (const [table, id] of [['safety_events', oldIds.safety], ['cost_events', oldIds.cost], ['gate_decisions', oldIds.gate]] as const) {
      expect((await db.pool.query(`SELECT 1 FROM ${table} WHERE id = $1`, [id])).rowCount).toBe(0);
    }
    const reservations = await db.pool.query('SELECT id FROM budget_reservations ORDER BY id');
    expect(reservations.rows.map((r) => r.id)).toEqual(['new-settled', 'old-open']);
    // The stop flag's current state survives however old it is.
    expect(await ledger.globalStop.current()).toMatchObject({ stopped: true, by: 'c', reason: 'current' });
    expect(await countRows(db.pool, 'ladder_metrics')).toBe(1);

    // Nothing more to do a second time; an open reservation can still be settled afterwards.
    expect(Object.values(await ledger.retention.cleanup(90, now)).every((n) => n === 0)).toBe(true);
    await ledger.budget.settle('old-open', '1');
  });

  test('a retention that is not a positive number of days is refused', async () => {
    await expect(ledger.retention.cleanup(0)).rejects.toBeInstanceOf(ZodError);
    await expect(ledger.retention.cleanup(-90)).rejects.toBeInstanceOf(ZodError);
    await expect(ledger.retention.cleanup(Number.NaN)).rejects.toBeInstanceOf(ZodError);
  });

  test('outside cleanup, DELETE is still refused', async () => {
    await expect(db.pool.query('DELETE FROM cost_events')).rejects.toThrow(/append-only/);
  });
});
