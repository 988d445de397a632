import { randomUUID } from 'node:crypto';
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { chainEnds, verifyStoredChain, writeAnchorRow, type ChainVerdict } from '../../src/ledger/chain';
import { Ledger } from '../../src/ledger/ledger';
import { migrate } from '../../src/ledger/migrate';
import { inTransaction } from '../../src/ledger/transaction';
import type { FreshDatabase } from '../helpers/database';
import { describeOnBackends, freshDatabase } from '../helpers/database';
import { costEvent, gateDecision, migratedLedger, safetyEvent } from './fixtures';

const DAY = 86_400_000;

/** As someone with database access would: the ledger's triggers off, in this transaction only. */
const TRIGGERS_OFF = `BEGIN; ${['safety_events', 'gate_decisions', 'cost_events'].map((t) => `ALTER TABLE ${t} DISABLE TRIGGER USER;`).join(' ')}`;
const TRIGGERS_ON = ['safety_events', 'gate_decisions', 'cost_events'].map((t) => `ALTER TABLE ${t} ENABLE TRIGGER USER;`).join(' ');

/** Position of a row in its chain. */
async function posOf(db: pg.Pool | pg.PoolClient, table: string, id: string): Promise<number> {
  const { rows } = await db.query<{ pos: string }>(`SELECT chain_pos::text AS pos FROM ${table} WHERE id = $1`, [id]);
  return Number(rows[0]!.pos);
}

/** The only break of a verdict. */
function onlyBreak(verdict: ChainVerdict) {
  expect(verdict.whole).toBe(false);
  expect(verdict.broken).toHaveLength(1);
  return verdict.broken[0]!;
}

describeOnBackends('the ledger hash chains on the %s PostgreSQL', (baseUrl) => {
  let db: FreshDatabase;
  let ledger: Ledger;
  const ids = { first: randomUUID(), gate: randomUUID(), cost: randomUUID(), middle: randomUUID(), next: randomUUID(), last: randomUUID() };
  const batch = [randomUUID(), randomUUID(), randomUUID()];

  /** Tampers as someone with database access would, checks the chains in that same transaction, and rolls it all back. */
  async function tampered(sql: (client: pg.PoolClient) => Promise<unknown>): Promise<ChainVerdict> {
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
    // Values whose stored form differs from what was written: jsonb's key order and numbers, text with a lone surrogate.
    await ledger.audit.recordSafetyEvent(safetyEvent({ id: ids.first, reason: 'intent started \ud83d', metadata: { zeta: 1, alpha: [1.5, 1e-7, 1e21, 'x'], nested: { b: null, a: true } } }));
    await ledger.audit.recordGateDecision(gateDecision({ id: ids.gate, decision: 'reject', by: 'bob', reason: 'not yet', conditions: ['a', 'b'] }));
    await ledger.audit.recordCost(costEvent({ id: ids.cost, usd: '0.5' }));
    await ledger.audit.recordSafetyEvent(safetyEvent({ id: ids.middle, reason: 'middle' }));
    await ledger.audit.recordSafetyEvent(safetyEvent({ id: ids.next, reason: 'next' }));
    // Many writers at once, as many workers write, some on the same intent.
    await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        i % 3 === 0 ? ledger.audit.recordCost(costEvent({ intentId: `intent-${i % 4}` })) : i % 3 === 1 ? ledger.audit.recordGateDecision(gateDecision({ intentId: `intent-${i % 4}` })) : ledger.audit.recordSafetyEvent(safetyEvent({ intentId: `intent-${i % 4}` })),
      ),
    );
    // A workflow's flush: three rows of intent-2 in one statement.
    await ledger.audit.recordBatch([
      { safetyEvent: safetyEvent({ id: batch[0], intentId: 'intent-2', reason: 'batch one' }) },
      { gateDecision: gateDecision({ id: batch[1], intentId: 'intent-2' }) },
      { safetyEvent: safetyEvent({ id: batch[2], intentId: 'intent-2', reason: 'batch three' }) },
    ]);
    await ledger.globalStop.set('ops', 'drill');
    await ledger.audit.recordSafetyEvent(safetyEvent({ id: ids.last, reason: 'last' }));
  });
  afterAll(async () => {
    await db?.drop();
  });

  test('every row written, concurrently too, is in its intent\'s whole chain; a retry moves nothing', async () => {
    const verdict = await verifyStoredChain(db.pool);
    expect(verdict).toMatchObject({ whole: true, broken: [], unchained: [], beforeChains: 0 });
    // 30 rows of intents 0-3 (and intent-1's six), the global stop's row in the system chain
    expect(verdict.rows).toBe(6 + 24 + 3 + 1);
    expect(verdict.chains).toBe(5);
    const ends = await chainEnds(db.pool);
    expect(ends.get('intent-1')!.length).toBe(6 + 6);
    expect(ends.get('')!.length).toBe(1);
    expect(await posOf(db.pool, 'safety_events', ids.last)).toBe(12);
    // The batch took consecutive positions and one head.
    const { rows } = await db.pool.query(`SELECT chain_pos::int AS pos, encode(chain_head, 'hex') AS head FROM (SELECT chain_pos, chain_head, id FROM safety_events UNION ALL SELECT chain_pos, chain_head, id FROM gate_decisions) r WHERE id = ANY($1::uuid[]) ORDER BY chain_pos`, [batch]);
    expect(rows.map((r) => r.pos)).toEqual([rows[0].pos, rows[0].pos + 1, rows[0].pos + 2]);
    expect(new Set(rows.map((r) => r.head)).size).toBe(1);

    // A retried write (same id) is not written again and does not move the head.
    expect(await ledger.audit.recordSafetyEvent(safetyEvent({ id: ids.last, reason: 'last' }))).toBe(false);
    expect(await ledger.audit.recordGateDecision(gateDecision({ id: ids.gate }))).toBe(false);
    expect((await chainEnds(db.pool)).get('intent-1')).toEqual(ends.get('intent-1'));
    // A retried flush with rows queued after it: only the new row is written, and the chain stays whole.
    const queued = randomUUID();
    expect(await ledger.audit.recordBatch([{ safetyEvent: safetyEvent({ id: ids.last, reason: 'last' }) }, { safetyEvent: safetyEvent({ id: queued, reason: 'queued after' }) }])).toBe(1);
    expect(await posOf(db.pool, 'safety_events', queued)).toBe(13);
    expect(await verifyStoredChain(db.pool)).toMatchObject({ whole: true });
  });

  test('an edited gate decision is named at its row; so is a timestamp moved by one microsecond', async () => {
    const pos = await posOf(db.pool, 'gate_decisions', ids.gate);
    const verdict = await tampered((c) => c.query(`UPDATE gate_decisions SET decision = 'approve', decided_by = 'alice', reason = 'tampered' WHERE id = $1`, [ids.gate]));
    expect(onlyBreak(verdict)).toMatchObject({ chain: 'intent-1', pos, table: 'gate_decisions', id: ids.gate, problem: expect.stringMatching(/edited/) });
    const moved = await tampered((c) => c.query(`UPDATE cost_events SET "timestamp" = "timestamp" + interval '1 microsecond' WHERE id = $1`, [ids.cost]));
    expect(onlyBreak(moved)).toMatchObject({ chain: 'intent-1', id: ids.cost });
  });

  test('an edited row of a batch is named by its batch', async () => {
    const pos = await posOf(db.pool, 'safety_events', batch[0]!);
    const verdict = await tampered((c) => c.query(`UPDATE safety_events SET reason = 'batch changed' WHERE id = $1`, [batch[2]]));
    expect(onlyBreak(verdict)).toMatchObject({ chain: 'intent-2', pos, id: batch[0], problem: expect.stringMatching(new RegExp(`^the batch at positions ${pos}-${pos + 2} \\(3 rows\\) does not hash to its head`)) });
  });

  test('a deleted row is named by its position, at the row after it', async () => {
    const pos = await posOf(db.pool, 'safety_events', ids.middle);
    const verdict = await tampered((c) => c.query(`DELETE FROM safety_events WHERE id = $1`, [ids.middle]));
    expect(onlyBreak(verdict)).toMatchObject({ chain: 'intent-1', pos: pos + 1, id: ids.next, problem: `position ${pos} is missing before this row and no retention checkpoint accounts for it: deleted` });
  });

  test('a row inserted past the chain writer is named; one inserted into a chain at a taken position too', async () => {
    const forged = randomUUID();
    const outside = await tampered((c) =>
      c.query(`INSERT INTO gate_decisions (id, intent_id, gate, decision, decided_by, requested_at, decided_at, timed_out) VALUES ($1, 'intent-1', 'merge', 'approve', 'alice', now(), now(), false)`, [forged]),
    );
    expect(outside).toMatchObject({ whole: false, broken: [], unchained: [expect.objectContaining({ table: 'gate_decisions', id: forged })] });

    const pos = await posOf(db.pool, 'safety_events', ids.middle);
    const inside = await tampered((c) =>
      c.query(
        `INSERT INTO gate_decisions (id, intent_id, gate, decision, decided_by, requested_at, decided_at, timed_out, chain_pos, chain_head)
         SELECT $1, 'intent-1', 'merge', 'approve', 'alice', now(), now(), false, chain_pos, chain_head FROM safety_events WHERE id = $2`,
        [forged, ids.middle],
      ),
    );
    expect(onlyBreak(inside)).toMatchObject({ chain: 'intent-1', pos, problem: expect.stringMatching(/comes twice/) });
  });

  test('two rows swapped in a chain are named at the first of them', async () => {
    const pos = await posOf(db.pool, 'safety_events', ids.middle);
    const verdict = await tampered(async (c) => {
      await c.query(`UPDATE safety_events SET chain_pos = -1 WHERE id = $1`, [ids.middle]);
      await c.query(`UPDATE safety_events SET chain_pos = $2 WHERE id = $1`, [ids.next, pos]);
      await c.query(`UPDATE safety_events SET chain_pos = $2 WHERE id = $1`, [ids.middle, pos + 1]);
    });
    expect(onlyBreak(verdict)).toMatchObject({ chain: 'intent-1', pos, id: ids.next, problem: expect.stringMatching(/moved in the chain/) });
  });

  test('rows deleted at the end are noticed by ledger_chains; with it put right, by an anchor', async () => {
    const before = (await chainEnds(db.pool)).get('intent-1')!;
    const verdict = await tampered((c) => c.query(`DELETE FROM safety_events WHERE intent_id = 'intent-1' AND chain_pos = $1`, [before.length]));
    expect(onlyBreak(verdict)).toMatchObject({ chain: 'intent-1', problem: expect.stringMatching(/rows at the end were deleted/) });

    const anchor = { chain: 'intent-1', length: before.length, head: before.head, by: 'anchor anchor-1' };
    const client = await db.pool.connect();
    try {
      await client.query(TRIGGERS_OFF);
      await client.query(`DELETE FROM safety_events WHERE intent_id = 'intent-1' AND chain_pos = $1`, [before.length]);
      await client.query(`UPDATE ledger_chains SET length = length - 1, head = (SELECT chain_head FROM safety_events WHERE intent_id = 'intent-1' AND chain_pos = $1) WHERE chain = 'intent-1'`, [before.length - 1]);
      expect((await verifyStoredChain(client)).whole).toBe(true);
      const caught = onlyBreak(await verifyStoredChain(client, { anchors: [anchor] }));
      expect(caught).toMatchObject({ chain: 'intent-1', pos: before.length, problem: `anchor anchor-1 saw intent intent-1's chain at ${before.length} row(s) (${before.head.slice(0, 12)}), but it ends at ${before.length - 1}: rows were deleted` });
      // and a rewrite up to an anchor: the anchor's head is not the chain's there
      const rewritten = onlyBreak(await verifyStoredChain(client, { anchors: [{ ...anchor, length: 2, head: 'a'.repeat(64) }] }));
      expect(rewritten).toMatchObject({ pos: 2, id: ids.gate, problem: expect.stringMatching(/^anchor anchor-1 recorded head aaaaaaaaaaaa at 2 row\(s\)/) });
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });

  test('a whole intent deleted, its head too, is noticed by the LEDGER_ANCHOR row that listed it', async () => {
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      const anchored = await writeAnchorRow(client, randomUUID(), new Date());
      expect(anchored.chains).toBe(4);
      await client.query(`${['safety_events', 'gate_decisions', 'cost_events'].map((t) => `ALTER TABLE ${t} DISABLE TRIGGER USER;`).join(' ')}`);
      for (const table of ['safety_events', 'gate_decisions', 'cost_events']) await client.query(`DELETE FROM ${table} WHERE intent_id = 'intent-3'`);
      await client.query(`DELETE FROM ledger_chains WHERE chain = 'intent-3'`);
      const broken = onlyBreak(await verifyStoredChain(client));
      expect(broken).toMatchObject({ chain: 'intent-3', problem: expect.stringMatching(/^LEDGER_ANCHOR row [0-9a-f-]+ saw intent intent-3's chain at \d+ row\(s\) \([0-9a-f]{12}\), but it ends at 0: rows were deleted$/) });
      // and the LEDGER_ANCHOR row deleted with it breaks the system chain
      await client.query(`DELETE FROM safety_events WHERE event_type = 'LEDGER_ANCHOR'`);
      const verdict = await verifyStoredChain(client);
      expect(verdict.broken).toEqual([expect.objectContaining({ chain: '', problem: expect.stringMatching(/rows at the end were deleted/) })]);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });
});

describeOnBackends('retention and the hash chains on the %s PostgreSQL', (baseUrl) => {
  let db: FreshDatabase;
  let ledger: Ledger;
  beforeAll(async () => {
    ({ db, ledger } = await migratedLedger(baseUrl));
  });
  afterAll(async () => {
    await db?.drop();
  });

  test('retention cuts whole batches past it, records the ranges in a checkpoint, and the chains still verify', async () => {
    const now = Date.now();
    // Old and new interleaved, so that what is cut is not only the start of the chain.
    await ledger.audit.recordSafetyEvent(safetyEvent({ timestamp: new Date(now - 100 * DAY) }));
    await ledger.audit.recordSafetyEvent(safetyEvent({ timestamp: new Date(now - 100 * DAY) }));
    await ledger.audit.recordSafetyEvent(safetyEvent({ timestamp: new Date(now - DAY) }));
    await ledger.audit.recordCost(costEvent({ timestamp: new Date(now - 300 * DAY) }));
    await ledger.audit.recordGateDecision(gateDecision({ requestedAt: new Date(now - DAY), decidedAt: new Date(now - DAY) }));
    // Retention's clock two days back, so that its checkpoint is old enough for the next cut to take.
    const deleted = await ledger.retention.cleanup(90, new Date(now - 2 * DAY));
    expect(deleted).toMatchObject({ safety_events: 2, cost_events: 1, gate_decisions: 0 });
    const { rows } = await db.pool.query(`SELECT chain_pos::int AS pos, intent_id, metadata FROM safety_events WHERE event_type = 'LEDGER_CHECKPOINT'`);
    const hash = expect.stringMatching(/^[0-9a-f]{64}$/);
    expect(rows).toEqual([{ pos: 1, intent_id: null, metadata: { cutRows: 3, cuts: { 'intent-1': [[1, 2, hash], [4, 4, hash]] } } }]);
    expect(await verifyStoredChain(db.pool)).toMatchObject({ whole: true, rows: 3 });

    // A later cut merges with the earlier one and takes the earlier checkpoint: the latest says all that was cut.
    const later = await ledger.retention.cleanup(90, new Date(now + 95 * DAY));
    expect(later).toMatchObject({ safety_events: 2, gate_decisions: 1, cost_events: 0 });
    const { rows: latest } = await db.pool.query(`SELECT metadata FROM safety_events WHERE event_type = 'LEDGER_CHECKPOINT'`);
    expect(latest).toEqual([{ metadata: { cutRows: 3, cuts: { '': [[1, 1, hash]], 'intent-1': [[1, 5, hash]] } } }]);
    expect(await verifyStoredChain(db.pool)).toMatchObject({ whole: true, rows: 1, broken: [] });

    // A deletion no checkpoint accounts for is still named.
    await ledger.audit.recordSafetyEvent(safetyEvent({ reason: 'to be removed' }));
    await ledger.audit.recordSafetyEvent(safetyEvent({ reason: 'after it' }));
    const client = await db.pool.connect();
    try {
      await client.query(TRIGGERS_OFF);
      await client.query(`DELETE FROM safety_events WHERE reason = 'to be removed'`);
      const broken = onlyBreak(await verifyStoredChain(client));
      expect(broken).toMatchObject({ chain: 'intent-1', pos: 7, problem: expect.stringMatching(/^position 6 is missing/) });
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });
});

describeOnBackends('the chain migration on the %s PostgreSQL', (baseUrl) => {
  test('rows written before it stay outside the chains and are counted apart; rows written after it chain', async () => {
    const db = await freshDatabase(baseUrl);
    const before = mkdtempSync(path.join(tmpdir(), 'warden-migrations-'));
    try {
      const shipped = path.join(__dirname, '../../src/ledger/migrations');
      for (const file of readdirSync(shipped).filter((f) => f < '010')) copyFileSync(path.join(shipped, file), path.join(before, file));
      await migrate(db.pool, before);
      await db.pool.query(`INSERT INTO safety_events (id, "timestamp", event_type, intent_id, reason, severity) VALUES ($1, now(), 'STAGE_COMPLETED', 'intent-1', 'old', 'info')`, [randomUUID()]);
      await db.pool.query(`INSERT INTO gate_decisions (id, intent_id, gate, decision, decided_by, requested_at, decided_at, timed_out) VALUES ($1, 'intent-1', 'merge', 'approve', 'alice', now(), now(), false)`, [randomUUID()]);
      await migrate(db.pool);
      const ledger = new Ledger(db.pool);
      await ledger.audit.recordCost(costEvent());
      await ledger.audit.recordSafetyEvent(safetyEvent());
      expect(await verifyStoredChain(db.pool)).toMatchObject({ whole: true, rows: 2, beforeChains: 2, unchained: [] });
    } finally {
      rmSync(before, { recursive: true, force: true });
      await db.drop();
    }
  });
});

describeOnBackends('checking the chains from a date on the %s PostgreSQL', (baseUrl) => {
  test('--since checks each chain from its first batch of that date on, linked to the head before it', async () => {
    const { db, ledger } = await migratedLedger(baseUrl);
    try {
      const old = randomUUID();
      const recent = randomUUID();
      await ledger.audit.recordSafetyEvent(safetyEvent({ id: old, timestamp: new Date(Date.now() - 10 * DAY), reason: 'old' }));
      await ledger.audit.recordSafetyEvent(safetyEvent({ id: recent, timestamp: new Date(), reason: 'recent' }));
      await ledger.audit.recordSafetyEvent(safetyEvent({ timestamp: new Date(), reason: 'more recent' }));
      await ledger.audit.recordSafetyEvent(safetyEvent({ intentId: 'quiet', timestamp: new Date(Date.now() - 10 * DAY), reason: 'old, of an intent with nothing since' }));
      const since = new Date(Date.now() - 5 * DAY);
      const client = await db.pool.connect();
      try {
        await client.query(TRIGGERS_OFF);
        await client.query(`UPDATE safety_events SET reason = 'changed' WHERE id = $1`, [old]);
        expect(await verifyStoredChain(client, { since })).toMatchObject({ whole: true, rows: 2, chains: 1 });
        expect(onlyBreak(await verifyStoredChain(client))).toMatchObject({ pos: 1, id: old });
        await client.query(`UPDATE safety_events SET reason = 'changed' WHERE id = $1`, [recent]);
        expect(onlyBreak(await verifyStoredChain(client, { since }))).toMatchObject({ pos: 2, id: recent });
      } finally {
        await client.query('ROLLBACK');
        client.release();
      }
    } finally {
      await db.drop();
    }
  });
});

describeOnBackends('the anchor row on the %s PostgreSQL', (baseUrl) => {
  test('lists only the chains that moved since the last anchor, and a retried anchor lists nothing twice', async () => {
    const { db, ledger } = await migratedLedger(baseUrl);
    try {
      await ledger.audit.recordSafetyEvent(safetyEvent({ intentId: 'a' }));
      await ledger.audit.recordSafetyEvent(safetyEvent({ intentId: 'b' }));
      const first = randomUUID();
      expect(await inTransaction(db.pool, (c) => writeAnchorRow(c, first, new Date()))).toMatchObject({ length: 1, chains: 2 });
      await ledger.audit.recordSafetyEvent(safetyEvent({ intentId: 'b' }));
      expect(await inTransaction(db.pool, (c) => writeAnchorRow(c, first, new Date()))).toMatchObject({ length: 1, chains: 0 });
      expect(await inTransaction(db.pool, (c) => writeAnchorRow(c, randomUUID(), new Date()))).toMatchObject({ length: 2, chains: 1 });
      const { rows } = await db.pool.query(`SELECT metadata->'heads' AS heads FROM safety_events WHERE event_type = 'LEDGER_ANCHOR' ORDER BY chain_pos`);
      expect(rows.map((r) => Object.fromEntries(Object.entries(r.heads as Record<string, [number, string]>).map(([k, [n]]) => [k, n])))).toEqual([{ a: 1, b: 1 }, { b: 2 }]);
      expect(await verifyStoredChain(db.pool)).toMatchObject({ whole: true, marksChecked: 3 });
    } finally {
      await db.drop();
    }
  });
});
