import { randomUUID } from 'node:crypto';
import { cp, mkdtemp, writeFile, appendFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { loadMigrations, migrate } from '../../src/ledger/migrate';
import { Ledger } from '../../src/ledger/ledger';
import { GateViewLinks } from '../../src/ledger/gate-view-links';
import { freshDatabase, describeOnBackends, type FreshDatabase } from '../helpers/database';
import { safetyEvent } from './fixtures';

/** The migrations Warden ships. */
const MIGRATIONS_DIR = path.join(__dirname, '..', '..', 'src', 'ledger', 'migrations');

const TABLES = [
  'activity_runs',
  'budget_reservations',
  'budget_settlements',
  'controls',
  'cost_events',
  'decision_links',
  'detector_evals',
  'exchange_bodies',
  'gate_decisions',
  'gate_view_links',
  'intent_labels',
  'intent_recordings',
  'ladder_metrics',
  'ledger_chain_origin',
  'ledger_chains',
  'model_calls',
  'model_exchanges',
  'notification_dead_letters',
  'notification_dispatches',
  'notification_epoch',
  'safety_events',
  'schema_migrations',
  'shared_limits',
];

async function tables(pool: pg.Pool): Promise<string[]> {
  const result = await pool.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name`,
  );
  return result.rows.map((r) => r.table_name);
}

describeOnBackends('migrations on the %s PostgreSQL', (baseUrl) => {
  const databases: FreshDatabase[] = [];
  const fresh = async (): Promise<FreshDatabase> => {
    const db = await freshDatabase(baseUrl);
    databases.push(db);
    return db;
  };
  afterAll(async () => {
    await Promise.all(databases.map((db) => db.drop()));
  });

  test('apply once, and a second run applies nothing', async () => {
    const db = await fresh();
    const shipped = (await loadMigrations()).map((m) => m.name);
    expect(shipped).toEqual(['001_initial', '002_model_calls', '003_books', '004_shared_limits', '005_notifications', '006_decisions_anywhere', '007_gate_view_links', '008_ledger_sequence', '009_decision_signed', '010_ledger_chain', '011_model_exchanges', '012_intent_labels']);
    expect(await migrate(db.pool)).toEqual(shipped);
    expect(await tables(db.pool)).toEqual(TABLES);
    expect(await migrate(db.pool)).toEqual([]);
    const rows = await db.pool.query('SELECT name FROM schema_migrations ORDER BY name');
    expect(rows.rows.map((r) => r.name)).toEqual(shipped);
  });

  test('five processes migrating at once apply each migration exactly once', async () => {
    const db = await fresh();
    const pools = Array.from({ length: 5 }, () => new pg.Pool({ connectionString: db.url, max: 1 }));
    try {
      const results = await Promise.all(pools.map((pool) => migrate(pool)));
      const shipped = (await loadMigrations()).map((m) => m.name);
      expect(results.flat().sort()).toEqual(shipped);
      expect(await tables(db.pool)).toEqual(TABLES);
    } finally {
      await Promise.all(pools.map((pool) => pool.end()));
    }
  });

  test('a later migration applies on top; an edited applied one is refused; a failing one leaves nothing behind', async () => {
    const db = await fresh();
    const dir = await mkdtemp(path.join(tmpdir(), 'warden-migrations-'));
    await cp(MIGRATIONS_DIR, dir, { recursive: true });
    await migrate(db.pool, dir);

    await writeFile(path.join(dir, '990_notes.sql'), 'CREATE TABLE notes (id int PRIMARY KEY);');
    expect(await migrate(db.pool, dir)).toEqual(['990_notes']);

    await writeFile(path.join(dir, '991_broken.sql'), 'CREATE TABLE half_done (id int); SELECT 1 / 0;');
    await expect(migrate(db.pool, dir)).rejects.toThrow(/migration 991_broken failed: division by zero/);
    expect(await tables(db.pool)).not.toContain('half_done');
    const names = await db.pool.query('SELECT name FROM schema_migrations ORDER BY name');
    expect(names.rows.map((r) => r.name)).toEqual([...(await loadMigrations()).map((m) => m.name), '990_notes']);

    await writeFile(path.join(dir, '991_broken.sql'), 'SELECT 1;');
    await appendFile(path.join(dir, '990_notes.sql'), '\n-- edited afterwards\n');
    await expect(migrate(db.pool, dir)).rejects.toThrow(/migration 990_notes has changed since it was applied/);
  });

  test('the tables are append-only: UPDATE, DELETE and TRUNCATE are refused', async () => {
    const db = await fresh();
    await migrate(db.pool);
    const ledger = new Ledger(db.pool);
    const event = safetyEvent();
    await ledger.audit.recordSafetyEvent(event);
    await ledger.globalStop.set('test', 'a row to try to change');
    await expect(db.pool.query(`UPDATE safety_events SET reason = 'rewritten'`)).rejects.toThrow(/append-only: UPDATE on safety_events/);
    await expect(db.pool.query('DELETE FROM safety_events')).rejects.toThrow(/append-only: DELETE on safety_events/);
    await expect(db.pool.query('TRUNCATE cost_events')).rejects.toThrow(/append-only: TRUNCATE on cost_events/);
    await expect(db.pool.query(`UPDATE controls SET active = false`)).rejects.toThrow(/append-only/);
    await expect(db.pool.query(`UPDATE model_calls SET usd = 0`)).resolves.toMatchObject({ rowCount: 0 });
    await ledger.modelCalls.record({ id: randomUUID(), timestamp: new Date(), intentId: 'i', stage: 'impl', attempt: 1, agentId: 'a', api: 'messages', modelId: 'm', streamed: false, status: 200, outcome: 'answered', inputTokens: 1, outputTokens: 1, usd: '0.000018', estimated: false, latencyMs: 3 });
    await expect(db.pool.query(`UPDATE model_calls SET usd = 0`)).rejects.toThrow(/append-only: UPDATE on model_calls/);
    await expect(db.pool.query('DELETE FROM model_calls')).rejects.toThrow(/append-only: DELETE on model_calls/);
    await expect(db.pool.query('TRUNCATE model_calls')).rejects.toThrow(/append-only: TRUNCATE on model_calls/);
    // A view link is a row like any other: it cannot be pointed at another gate afterwards.
    await new GateViewLinks(db.pool).make({ intentId: 'i', gate: 'merge', gateOpenedAt: 'x', why: 'no secret' });
    await expect(db.pool.query(`UPDATE gate_view_links SET gate = 'production'`)).rejects.toThrow(/append-only: UPDATE on gate_view_links/);
    await expect(db.pool.query('TRUNCATE gate_view_links')).rejects.toThrow(/append-only: TRUNCATE on gate_view_links/);
    const rows = await db.pool.query('SELECT reason FROM safety_events WHERE id = $1', [event.id]);
    expect(rows.rows).toEqual([{ reason: event.reason }]);
  });

  test('the retention switch deletes only rows older than a day, whoever sets it', async () => {
    const db = await fresh();
    await migrate(db.pool);
    const ledger = new Ledger(db.pool);
    const now = Date.now();
    const young = safetyEvent({ reason: 'young', timestamp: new Date(now - 60_000) });
    const old = safetyEvent({ reason: 'old', timestamp: new Date(now - 2 * 86_400_000) });
    await ledger.audit.recordSafetyEvent(young);
    await ledger.audit.recordSafetyEvent(old);
    await db.pool.query(
      `INSERT INTO budget_reservations (id, day, intent_id, amount_usd, limit_usd, granted, committed_usd, created_at)
       VALUES ('fresh', current_date, 'i', 1, 5, true, 0, now()), ('aged', '2020-01-01', 'i', 1, 5, true, 0, now() - interval '3 days')`,
    );
    await ledger.budget.settle('fresh', '1');
    await ledger.budget.settle('aged', '1'); // settled just now, but as old as its reservation
    // What any client of the application role could run: the switch, then a DELETE of today's rows.
    const bypass = async (sql: string): Promise<unknown> => {
      const client = await db.pool.connect();
      try {
        await client.query('BEGIN');
        await client.query(`SET LOCAL warden.retention_cleanup = 'on'`);
        const result = await client.query(sql);
        await client.query('COMMIT');
        return result.rowCount;
      } catch (error) {
        await client.query('ROLLBACK');
        throw error;
      } finally {
        client.release();
      }
    };
    await expect(bypass(`DELETE FROM safety_events WHERE reason = 'young'`)).rejects.toThrow(/keeps every row for at least 23:00:00: this safety_events row/);
    await expect(bypass(`DELETE FROM budget_settlements WHERE reservation_id = 'fresh'`)).rejects.toThrow(/budget_settlements/);
    await expect(bypass(`DELETE FROM safety_events WHERE reason = 'old'`)).resolves.toBe(1);
    await expect(bypass(`DELETE FROM budget_settlements WHERE reservation_id = 'aged'`)).resolves.toBe(1);
    const left = await db.pool.query('SELECT reason FROM safety_events');
    expect(left.rows).toEqual([{ reason: 'young' }]);
    // Retention cleanup itself is unaffected: a one-day retention deletes the old, keeps the rest.
    await ledger.audit.recordSafetyEvent(safetyEvent({ reason: 'old again', timestamp: new Date(now - 2 * 86_400_000) }));
    expect((await ledger.retention.cleanup(1)).safety_events).toBe(1);
  });
});
