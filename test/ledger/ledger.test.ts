import { randomUUID } from 'node:crypto';
import { ZodError } from 'zod';
import type { Ledger } from '../../src/ledger/ledger';
import type { SafetyEventInput } from '../../src/ledger/types';
import type { FreshDatabase } from '../helpers/database';
import { describeOnBackends } from '../helpers/database';
import { costEvent, countRows, gateDecision, micros, migratedLedger, safetyEvent, usdOf } from './fixtures';

describeOnBackends('ledger on the %s PostgreSQL', (baseUrl) => {
  let db: FreshDatabase;
  let ledger: Ledger;
  beforeAll(async () => {
    ({ db, ledger } = await migratedLedger(baseUrl));
  });
  afterAll(async () => {
    await db?.drop();
  });

  describe('writes are idempotent by id', () => {
    test('a safety event written twice is one row; the second write says so', async () => {
      const event = safetyEvent({
        intentId: 'idem',
        eventType: 'CIRCUIT_TRIPPED',
        severity: 'high',
        breakerId: 'anthropic:messages',
        modelId: 'claude',
        agentId: 'anthropic',
        stage: 'impl',
        costSnapshot: { intentUsd: '1.250000', limitUsd: '5' },
        suggestion: 'wait for the half-open probe',
        metadata: { errors: 5, window: 20 },
      });
      expect(await ledger.audit.recordSafetyEvent(event)).toBe(true);
      expect(await ledger.audit.recordSafetyEvent(event)).toBe(false);
      // A retry after a crash may even carry a different timestamp: the id decides.
      expect(await ledger.audit.recordSafetyEvent({ ...event, timestamp: new Date(), reason: 'retried' })).toBe(false);
      const rows = await db.pool.query('SELECT * FROM safety_events WHERE id = $1', [event.id]);
      expect(rows.rows).toHaveLength(1);
      expect(rows.rows[0]).toMatchObject({
        event_type: 'CIRCUIT_TRIPPED',
        severity: 'high',
        breaker_id: 'anthropic:messages',
        reason: 'done',
        cost_snapshot: { intentUsd: '1.250000', limitUsd: '5' },
        metadata: { errors: 5, window: 20 },
        suggestion: 'wait for the half-open probe',
      });
    });

    test('a cost event written twice is one row', async () => {
      const cost = costEvent({ intentId: 'idem' });
      expect(await ledger.audit.recordCost(cost)).toBe(true);
      expect(await ledger.audit.recordCost(cost)).toBe(false);
      expect((await db.pool.query('SELECT count(*)::int AS n FROM cost_events WHERE id = $1', [cost.id])).rows[0].n).toBe(1);
    });

    test('a gate decision written twice is one row', async () => {
      const decision = gateDecision({ intentId: 'idem', decision: 'approve-with-conditions', conditions: ['add a test'] });
      expect(await ledger.audit.recordGateDecision(decision)).toBe(true);
      expect(await ledger.audit.recordGateDecision(decision)).toBe(false);
      const rows = await db.pool.query('SELECT decided_by, conditions FROM gate_decisions WHERE id = $1', [decision.id]);
      expect(rows.rows).toEqual([{ decided_by: 'alice', conditions: ['add a test'] }]);
    });

    test('concurrent writes of the same rows insert each once', async () => {
      const event = safetyEvent({ intentId: 'idem-race' });
      const results = await Promise.all(Array.from({ length: 10 }, () => ledger.audit.recordSafetyEvent(event)));
      expect(results.filter(Boolean)).toHaveLength(1);
    });
  });

  describe('bad input is rejected with a zod error and writes nothing', () => {
    const cases: Array<[string, (l: Ledger) => Promise<unknown>]> = [
      ['a safety event id that is not a uuid', (l) => l.audit.recordSafetyEvent(safetyEvent({ id: 'event-1' }))],
      ['an unknown event type', (l) => l.audit.recordSafetyEvent(safetyEvent({ eventType: 'SOMETHING' as never }))],
      ['an unknown severity', (l) => l.audit.recordSafetyEvent(safetyEvent({ severity: 'urgent' as never }))],
      ['a cost snapshot with a float', (l) => l.audit.recordSafetyEvent(safetyEvent({ costSnapshot: { dayUsd: 0.3 as never } }))],
      ['usd with seven decimals', (l) => l.audit.recordCost(costEvent({ usd: '0.1234567' }))],
      ['usd as a number', (l) => l.audit.recordCost(costEvent({ usd: 0.1 as never }))],
      ['negative usd', (l) => l.audit.recordCost(costEvent({ usd: '-1.00' }))],
      ['negative tokens', (l) => l.audit.recordCost(costEvent({ inputTokens: -1 }))],
      ['attempt zero', (l) => l.audit.recordCost(costEvent({ attempt: 0 }))],
      ['an unknown gate decision', (l) => l.audit.recordGateDecision(gateDecision({ decision: 'maybe' as never }))],
      ['a gate decision time that is not a date', (l) => l.audit.recordGateDecision(gateDecision({ decidedAt: 'yesterday' }))],
    ];
    test.each(cases)('%s', async (_what, write) => {
      const before = await Promise.all(['safety_events', 'cost_events', 'gate_decisions'].map((t) => countRows(db.pool, t)));
      await expect(write(ledger)).rejects.toBeInstanceOf(ZodError);
      const after = await Promise.all(['safety_events', 'cost_events', 'gate_decisions'].map((t) => countRows(db.pool, t)));
      expect(after).toEqual(before);
    });
  });

  describe('money is exact', () => {
    test('ten times 0.10 is exactly 1.00, and 0.1 + 0.2 is 0.3 (unlike floats)', async () => {
      const since = new Date('2031-03-01T00:00:00Z');
      for (let i = 0; i < 10; i++) await ledger.audit.recordCost(costEvent({ intentId: 'exact-ten', timestamp: since, usd: '0.100000' }));
      await ledger.audit.recordCost(costEvent({ intentId: 'exact-sum', timestamp: since, usd: '0.1' }));
      await ledger.audit.recordCost(costEvent({ intentId: 'exact-sum', timestamp: since, usd: '0.2' }));
      const byIntent = await ledger.queries.costs({ since, by: 'intent' });
      expect(0.1 + 0.2).not.toBe(0.3);
      expect(byIntent.rows.find((r) => r.key === 'exact-ten')).toMatchObject({ usd: '1.000000', calls: 10 });
      expect(byIntent.rows.find((r) => r.key === 'exact-sum')).toMatchObject({ usd: '0.300000', calls: 2 });
      expect(byIntent.totalUsd).toBe('1.300000');
    });

    test('millionths survive large sums', async () => {
      const since = new Date('2031-04-01T00:00:00Z');
      await ledger.audit.recordCost(costEvent({ intentId: 'exact-big', timestamp: since, usd: '12345678.123456' }));
      await ledger.audit.recordCost(costEvent({ intentId: 'exact-big', timestamp: since, usd: '0.000001' }));
      const { totalUsd } = await ledger.queries.costs({ since, by: 'intent' });
      expect(totalUsd).toBe('12345678.123457');
      const stored = await db.pool.query(`SELECT usd FROM cost_events WHERE intent_id = 'exact-big' ORDER BY usd`);
      expect(stored.rows.map((r) => r.usd)).toEqual(['0.000001', '12345678.123456']);
    });
  });

  test('a NUL character or half of a character, which PostgreSQL text and jsonb refuse, is stored as U+FFFD instead of failing the write forever', async () => {
    const intentId = `nul-${randomUUID()}`;
    const cut = '😀'.slice(0, 1); // a lone surrogate, as a slice through an emoji leaves it
    expect(await ledger.audit.recordSafetyEvent(safetyEvent({ intentId, reason: 'by "a\u0000b"', metadata: { payload: 'x\u0000y', 'k\u0000': 1, cut, whole: '😀' } }))).toBe(true);
    expect(await ledger.audit.recordGateDecision(gateDecision({ intentId, by: 'a\u0000b', reason: 'r\u0000' }))).toBe(true);
    const { rows } = await db.pool.query('SELECT reason, metadata FROM safety_events WHERE intent_id = $1', [intentId]);
    expect(rows).toEqual([{ reason: 'by "a\uFFFDb"', metadata: { payload: 'x\uFFFDy', 'k\uFFFD': 1, cut: '\uFFFD', whole: '😀' } }]);
    const decisions = await db.pool.query('SELECT decided_by FROM gate_decisions WHERE intent_id = $1', [intentId]);
    expect(decisions.rows).toEqual([{ decided_by: 'a\uFFFDb' }]);
  });

  test('the timeline lists safety events, costs and gate decisions in the order the ledger received them, whatever their clocks say', async () => {
    const t = (s: number): Date => new Date(Date.UTC(2031, 0, 1, 12, 0, s));
    const intentId = `timeline-${randomUUID()}`;
    await ledger.audit.recordSafetyEvent(safetyEvent({ intentId, timestamp: t(0), eventType: 'INTENT_STARTED', reason: 'add rate limiting' }));
    await ledger.audit.recordCost(costEvent({ intentId, timestamp: t(1), stage: 'impl', attempt: 2, usd: '0.012500', inputTokens: 1200, outputTokens: 300 }));
    // The request, then its decision stamped earlier: a decision the workflow accepted before it wrote the request.
    await ledger.audit.recordSafetyEvent(safetyEvent({ intentId, timestamp: t(3), eventType: 'GATE_REQUESTED', stage: 'merge', reason: 'Merge?', severity: 'info' }));
    await ledger.audit.recordGateDecision(gateDecision({ intentId, gate: 'merge', decision: 'reject', by: 'bob', reason: 'tests are thin', requestedAt: t(2), decidedAt: t(2) }));
    await ledger.audit.recordSafetyEvent(safetyEvent({ intentId, timestamp: t(5), eventType: 'INTENT_REJECTED', reason: 'rejected at merge' }));
    await ledger.audit.recordSafetyEvent(safetyEvent({ intentId: 'someone-else', timestamp: t(2) }));

    const timeline = await ledger.queries.timeline(intentId);
    expect(timeline.map((e) => [e.at.toISOString(), e.kind, e.type])).toEqual([
      [t(0).toISOString(), 'safety', 'INTENT_STARTED'],
      [t(1).toISOString(), 'cost', 'COST'],
      [t(3).toISOString(), 'safety', 'GATE_REQUESTED'],
      [t(2).toISOString(), 'gate', 'GATE_DECISION'],
      [t(5).toISOString(), 'safety', 'INTENT_REJECTED'],
    ]);
    expect(timeline[1]).toEqual({
      at: t(1),
      kind: 'cost',
      type: 'COST',
      stage: 'impl',
      usd: '0.012500',
      summary: 'scripted / model-a, attempt 2: 1200 input + 300 output tokens',
    });
    expect(timeline[2]).toMatchObject({ stage: 'merge', severity: 'info', summary: 'Merge?' });
    expect(timeline[3]!.summary).toBe('merge gate: reject by bob: tests are thin');
    expect(await ledger.queries.timeline('no-such-intent')).toEqual([]);

    // Asked for, each activity attempt of the intent's workflow joins the timeline where it was written, at its end.
    const run = { workflowId: `intent-${intentId}`, runId: 'run-0123456789', taskQueue: 'warden', startedAt: t(1), endedAt: new Date(t(1).getTime() + 2500) };
    await ledger.activityRuns.record({ ...run, activityId: '7', attempt: 1, activityType: 'runAgentStage', stage: 'impl', outcome: 'failed', failureType: 'AGENT_TIMEOUT' });
    await ledger.activityRuns.record({ ...run, activityId: '7', attempt: 2, activityType: 'runAgentStage', stage: 'impl', intentId, outcome: 'completed', spendUsd: '0.012500', startedAt: t(3), endedAt: t(3) });
    await ledger.activityRuns.record({ ...run, workflowId: 'intent-someone-else', activityId: '1', attempt: 1, activityType: 'runTests', outcome: 'completed' });
    expect(await ledger.queries.timeline(intentId, { activities: false })).toEqual(timeline);
    const withActivities = await ledger.queries.timeline(intentId, { activities: true });
    expect(withActivities.map((e) => e.type)).toEqual(['INTENT_STARTED', 'COST', 'GATE_REQUESTED', 'GATE_DECISION', 'INTENT_REJECTED', 'runAgentStage', 'runAgentStage']);
    expect(withActivities[5]).toEqual({
      at: new Date(t(1).getTime() + 2500),
      kind: 'activity',
      type: 'runAgentStage',
      stage: 'impl',
      summary: 'attempt 1 failed (AGENT_TIMEOUT) after 2.5 s, started 12:00:01.000 (run run-0123, activity 7)',
    });
    expect(withActivities[6]).toMatchObject({ usd: '0.012500', summary: expect.stringMatching(/^attempt 2 completed after 0\.0 s/) });
  });

  test('rows written before the ledger numbered them (seq NULL) come first, in the order of their clocks', async () => {
    const t = (s: number): Date => new Date(Date.UTC(2031, 0, 2, 12, 0, s));
    const intentId = `timeline-old-${randomUUID()}`;
    await ledger.audit.recordSafetyEvent(safetyEvent({ intentId, timestamp: t(0), eventType: 'STAGE_STARTED', reason: 'review attempt 1' }));
    // Rows from before migration 008, as it left them: no seq.
    const old = (eventType: string, at: Date) =>
      db.pool.query(`INSERT INTO safety_events (id, "timestamp", event_type, intent_id, reason, severity, seq) VALUES ($1, $2, $3, $4, 'old', 'info', NULL)`, [randomUUID(), at, eventType, intentId]);
    await old('STAGE_COMPLETED', t(-1));
    await old('INTENT_STARTED', t(-3));
    await db.pool.query(`INSERT INTO gate_decisions (id, intent_id, gate, decision, decided_by, requested_at, decided_at, timed_out, seq) VALUES ($1, $2, 'lld', 'approve', 'carol', $3, $3, false, NULL)`, [randomUUID(), intentId, t(-2)]);
    expect((await ledger.queries.timeline(intentId)).map((e) => e.type)).toEqual(['INTENT_STARTED', 'GATE_DECISION', 'STAGE_COMPLETED', 'STAGE_STARTED']);
  });

  describe("an intent's record (warden status)", () => {
    const t = (s: number): Date => new Date(Date.UTC(2031, 0, 3, 12, 0, s));

    test('spend, attempts, tests, decisions and a failed ending with where its lineage went', async () => {
      const intentId = `record-${randomUUID()}`;
      const event = (eventType: SafetyEventInput['eventType'], s: number, overrides: Partial<SafetyEventInput> = {}) =>
        ledger.audit.recordSafetyEvent(safetyEvent({ intentId, eventType, timestamp: t(s), ...overrides }));
      await event('INTENT_STARTED', 0, { reason: 'add rate limiting' });
      await event('STAGE_STARTED', 1, { stage: 'impl', metadata: { attempt: 1 } });
      await ledger.audit.recordCost(costEvent({ intentId, usd: '0.012500' }));
      await event('TESTS_FAILED', 2, { stage: 'impl', reason: 'impl attempt 1: tests failed (1 failed)', metadata: { attempt: 1 } });
      await event('STAGE_STARTED', 3, { stage: 'impl', metadata: { attempt: 2 } });
      await ledger.audit.recordCost(costEvent({ intentId, usd: '0.000001' }));
      await event('GATE_REQUESTED', 4, { stage: 'impl', reason: 'Let it go on?', metadata: { gate: 'cascade', requestedAt: t(4).toISOString() } });
      await event('DECISION_REFUSED', 5, { reason: 'unsigned decision refused', metadata: { payload: JSON.stringify({ gate: 'cascade', by: 'mallory' }) } });
      await event('DECISION_REFUSED', 5, { reason: 'not a decision', metadata: { payload: '{"cut off' } });
      // Stamped before the request it answers; the ledger still received it after.
      await ledger.audit.recordGateDecision(gateDecision({ intentId, gate: 'cascade', decision: 'approve', by: 'alice', requestedAt: t(4), decidedAt: t(3) }));
      await event('GATE_DECIDED', 6, { metadata: { gate: 'cascade', decision: 'approve', by: 'alice', signed: true } });
      await event('DESIGN_REVIEWED', 1, { stage: 'lld', reason: 'lld attempt 1 reviewed by gpt (gpt-4.1): BLOCK — no tests\n- [high/tests] nothing tests it', metadata: { verdict: 'BLOCK', attempt: 1 } });
      await event('ESCAPE_ATTEMPTED', 6, { stage: 'impl', reason: 'the impl agent (attempt 2): connected to port 7233 (Temporal frontend): refused', metadata: { kind: 'connect', port: 7233 } });
      await event('INTENT_FAILED', 7, { stage: 'impl', reason: 'MAX_ITERATIONS_EXCEEDED', metadata: { lineagePath: '/home/w/lineage/x', mergedCommit: null } });

      const record = await ledger.queries.intentRecord(intentId);
      expect(record).toEqual({
        started: { at: t(0), goal: 'add rate limiting' },
        spendUsd: '0.012501',
        calls: 2,
        attempts: { impl: 2 },
        stage: 'impl',
        tests: [{ attempt: 1, passed: false, summary: 'impl attempt 1: tests failed (1 failed)' }],
        decisions: [{ gate: 'cascade', decision: 'approve', by: 'alice', at: t(3).toISOString(), timedOut: false, signed: true }],
        refusedDecisions: [
          { at: t(5).toISOString(), gate: 'cascade', by: 'mallory', reason: 'unsigned decision refused' },
          { at: t(5).toISOString(), reason: 'not a decision' },
        ],
        sandboxAttempts: [{ at: t(6).toISOString(), stage: 'impl', reason: 'the impl agent (attempt 2): connected to port 7233 (Temporal frontend): refused' }],
        designReviews: [{ stage: 'lld', verdict: 'BLOCK', summary: 'lld attempt 1 reviewed by gpt (gpt-4.1): BLOCK — no tests' }],
        ending: { type: 'INTENT_FAILED', at: t(7), stage: 'impl', reason: 'MAX_ITERATIONS_EXCEEDED', lineagePath: '/home/w/lineage/x' },
      });
    });

    test('a gate no decision has closed is open; a stage after an ending (a resume) undoes the ending', async () => {
      const intentId = `record-${randomUUID()}`;
      const event = (eventType: SafetyEventInput['eventType'], s: number, overrides: Partial<SafetyEventInput> = {}) =>
        ledger.audit.recordSafetyEvent(safetyEvent({ intentId, eventType, timestamp: t(s), ...overrides }));
      await event('INTENT_STARTED', 0);
      await event('GATE_REQUESTED', 1, { reason: 'Approve the design?', metadata: { gate: 'lld', requestedAt: t(1).toISOString() } });
      await ledger.audit.recordGateDecision(gateDecision({ intentId, gate: 'lld', decision: 'defer', by: 'alice', requestedAt: t(1), decidedAt: t(2) }));
      expect((await ledger.queries.intentRecord(intentId)).openGate).toEqual({ gate: 'lld', requestedAt: t(1).toISOString(), prompt: 'Approve the design?' });

      await event('INTENT_CANCELLED', 3, { reason: 'cancelled', metadata: { lineagePath: null } });
      const cancelled = await ledger.queries.intentRecord(intentId);
      expect(cancelled.openGate).toBeUndefined();
      expect(cancelled.ending).toEqual({ type: 'INTENT_CANCELLED', at: t(3), reason: 'cancelled' });

      await event('STAGE_STARTED', 4, { stage: 'spec', metadata: { attempt: 1 } });
      expect(await ledger.queries.intentRecord(intentId)).toMatchObject({ stage: 'spec', attempts: { spec: 1 } });
      expect((await ledger.queries.intentRecord(intentId)).ending).toBeUndefined();
      expect(await ledger.queries.intentRecord('no-such-intent')).toEqual({ spendUsd: '0.000000', calls: 0, attempts: {}, tests: [], decisions: [], refusedDecisions: [], sandboxAttempts: [], designReviews: [] });
    });
  });

  describe('costs', () => {
    const since = new Date('2032-05-01T00:00:00Z');
    beforeAll(async () => {
      const rows: Array<[intent: string, stage: string, model: string, agent: string, day: string, usd: string, input: number, output: number]> = [
        ['i-1', 'lld', 'opus', 'anthropic', '2032-05-01', '0.300000', 1000, 100],
        ['i-1', 'impl', 'opus', 'anthropic', '2032-05-01', '1.200000', 5000, 900],
        ['i-1', 'impl', 'gpt', 'openai', '2032-05-02', '0.050001', 700, 70],
        ['i-2', 'impl', 'gpt', 'openai', '2032-05-02', '0.700000', 3000, 300],
        ['i-2', 'review', 'opus', 'anthropic', '2032-05-03', '0.000009', 10, 1],
      ];
      for (const [intentId, stage, modelId, agentId, day, usd, inputTokens, outputTokens] of rows) {
        await ledger.audit.recordCost(costEvent({ intentId, stage, modelId, agentId, timestamp: new Date(`${day}T23:59:59.999Z`), usd, inputTokens, outputTokens }));
      }
      // Before `since`: counted only without it.
      await ledger.audit.recordCost(costEvent({ intentId: 'i-old', timestamp: new Date('2032-04-30T23:59:59Z'), usd: '9.000000' }));
    });

    test.each([
      ['intent', [['i-1', '1.550001', 3, 6700, 1070], ['i-2', '0.700009', 2, 3010, 301]]],
      ['stage', [['impl', '1.950001', 3, 8700, 1270], ['lld', '0.300000', 1, 1000, 100], ['review', '0.000009', 1, 10, 1]]],
      ['model', [['opus', '1.500009', 3, 6010, 1001], ['gpt', '0.750001', 2, 3700, 370]]],
      ['agent', [['anthropic', '1.500009', 3, 6010, 1001], ['openai', '0.750001', 2, 3700, 370]]],
      ['day', [['2032-05-01', '1.500000', 2, 6000, 1000], ['2032-05-02', '0.750001', 2, 3700, 370], ['2032-05-03', '0.000009', 1, 10, 1]]],
    ] as const)('by %s', async (by, expected) => {
      const result = await ledger.queries.costs({ since, by });
      expect(result.rows.map((r) => [r.key, r.usd, r.calls, r.inputTokens, r.outputTokens])).toEqual(expected);
      expect(result.totalUsd).toBe('2.250010');
      const sum = result.rows.reduce((total, row) => total + micros(row.usd), 0n);
      expect(usdOf(sum)).toBe(result.totalUsd);
    });

    test('without --since everything counts; a grouping outside the list is refused', async () => {
      const all = await ledger.queries.costs({ by: 'intent' });
      expect(micros(all.totalUsd) - micros('2.250010')).toBeGreaterThanOrEqual(micros('9.000000'));
      await expect(ledger.queries.costs({ by: 'intent; DROP TABLE cost_events' as never })).rejects.toBeInstanceOf(ZodError);
    });
  });

  test('the global stop keeps its history; the latest change wins; each change is a safety event', async () => {
    expect(await ledger.globalStop.current()).toEqual({ stopped: false });
    await ledger.globalStop.set('alice', 'runaway spend');
    const stopped = await ledger.globalStop.current();
    expect(stopped).toMatchObject({ stopped: true, by: 'alice', reason: 'runaway spend' });
    expect(stopped.at).toBeInstanceOf(Date);
    await ledger.globalStop.clear('bob', 'fixed the budget');
    expect(await ledger.globalStop.current()).toMatchObject({ stopped: false, by: 'bob', reason: 'fixed the budget' });
    await ledger.globalStop.set('carol', 'again');
    expect(await ledger.globalStop.current()).toMatchObject({ stopped: true, by: 'carol' });

    const history = await db.pool.query('SELECT active, set_by FROM controls ORDER BY seq');
    expect(history.rows.slice(-3)).toEqual([
      { active: true, set_by: 'alice' },
      { active: false, set_by: 'bob' },
      { active: true, set_by: 'carol' },
    ]);
    const events = await db.pool.query(
      `SELECT event_type, severity FROM safety_events WHERE event_type IN ('GLOBAL_STOP_SET', 'GLOBAL_STOP_CLEARED') ORDER BY "timestamp"`,
    );
    expect(events.rows.slice(-3)).toEqual([
      { event_type: 'GLOBAL_STOP_SET', severity: 'critical' },
      { event_type: 'GLOBAL_STOP_CLEARED', severity: 'info' },
      { event_type: 'GLOBAL_STOP_SET', severity: 'critical' },
    ]);
    await expect(ledger.globalStop.set('', 'no one')).rejects.toBeInstanceOf(ZodError);
    await ledger.globalStop.clear('carol', 'done testing');
  });
});
