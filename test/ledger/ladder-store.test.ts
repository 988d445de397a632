import { randomUUID } from 'node:crypto';
import { LadderStore } from '../../src/ledger/ladder-store';
import type { FreshDatabase } from '../helpers/database';
import { describeOnBackends } from '../helpers/database';
import { migratedLedger } from './fixtures';

describeOnBackends('automation ladder on the %s PostgreSQL', (baseUrl) => {
  let db: FreshDatabase;
  let store: LadderStore;
  beforeAll(async () => {
    ({ db } = await migratedLedger(baseUrl));
    store = new LadderStore(db.pool);
  });
  afterAll(async () => {
    await db?.drop();
  });
  const climbing = { level: 0 as const, allowLevelUp: true };

  test('a scope starts at the configured level; the 10th successful run lifts it to L1, recorded as an event', async () => {
    const scope = `agent:climber-${randomUUID()}`;
    expect(await store.state(scope, { level: 2, allowLevelUp: true })).toMatchObject({ level: 2, pinned: false, metrics: { totalRuns: 0 } });
    for (let i = 1; i <= 9; i++) {
      const { after } = await store.recordRun({ id: randomUUID(), scope, intentId: `i${i}`, run: { success: true, humanApproved: true }, defaults: climbing });
      expect(after.level).toBe(0);
    }
    const tenth = await store.recordRun({ id: randomUUID(), scope, intentId: 'i10', run: { success: true, humanApproved: true }, defaults: climbing });
    expect(tenth.after).toMatchObject({ level: 1, metrics: { totalRuns: 10, successfulRuns: 10 } });
    const { rows } = await db.pool.query("SELECT intent_id, reason, metadata FROM safety_events WHERE event_type = 'LADDER_LEVEL_CHANGED' AND metadata->>'scope' = $1", [scope]);
    expect(rows).toEqual([{ intent_id: 'i10', reason: `${scope} climbed to L1: the level's requirements hold after 10 runs`, metadata: { scope, from: 0, to: 1, by: null } }]);
  });

  test('the same run recorded twice counts once', async () => {
    const scope = `agent:retry-${randomUUID()}`;
    const id = randomUUID();
    await store.recordRun({ id, scope, intentId: 'x', run: { success: true }, defaults: climbing });
    const again = await store.recordRun({ id, scope, intentId: 'x', run: { success: true }, defaults: climbing });
    expect(again.recorded).toBe(false);
    expect((await store.state(scope, climbing)).metrics.totalRuns).toBe(1);
  });

  test('runs finishing at once are all counted (the scope lock serialises them)', async () => {
    const scope = `agent:busy-${randomUUID()}`;
    await Promise.all(Array.from({ length: 8 }, (_, i) => store.recordRun({ id: randomUUID(), scope, intentId: `p${i}`, run: { success: true }, defaults: climbing })));
    expect((await store.state(scope, climbing)).metrics).toMatchObject({ totalRuns: 8, successfulRuns: 8 });
  });

  test('a person pins a level: runs still count, the level stays; a failure drops an unpinned one', async () => {
    const scope = `agent:pinned-${randomUUID()}`;
    await store.setLevel({ scope, level: 3, pinned: true, by: 'alice', reason: 'trusted', defaults: climbing });
    const failed = await store.recordRun({ id: randomUUID(), scope, intentId: 'f', run: { success: false }, defaults: climbing });
    expect(failed.after).toMatchObject({ level: 3, pinned: true, metrics: { totalRuns: 1, successfulRuns: 0 } });
    await store.setLevel({ scope, level: 3, pinned: false, by: 'alice', defaults: climbing });
    const again = await store.recordRun({ id: randomUUID(), scope, intentId: 'g', run: { success: false }, defaults: climbing });
    expect(again.after).toMatchObject({ level: 2, pinned: false, metrics: { totalRuns: 2 } });
    const all = await store.scopes(climbing);
    expect(all.find((s) => s.scope === scope)).toMatchObject({ level: 2 });
  });

  test('three failed intents in a row on one repository drop the level a step, with the way back; other repositories and a success in between do not count', async () => {
    const scope = `agent:streak-${randomUUID()}`;
    await store.setLevel({ scope, level: 3, pinned: false, by: 'alice', defaults: climbing });
    const fail = (intentId: string, repo: string) => store.recordRun({ id: randomUUID(), scope, intentId, run: { success: false, repo }, defaults: climbing });
    const succeed = (intentId: string, repo: string) => store.recordRun({ id: randomUUID(), scope, intentId, run: { success: true, repo }, defaults: climbing });
    expect((await fail('a1', '/repos/api')).after.level).toBe(3);
    expect((await fail('b1', '/repos/web')).after.level).toBe(3);
    expect((await fail('a2', '/repos/api')).after).toMatchObject({ level: 3, metrics: { failureStreaks: { '/repos/api': 2, '/repos/web': 1 } } });
    expect((await succeed('a3', '/repos/api')).after.metrics.failureStreaks).toEqual({ '/repos/web': 1 });
    await fail('a4', '/repos/api');
    await fail('a5', '/repos/api');
    const third = await fail('a6', '/repos/api');
    expect(third.after).toMatchObject({ level: 2, metrics: { failureStreaks: { '/repos/web': 1 } } });
    const { rows } = await db.pool.query(
      "SELECT intent_id, reason, suggestion, metadata FROM safety_events WHERE event_type = 'LADDER_LEVEL_CHANGED' AND metadata->>'scope' = $1 AND metadata->>'by' IS NULL",
      [scope],
    );
    expect(rows).toEqual([
      {
        intent_id: 'a6',
        reason: `${scope} dropped to L2: intent a6 is the 3rd failed intent in a row on /repos/api`,
        suggestion: `Look at why it failed (warden audit a6); once the cause is fixed, restore the level with: warden ladder set 3 --agent ${scope.replace(/^agent:/, '')} --no-pin --reason "…"`,
        metadata: { scope, from: 3, to: 2, by: null, repo: '/repos/api' },
      },
    ]);
    // The streak that dropped it is spent: one more failure there does not drop it again.
    expect((await fail('a7', '/repos/api')).after.level).toBe(2);
    // A person's rejection still drops it at once.
    expect((await store.recordRun({ id: randomUUID(), scope, intentId: 'r1', run: { success: false, humanApproved: false, repo: '/repos/api' }, defaults: climbing })).after.level).toBe(1);
  });

  test('a reported missed critical bug counts and drops the level one step', async () => {
    const scope = `agent:missed-${randomUUID()}`;
    await store.setLevel({ scope, level: 2, pinned: false, by: 'alice', defaults: climbing });
    const after = await store.recordMissedBug({ scope, intentId: 'm1', by: 'bob', reason: 'SQL injection in the new query', defaults: climbing });
    expect(after).toMatchObject({ level: 1, metrics: { missedCriticalBugs: 1 } });
    const { rows } = await db.pool.query("SELECT reason FROM safety_events WHERE event_type = 'LADDER_LEVEL_CHANGED' AND intent_id = 'm1'");
    expect(rows).toEqual([{ reason: `${scope} dropped to L1: bob reported a critical bug review missed in m1: SQL injection in the new query` }]);
  });

  test('snapshots are append-only', async () => {
    await expect(db.pool.query('UPDATE ladder_metrics SET level = 4')).rejects.toThrow(/append-only/);
  });
});
