import { randomUUID } from 'node:crypto';
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { chainHead, verifyStoredChain, type ChainVerdict } from '../../src/ledger/chain';
import { Ledger } from '../../src/ledger/ledger';
import { migrate } from '../../src/ledger/migrate';
import type { FreshDatabase } from '../helpers/database';
import { describeOnBackends, freshDatabase } from '../helpers/database';
import { costEvent, gateDecision, migratedLedger, safetyEvent } from './fixtures';

const DAY = 86_400_000;

/** As someone with database access would: the ledger's triggers off, in this transaction only. */
const TRIGGERS_OFF = `BEGIN; ${['safety_events', 'gate_decisions', 'cost_events'].map((t) => `ALTER TABLE ${t} DISABLE TRIGGER USER;`).join(' ')}`;
const TRIGGERS_ON = ['safety_events', 'gate_decisions', 'cost_events'].map((t) => `ALTER TABLE ${t} ENABLE TRIGGER USER;`).join(' ');

/** Position of a row in the chain. */
async function posOf(db: pg.Pool | pg.PoolClient, table: string, id: string): Promise<number> {
  const { rows } = await db.query<{ pos: string }>(`SELECT chain_pos::text AS pos FROM ${table} WHERE id = $1`, [id]);
  return Number(rows[0]!.pos);
}

describeOnBackends('the ledger hash chain on the %s PostgreSQL', (baseUrl) => {
  let db: FreshDatabase;
  let ledger: Ledger;
  const ids = { first: randomUUID(), gate: randomUUID(), cost: randomUUID(), middle: randomUUID(), next: randomUUID(), last: randomUUID() };

  /**
   * Tampers as someone with database access would (the ledger's triggers off),
   * checks the chain in that same transaction, and rolls it all back for the next test.
   */
  async function tampered(sql: (client: pg.PoolClient) => Promise<void>): Promise<ChainVerdict> {
    const client = await db.pool.connect();
    try {
      await client.query(TRIGGERS_OFF);
      await sql(client);
      await client.query(TRIGGERS_ON);
      return await verifyStoredChain(client);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  }

  beforeAll(async () => {
    ({ db, ledger } = await migratedLedger(baseUrl));
    await ledger.recordSafetyEvent(safetyEvent({ id: ids.first, reason: 'intent started' }));
    await ledger.recordGateDecision(gateDecision({ id: ids.gate, decision: 'reject', by: 'bob', reason: 'not yet' }));
    await ledger.recordCost(costEvent({ id: ids.cost }));
    await ledger.recordSafetyEvent(safetyEvent({ id: ids.middle, reason: 'middle' }));
    await ledger.recordSafetyEvent(safetyEvent({ id: ids.next, reason: 'next' }));
    // Many writers at once, as many workers write: they take positions one after another.
    await Promise.all(Array.from({ length: 24 }, (_, i) => (i % 3 === 0 ? ledger.recordCost(costEvent()) : i % 3 === 1 ? ledger.recordGateDecision(gateDecision()) : ledger.recordSafetyEvent(safetyEvent({ intentId: `intent-${i}` })))));
    await ledger.setGlobalStop('ops', 'drill');
    await ledger.recordSafetyEvent(safetyEvent({ id: ids.last, reason: 'last' }));
  });
  afterAll(async () => {
    await db?.drop();
  });

  test('every row written, concurrently too, is in one whole chain with no gaps', async () => {
    const verdict = await verifyStoredChain(db.pool);
    expect(verdict).toMatchObject({ whole: true, rows: 31, firstPos: 1, lastPos: 31, unchained: [] });
    expect(await chainHead(db.pool)).toEqual({ pos: 31, hash: verdict.headHash });
    // A retried write (same id) is not written again and does not move the head.
    expect(await ledger.recordSafetyEvent(safetyEvent({ id: ids.last, reason: 'last' }))).toBe(false);
    expect(await ledger.recordGateDecision(gateDecision({ id: ids.gate }))).toBe(false);
    expect((await chainHead(db.pool)).pos).toBe(31);
    expect((await verifyStoredChain(db.pool)).whole).toBe(true);
  });

  test('an edited gate decision is named at its row', async () => {
    const pos = await posOf(db.pool, 'gate_decisions', ids.gate);
    const verdict = await tampered((c) => c.query(`UPDATE gate_decisions SET decision = 'approve', decided_by = 'alice', reason = 'tampered' WHERE id = $1`, [ids.gate]).then(() => undefined));
    expect(verdict.whole).toBe(false);
    expect(verdict.broken).toMatchObject({ pos, table: 'gate_decisions', id: ids.gate });
    expect(verdict.broken!.problem).toMatch(/edited/);
  });

  test('a deleted row is named by its position, at the row after it', async () => {
    const pos = await posOf(db.pool, 'safety_events', ids.middle);
    const verdict = await tampered((c) => c.query(`DELETE FROM safety_events WHERE id = $1`, [ids.middle]).then(() => undefined));
    expect(verdict.broken).toMatchObject({ pos: pos + 1, id: ids.next });
    expect(verdict.broken!.problem).toBe(`position ${pos} is missing before this row and no retention checkpoint accounts for it: deleted`);
  });

  test('a row inserted past the chain is named; one inserted into it with a forged hash too', async () => {
    const forged = randomUUID();
    const outside = await tampered((c) =>
      c.query(`INSERT INTO gate_decisions (id, intent_id, gate, decision, decided_by, requested_at, decided_at, timed_out) VALUES ($1, 'intent-1', 'merge', 'approve', 'alice', now(), now(), false)`, [forged]).then(() => undefined),
    );
    expect(outside.whole).toBe(false);
    expect(outside.broken).toBeUndefined();
    expect(outside.unchained).toEqual([expect.objectContaining({ table: 'gate_decisions', id: forged })]);

    // Made room for at position 4 by moving every later row on, the head put right: the row after it no longer links.
    const inside = await tampered(async (c) => {
      for (const table of ['safety_events', 'gate_decisions', 'cost_events']) await c.query(`UPDATE ${table} SET chain_pos = -chain_pos - 1 WHERE chain_pos >= 4`);
      for (const table of ['safety_events', 'gate_decisions', 'cost_events']) await c.query(`UPDATE ${table} SET chain_pos = -chain_pos WHERE chain_pos < 0`);
      const { rows } = await c.query<{ hash: string }>(`SELECT chain_hash AS hash FROM cost_events WHERE chain_pos = 3`);
      await c.query(
        `INSERT INTO gate_decisions (id, intent_id, gate, decision, decided_by, requested_at, decided_at, timed_out, chain_pos, chain_prev, chain_hash)
         VALUES ($1, 'intent-1', 'merge', 'approve', 'alice', now(), now(), false, 4, $2, $3)`,
        [forged, rows[0]!.hash, 'f'.repeat(64)],
      );
      await c.query(`UPDATE ledger_chain_head SET pos = pos + 1`);
    });
    expect(inside.broken).toMatchObject({ pos: 4, id: forged });
    expect(inside.broken!.problem).toMatch(/edited/);
  });

  test('two rows swapped in the chain are named at the first of them', async () => {
    const pos = await posOf(db.pool, 'safety_events', ids.middle);
    const verdict = await tampered(async (c) => {
      await c.query(`UPDATE safety_events SET chain_pos = -1 WHERE id = $1`, [ids.middle]);
      await c.query(`UPDATE safety_events SET chain_pos = $2 WHERE id = $1`, [ids.next, pos]);
      await c.query(`UPDATE safety_events SET chain_pos = $2 WHERE id = $1`, [ids.middle, pos + 1]);
    });
    expect(verdict.broken).toMatchObject({ pos, id: ids.next });
    expect(verdict.broken!.problem).toMatch(/reordered/);
  });

  test('rows deleted at the end are noticed by the head', async () => {
    const pos = await posOf(db.pool, 'safety_events', ids.last);
    const verdict = await tampered((c) => c.query(`DELETE FROM safety_events WHERE id = $1`, [ids.last]).then(() => undefined));
    expect(verdict.broken).toMatchObject({ pos });
    expect(verdict.broken!.problem).toMatch(/rows at the end were deleted/);
  });

  test('rows deleted at the end with the head put right are noticed by an anchor', async () => {
    const head = await chainHead(db.pool);
    const anchor = { pos: head.pos, hash: head.hash, at: new Date().toISOString(), workflowId: 'anchor-1', runId: 'r' };
    const client = await db.pool.connect();
    try {
      await client.query(TRIGGERS_OFF);
      await client.query(`DELETE FROM safety_events WHERE id = $1`, [ids.last]);
      await client.query(`UPDATE ledger_chain_head SET pos = pos - 1, hash = (SELECT chain_hash FROM safety_events WHERE chain_pos = $1 UNION ALL SELECT chain_hash FROM gate_decisions WHERE chain_pos = $1 UNION ALL SELECT chain_hash FROM cost_events WHERE chain_pos = $1)`, [head.pos - 1]);
      expect((await verifyStoredChain(client)).whole).toBe(true);
      const verdict = await verifyStoredChain(client, { anchors: [anchor] });
      expect(verdict.broken).toMatchObject({ pos: head.pos });
      expect(verdict.broken!.problem).toMatch(/anchor anchor-1 .* saw the chain at position \d+, but it ends at \d+: rows at the end were deleted/);
      // and a rewrite up to an anchor: the anchor's hash is not the row's
      const rewritten = await verifyStoredChain(client, { anchors: [{ ...anchor, pos: 2, hash: 'a'.repeat(64) }] });
      expect(rewritten.broken).toMatchObject({ pos: 2, id: ids.gate });
      expect(rewritten.broken!.problem).toMatch(/recorded hash aaaaaaaaaaaa at position 2/);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });
});

describeOnBackends('retention and the hash chain on the %s PostgreSQL', (baseUrl) => {
  let db: FreshDatabase;
  let ledger: Ledger;
  beforeAll(async () => {
    ({ db, ledger } = await migratedLedger(baseUrl));
  });
  afterAll(async () => {
    await db?.drop();
  });

  test('rows cut past retention are summarised by a checkpoint in the chain, which still verifies', async () => {
    const now = Date.now();
    // Old and new interleaved, so that what is cut is not only the start of the chain.
    await ledger.recordSafetyEvent(safetyEvent({ timestamp: new Date(now - 100 * DAY) }));
    await ledger.recordSafetyEvent(safetyEvent({ timestamp: new Date(now - 100 * DAY) }));
    await ledger.recordSafetyEvent(safetyEvent({ timestamp: new Date(now - DAY) }));
    await ledger.recordCost(costEvent({ timestamp: new Date(now - 300 * DAY) }));
    await ledger.recordGateDecision(gateDecision({ requestedAt: new Date(now - DAY), decidedAt: new Date(now - DAY) }));
    // Retention's clock two days back, so that its checkpoint is old enough for the next cut to take.
    const deleted = await ledger.cleanup(90, new Date(now - 2 * DAY));
    expect(deleted).toMatchObject({ safety_events: 2, cost_events: 1 });
    const { rows } = await db.pool.query(`SELECT chain_pos::int AS pos, metadata FROM safety_events WHERE event_type = 'LEDGER_CHECKPOINT'`);
    expect(rows).toHaveLength(1);
    expect(rows[0].pos).toBe(6);
    expect(rows[0].metadata).toMatchObject({ cutRows: 3, cutFirstPos: 1, cutLastPos: 4, ranges: [[1, 2, expect.any(String)], [4, 4, expect.any(String)]] });
    expect(await verifyStoredChain(db.pool)).toMatchObject({ whole: true, rows: 3, firstPos: 3, lastPos: 6 });

    // A later cut merges with the earlier one; the earlier checkpoint goes with it.
    const later = await ledger.cleanup(90, new Date(now + 95 * DAY));
    expect(later).toMatchObject({ safety_events: 2, gate_decisions: 1 });
    const { rows: latest } = await db.pool.query(`SELECT metadata FROM safety_events WHERE event_type = 'LEDGER_CHECKPOINT'`);
    expect(latest).toHaveLength(1);
    expect(latest[0].metadata).toMatchObject({ cutRows: 3, ranges: [[1, 6, expect.any(String)]] });
    expect(await verifyStoredChain(db.pool)).toMatchObject({ whole: true, rows: 1, firstPos: 7, lastPos: 7 });

    // A deletion the checkpoint does not account for is still named.
    await ledger.recordSafetyEvent(safetyEvent({ reason: 'to be removed' }));
    await ledger.recordSafetyEvent(safetyEvent({ reason: 'after it' }));
    const client = await db.pool.connect();
    try {
      await client.query(TRIGGERS_OFF);
      await client.query(`DELETE FROM safety_events WHERE reason = 'to be removed'`);
      const verdict = await verifyStoredChain(client);
      expect(verdict.broken).toMatchObject({ pos: 9 });
      expect(verdict.broken!.problem).toMatch(/^position 8 is missing/);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });
});

describeOnBackends('the chain migration on the %s PostgreSQL', (baseUrl) => {
  test('rows written before it join the chain in the order the ledger knows, and new rows follow', async () => {
    const db = await freshDatabase(baseUrl);
    const before = mkdtempSync(path.join(tmpdir(), 'warden-migrations-'));
    try {
      const shipped = path.join(__dirname, '../../src/ledger/migrations');
      for (const file of readdirSync(shipped).filter((f) => f < '010')) copyFileSync(path.join(shipped, file), path.join(before, file));
      await migrate(db.pool, before);
      const ledger = new Ledger(db.pool);
      const old = randomUUID();
      const older = randomUUID();
      // seq says which came first, whatever the clocks say
      await ledger.recordSafetyEvent(safetyEvent({ id: older, timestamp: new Date(Date.now() - 60_000) }));
      await ledger.recordGateDecision(gateDecision());
      await ledger.recordSafetyEvent(safetyEvent({ id: old, timestamp: new Date(Date.now() - 120_000) }));
      await migrate(db.pool);
      expect(await posOf(db.pool, 'safety_events', older)).toBe(1);
      expect(await posOf(db.pool, 'safety_events', old)).toBe(3);
      await ledger.recordCost(costEvent());
      expect(await verifyStoredChain(db.pool)).toMatchObject({ whole: true, rows: 4, lastPos: 4 });
    } finally {
      rmSync(before, { recursive: true, force: true });
      await db.drop();
    }
  });
});

describeOnBackends('checking the chain from a date on the %s PostgreSQL', (baseUrl) => {
  test('--since checks from the first row of that date on, linked to the hash before it', async () => {
    const { db, ledger } = await migratedLedger(baseUrl);
    try {
      const old = randomUUID();
      const recent = randomUUID();
      await ledger.recordSafetyEvent(safetyEvent({ id: old, timestamp: new Date(Date.now() - 10 * DAY), reason: 'old' }));
      await ledger.recordSafetyEvent(safetyEvent({ id: recent, timestamp: new Date(), reason: 'recent' }));
      await ledger.recordSafetyEvent(safetyEvent({ timestamp: new Date(), reason: 'more recent' }));
      const since = new Date(Date.now() - 5 * DAY);
      const client = await db.pool.connect();
      try {
        await client.query(TRIGGERS_OFF);
        await client.query(`UPDATE safety_events SET reason = 'changed' WHERE id = $1`, [old]);
        expect(await verifyStoredChain(client, { since })).toMatchObject({ whole: true, rows: 2, firstPos: 2, lastPos: 3 });
        expect((await verifyStoredChain(client)).broken).toMatchObject({ pos: 1, id: old });
        await client.query(`UPDATE safety_events SET reason = 'changed' WHERE id = $1`, [recent]);
        expect((await verifyStoredChain(client, { since })).broken).toMatchObject({ pos: 2, id: recent });
      } finally {
        await client.query('ROLLBACK');
        client.release();
      }
    } finally {
      await db.drop();
    }
  });
});
