import { startIntent } from '../../src/client/intents';
import { Ledger } from '../../src/ledger/ledger';
import { AuditStore } from '../../src/ledger/audit-store';
import type { SafetyEventInput } from '../../src/ledger/types';
import { detectCascade } from '../../src/safety/cascade-detector';
import { addUsd, compareUsd, subUsd, sumUsd } from '../../src/shared/money';
import type { IntentInput } from '../../src/shared/intent';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { safetyEventId } from '../../src/workers/interceptors/safety-events';
import { SAMPLE_LLD, SAMPLE_SPEC } from '../../src/client/sample-repo';
import { makeSampleRepo, waitFor } from '../helpers/env';
import { stageOf, startModelServer, type ModelServer } from '../helpers/model-server';
import { agentCommittedToday, cancel, committedToday, costRows, events, expectOneRowPerDecision, failureMessages, failureOf, failureTypes, intentFor, nextIntentId, safety, script, today, useSafetyWorld, withWorker } from './agent-safety-harness';

// What agent calls cost against the budgets, and the cascade in their answers.
const world = useSafetyWorld('agent-safety-cost');

describe('budgets', () => {
  test('the day budget: the call that would exceed it is denied with an event; settled spend stays within it', async () => {
    const before = await committedToday();
    const budget = addUsd(before, '0.25'); // two calls of at most $0.10 fit, the third does not
    await withWorker({ safety: safety({ dayBudgetUsd: budget, agentDayBudgetUsd: '0' }) }, async (h) => {
      const intent = intentFor(script({ model: 'day-budget', costUsd: 0.1 }), { maxCallUsd: '0.10' });
      const handle = await startIntent(world().client, intent, h.queue);
      expect(await failureOf(handle)).toContain('BUDGET_EXCEEDED');
      expect(h.agentCalls()).toBe(3); // the third stops at its reservation, before its agent runs
      expect(await costRows(intent.id)).toHaveLength(2);
      const denied = await events(intent.id, 'BUDGET_RESERVATION_DENIED');
      expect(denied).toHaveLength(1);
      expect(denied[0]).toMatchObject({ severity: 'high', breaker_id: 'day-budget' });
      const spend = await world().ledger.budget.daySpend(today());
      expect(spend.reservedUsd).toBe('0.000000'); // every reservation settled or released
      expect(subUsd(spend.settledUsd, before)).toBe('0.200000');
      expect(compareUsd(spend.settledUsd, budget)).toBeLessThanOrEqual(0);
    });
  });

  test('several intents racing against one day budget never settle more than it', async () => {
    const before = await committedToday();
    const budget = addUsd(before, '0.55');
    await withWorker({ safety: safety({ dayBudgetUsd: budget, agentDayBudgetUsd: '0' }) }, async (h) => {
      const intents = Array.from({ length: 4 }, () => intentFor(script({ model: 'race', costUsd: 0.1 }), { maxCallUsd: '0.10' }));
      const handles = await Promise.all(intents.map((intent) => startIntent(world().client, intent, h.queue)));
      const outcomes = await Promise.all(handles.map(failureOf));
      for (const types of outcomes) expect(types).toContain('BUDGET_EXCEEDED');
      expect(h.agentCalls()).toBe(9); // 5 paid, 4 refused at their reservation
      expect((await world().pool.query('SELECT count(*)::int AS n FROM cost_events WHERE intent_id = ANY($1)', [intents.map((i) => i.id)])).rows[0].n).toBe(5);
      const spend = await world().ledger.budget.daySpend(today());
      expect(spend.reservedUsd).toBe('0.000000');
      expect(subUsd(spend.settledUsd, before)).toBe('0.500000');
      expect(compareUsd(spend.settledUsd, budget)).toBeLessThanOrEqual(0);
      const denied = await world().pool.query(`SELECT count(*)::int AS n FROM safety_events WHERE event_type = 'BUDGET_RESERVATION_DENIED' AND intent_id = ANY($1)`, [intents.map((i) => i.id)]);
      expect(denied.rows[0].n).toBe(4);
    });
  });

  test("an agent's day budget across intents: the call that would exceed it is denied with COST_BUDGET_EXCEEDED", async () => {
    const before = await agentCommittedToday('scripted');
    await withWorker({ safety: safety({ dayBudgetUsd: '0', agentDayBudgetUsd: addUsd(before, '0.25') }) }, async (h) => {
      const intent = intentFor(script({ model: 'agent-budget', costUsd: 0.1 }), { maxCallUsd: '0.10' });
      const handle = await startIntent(world().client, intent, h.queue);
      expect(await failureOf(handle)).toContain('BUDGET_EXCEEDED');
      expect(h.agentCalls()).toBe(3);
      expect(subUsd(await agentCommittedToday('scripted'), before)).toBe('0.200000');
      const exceeded = await events(intent.id, 'COST_BUDGET_EXCEEDED');
      expect(exceeded).toHaveLength(1);
      expect(exceeded[0]).toMatchObject({ severity: 'high', breaker_id: 'agent-day-budget', reason: expect.stringContaining('agent scripted spent') });
    });
  });

  test('80% and 90% of the stage, intent, agent and day budgets: one COST_WARNING each, never repeated', async () => {
    const dayBefore = await committedToday();
    const agentBefore = await agentCommittedToday('scripted');
    // $0.10 a call: triage alone reaches 80% (not 90%) of its $0.125; the intent, the agent and the day reach 80% at the 4th call and 90% at the 5th.
    await withWorker({ safety: safety({ dayBudgetUsd: addUsd(dayBefore, '0.5'), agentDayBudgetUsd: addUsd(agentBefore, '0.5') }) }, async (h) => {
      const intent = { ...intentFor(script({ model: 'warnings', costUsd: 0.1 }), { maxCallUsd: '0.10', budgetUsd: '0.5', stageBudgetUsd: { triage: '0.125' } }), gates: { 'cost-overrun': { enabled: false } } } as IntentInput;
      const handle = await startIntent(world().client, intent, h.queue);
      await waitFor(async () => (await costRows(intent.id)).length >= 5 || (await handle.describe()).status.name !== 'RUNNING' || undefined, 60_000, 'five paid calls');
      await cancel(handle);
      const warnings = (await events(intent.id, 'COST_WARNING')) as Array<{ breaker_id: string; severity: string; metadata: { share: number } }>;
      const shares = (breaker: string): number[] => warnings.filter((w) => w.breaker_id === breaker).map((w) => w.metadata.share).sort();
      expect(shares('stage-budget')).toEqual([80]);
      expect(shares('intent-budget')).toEqual([80, 90]);
      expect(shares('agent-day-budget')).toEqual([80, 90]);
      expect(shares('day-budget')).toEqual([80, 90]);
      expect(warnings).toHaveLength(7);
      expect(warnings.filter((w) => w.metadata.share === 90).every((w) => w.severity === 'high')).toBe(true);
      expect(sumUsd((await costRows(intent.id)).map((r) => r.usd))).toBe('0.500000');
    });
  });
});

describe('budgets against the real maximum of each call', () => {
  let server: ModelServer;
  beforeAll(async () => {
    server = await startModelServer();
  });
  afterAll(async () => {
    await server?.close();
  });
  beforeEach(() => {
    server.requests.length = 0;
  });

  const json = (value: unknown): string => `\n\`\`\`json\n${JSON.stringify(value)}\n\`\`\`\n`;
  const TRIAGE = `Adds slugify.${json({ risk: 'LOW', confidence: 0.9, affectedPaths: ['lib/strings.js'], rationale: 'one pure function', predicted: { files: 1, lines: 12 } })}`;
  const ANSWERS: Record<string, string> = { triage: TRIAGE, lld: SAMPLE_LLD, spec: SAMPLE_SPEC };
  /** $10 / $30 per million tokens: 40k output tokens cost $1.20. */
  const PRICEY = { 'pricey-model': { inputUsdPerMillion: '10', outputUsdPerMillion: '30' } };

  function httpIntent(maxTokens: number, limits: Record<string, unknown> = {}): IntentInput {
    return {
      id: nextIntentId(),
      goal: 'Add slugify',
      repoPath: makeSampleRepo(),
      paths: ['lib/**'],
      agent: { kind: 'anthropic', model: 'pricey-model', baseUrl: server.url, maxTokens },
      limits: { cooldown: '0s', ...limits },
    } as IntentInput;
  }

  const sumOf = (rows: Array<{ usd: string }>): string => sumUsd(rows.map((r) => r.usd));

  test('a $1 day budget, two intents racing, calls dearer than maxCallUsd: settled spend never passes $1, and cost_events agree', async () => {
    const before = await committedToday();
    const budget = addUsd(before, '1');
    // Each call really costs $0.46 (1k in, 15k out), far over maxCallUsd $0.10; its maximum (20k output) is over $0.60.
    server.respond = (request) => ({ text: ANSWERS[stageOf(request.prompt)] ?? 'ok', usage: { input: 1000, output: 15_000 } });
    await withWorker({ safety: safety({ dayBudgetUsd: budget, agentDayBudgetUsd: '0', pricing: PRICEY }) }, async (h) => {
      const intents = [httpIntent(20_000, { maxCallUsd: '0.10' }), httpIntent(20_000, { maxCallUsd: '0.10' })];
      const handles = await Promise.all(intents.map((intent) => startIntent(world().client, intent, h.queue)));
      for (const types of await Promise.all(handles.map(failureOf))) expect(types).toContain('BUDGET_EXCEEDED');
      const spend = await world().ledger.budget.daySpend(today());
      expect(spend.reservedUsd).toBe('0.000000');
      expect(compareUsd(spend.settledUsd, budget)).toBeLessThanOrEqual(0);
      // Every settled call is in cost_events, at the same amount: the day budget and `warden costs` agree.
      const rows = (await Promise.all(intents.map((i) => costRows(i.id)))).flat();
      expect(rows.length).toBeGreaterThanOrEqual(1);
      expect(rows.every((r) => r.usd === '0.460000')).toBe(true);
      expect(sumOf(rows)).toBe(subUsd(spend.settledUsd, before));
      const denied = await world().pool.query(`SELECT reason FROM safety_events WHERE event_type = 'BUDGET_RESERVATION_DENIED' AND intent_id = ANY($1)`, [intents.map((i) => i.id)]);
      expect(denied.rows.length).toBeGreaterThanOrEqual(2);
      expect(denied.rows[0].reason).toMatch(/this call may cost up to \$0\.6\d{5}/);
    });
  });

  test('an intent budget of $5 with an expensive model: the 80% warning fires, and spend never passes $5', async () => {
    // Each call costs $1.37 (2k in, 45k out); its maximum (50k output) is over $1.50. Three fit, the fourth would pass $5.
    server.respond = (request) => ({ text: ANSWERS[stageOf(request.prompt)] ?? 'ok', usage: { input: 2000, output: 45_000 } });
    await withWorker({ safety: safety({ dayBudgetUsd: '0', agentDayBudgetUsd: '0', pricing: PRICEY }) }, async (h) => {
      const intent = { ...httpIntent(50_000, { budgetUsd: '5' }), gates: { 'cost-overrun': { enabled: false } } } as IntentInput;
      const handle = await startIntent(world().client, intent, h.queue);
      const error = await handle.result().then(
        () => undefined,
        (e: unknown) => e as Error & { cause?: Error },
      );
      expect(error?.cause?.message).toMatch(/^COST_BUDGET_EXCEEDED: spent \$4\.110000 of the intent's \$5\.000000 budget; this call may cost up to \$1\.5\d+, which would pass it/);
      expect(server.requests.filter((r) => r.body.model === 'pricey-model')).toHaveLength(3);
      const rows = await costRows(intent.id);
      expect(sumOf(rows)).toBe('4.110000');
      const types = (await events(intent.id)).map((e) => e.event_type);
      expect(types).toContain('COST_WARNING');
      expect(types.indexOf('COST_WARNING')).toBeLessThan(types.indexOf('COST_BUDGET_EXCEEDED'));
      expect((await events(intent.id, 'COST_BUDGET_EXCEEDED'))[0]).toMatchObject({ breaker_id: 'intent-budget', severity: 'high' });
    });
  });

  test('a paid call whose answer is then refused is counted: cost_events, the settled reservation and activity_runs agree', async () => {
    const before = await committedToday();
    // No JSON block, twice (the answer and its repair): $2.24 each at 200k in, 8k out.
    server.respond = () => ({ text: 'no JSON here', usage: { input: 200_000, output: 8000 } });
    await withWorker({ safety: safety({ dayBudgetUsd: '0', agentDayBudgetUsd: '0', pricing: PRICEY }) }, async (h) => {
      const intent = httpIntent(8000, { budgetUsd: '0' });
      const handle = await startIntent(world().client, intent, h.queue);
      expect(await failureOf(handle)).toContain('INVALID_STRUCTURED_OUTPUT');
      expect(server.requests).toHaveLength(2);
      const rows = await costRows(intent.id);
      expect(rows.map((r) => [r.stage, r.model_id, r.usd, r.input_tokens, r.output_tokens])).toEqual([
        ['triage', 'pricey-model', '2.240000', '200000', '8000'],
        ['triage', 'pricey-model', '2.240000', '200000', '8000'],
      ]);
      const spend = await world().ledger.budget.daySpend(today());
      expect(subUsd(addUsd(spend.settledUsd, spend.reservedUsd), before)).toBe('4.480000');
      const runs = await world().ledger.activityRuns.ofWorkflow(handle.workflowId);
      expect(runs.filter((r) => r.activityType === 'runAgentStage').map((r) => [r.outcome, r.spendUsd])).toEqual([['failed', '4.480000']]);
    });
  });

  test('an unknown model is refused before any request: UNKNOWN_MODEL, nothing sent, nothing reserved', async () => {
    await withWorker({ safety: safety({ pricing: PRICEY }) }, async (h) => {
      const intent = httpIntent(1000);
      const handle = await startIntent(world().client, { ...intent, agent: { kind: 'anthropic', model: 'local-qwen', baseUrl: server.url } } as IntentInput, h.queue);
      expect(await failureOf(handle)).toContain('UNKNOWN_MODEL');
      expect(server.requests).toHaveLength(0);
      const reserved = await world().pool.query('SELECT count(*)::int AS n FROM budget_reservations WHERE intent_id = $1', [intent.id]);
      expect(reserved.rows[0].n).toBe(0);
    });
  });

  test("a CLI's model the worker cannot price: UNKNOWN_MODEL as the attempt starts, the CLI never run, nothing reserved", async () => {
    await withWorker({ safety: safety({ pricing: PRICEY }) }, async (h) => {
      // Were it run, this agent would answer without calling its model: triage would pass, and the attempt cap of 1 halt the intent.
      const agent = { kind: 'command', cli: 'codex', command: 'true', upstream: { kind: 'openai', model: 'unpriced-cli-model', baseUrl: server.url } };
      const intent = { ...httpIntent(1000, { totalAttempts: 1 }), agent } as IntentInput;
      const handle = await startIntent(world().client, intent, h.queue);
      const error = await handle.result().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(failureTypes(error)).toEqual(expect.arrayContaining(['UNKNOWN_MODEL']));
      expect(failureMessages(error).join('\n')).toMatch(/no price for model "unpriced-cli-model": add it to the config's worker\.pricing.*; the agent was not started/);
      expect(h.agentCalls()).toBe(1); // not retried
      const runs = await world().ledger.activityRuns.ofWorkflow(handle.workflowId);
      expect(runs.filter((r) => r.activityType === 'runAgentStage').map((r) => [r.outcome, r.failureType])).toEqual([['failed', 'UNKNOWN_MODEL']]);
      expect(server.requests).toHaveLength(0);
      expect(await costRows(intent.id)).toHaveLength(0);
      const reserved = await world().pool.query('SELECT count(*)::int AS n FROM budget_reservations WHERE intent_id = $1', [intent.id]);
      expect(reserved.rows[0].n).toBe(0);
    });
  });

  test("the config's price of a model, not the built-in one, is what its calls cost", async () => {
    // The default table has claude-sonnet-4-5 at $3 / $15 per million; this config says $7 / $35.
    const configured = safety({ pricing: { 'claude-sonnet-4-5': { inputUsdPerMillion: '7', outputUsdPerMillion: '35' } } });
    server.respond = (request) => ({ text: ANSWERS[stageOf(request.prompt)] ?? 'ok', usage: { input: 1000, output: 200 } });
    await withWorker({ safety: configured }, async (h) => {
      const intent = { ...httpIntent(1000, { totalAttempts: 1 }), agent: { kind: 'anthropic', model: 'claude-sonnet-4-5', baseUrl: server.url, maxTokens: 1000 } } as IntentInput;
      const handle = await startIntent(world().client, intent, h.queue);
      expect(await failureOf(handle)).toContain('SAFETY_HALT'); // the attempt cap of 1 stops it after triage
      // 1000 × $7/M + 200 × $35/M = $0.007 + $0.007
      expect((await costRows(intent.id)).map((r) => [r.stage, r.model_id, r.usd])).toEqual([['triage', 'claude-sonnet-4-5', '0.014000']]);
      const calls = await world().ledger.modelCalls.ofIntent(intent.id);
      expect(calls.map((c) => [c.outcome, c.usd])).toEqual([['answered', '0.014000']]);
    });
  });

  test('a script reporting more than its declared cap: recorded at its real cost, and the intent halts with COST_BUDGET_EXCEEDED', async () => {
    const before = await committedToday();
    await withWorker({ safety: safety({ dayBudgetUsd: '0', agentDayBudgetUsd: '0' }) }, async (h) => {
      const intent = intentFor(script({ model: 'scripted', costUsd: 0.9 }), { maxCallUsd: '0.50' });
      const handle = await startIntent(world().client, intent, h.queue);
      const error = await handle.result().then(
        () => undefined,
        (e: unknown) => e as Error & { cause?: Error },
      );
      expect(error?.cause?.message).toMatch(/^COST_BUDGET_EXCEEDED: the triage call reported \$0\.900000, more than the \$0\.500000 reserved for it/);
      expect((await costRows(intent.id)).map((r) => r.usd)).toEqual(['0.900000']);
      const spend = await world().ledger.budget.daySpend(today());
      expect(subUsd(addUsd(spend.settledUsd, spend.reservedUsd), before)).toBe('0.900000');
      expect((await events(intent.id, 'COST_BUDGET_EXCEEDED'))[0]).toMatchObject({ breaker_id: 'call-cap', severity: 'high' });
    });
  });

  test('a command agent reports no usage: counted at its declared cap, with an "unmetered" COST_WARNING, never silently $0', async () => {
    await withWorker({ safety: safety({ dayBudgetUsd: '0', agentDayBudgetUsd: '0' }) }, async (h) => {
      const intent = { ...intentFor(script({ model: 'unused' }), { maxCallUsd: '0.05', totalAttempts: 1 }), agent: { kind: 'command', command: `cat >/dev/null; printf '%s' '${TRIAGE.replace(/'/g, '')}'` } } as IntentInput;
      const handle = await startIntent(world().client, intent, h.queue);
      expect(await failureOf(handle)).toContain('SAFETY_HALT'); // the attempt cap of 1 stops it after triage
      expect((await costRows(intent.id)).map((r) => [r.stage, r.model_id, r.usd])).toEqual([['triage', 'command', '0.050000']]);
      const warning = (await events(intent.id, 'COST_WARNING')).find((e) => (e.metadata as { unmetered?: boolean }).unmetered);
      expect(warning).toMatchObject({ severity: 'medium', reason: expect.stringMatching(/^unmetered: the triage agent reports no token usage; 1 call\(s\) counted at the declared \$0\.050000/) });
    });
  });
});

describe('cascade', () => {
  // A continuation offer plus a scope expansion.
  const HIGH =
    'The limiter is in `src/upload/limiter.ts`. Would you like me to add the same limiter to the download endpoint as well? ' +
    'While I was in `auth.ts` I also went ahead and replaced the hand-rolled JWT parsing with `jose`.';
  // Completion, scope expansion, a pivot and an offer.
  const CRITICAL =
    'All 31 tests pass ✅. While I was at it I took the liberty of upgrading express to v5 and converting the routes to async handlers. ' +
    "Next, I'll move on to the billing service refactor. Should I also migrate the remaining callback-style code there?";

  test('two categories of cascade phrases: one CASCADE_DETECTED high event, written once though its first write was retried', async () => {
    expect(detectCascade(HIGH).level).toBe('HIGH');
    // The ledger writes the event but the reply is lost once: the retry must add nothing.
    class LosesFirstReply extends AuditStore {
      lost = false;
      override async recordSafetyEvent(input: SafetyEventInput): Promise<boolean> {
        const inserted = await super.recordSafetyEvent(input);
        if (!this.lost && input.eventType === 'CASCADE_DETECTED') {
          this.lost = true;
          throw new Error('Connection terminated unexpectedly');
        }
        return inserted;
      }
    }
    class LedgerLosingFirstReply extends Ledger {
      override readonly audit = new LosesFirstReply(this.pool, this.writer);
    }
    const ledger = new LedgerLosingFirstReply(world().pool);
    await withWorker({ ledger }, async (h) => {
      const intent = intentFor(script({ model: 'cascade-high', triage: { output: HIGH } }));
      const handle = await startIntent(world().client, intent, h.queue);
      const [event] = await waitFor(async () => {
        const found = await events(intent.id, 'CASCADE_DETECTED');
        return found.length ? found : undefined;
      });
      expect(ledger.audit.lost).toBe(true);
      // HIGH does not halt: the intent waits at the human-only cascade gate, and goes on once approved.
      await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'cascade' ? true : undefined), 120_000, 'the cascade gate');
      expect(h.agentCalls()).toBe(1);
      await handle.signal(decideSignal, { gate: 'cascade', decision: 'approve', by: 'tester' });
      await waitFor(async () => (h.agentCalls() >= 2 ? true : undefined), 120_000, 'the intent to go on');
      await cancel(handle);
      expect(await events(intent.id, 'CASCADE_DETECTED')).toHaveLength(1);
      expect(event).toMatchObject({ severity: 'high', suggestion: expect.stringContaining('A human must decide the next gate') });
      const meta = event!.metadata as { workflowId: string; runId: string; activityId: string; attempt: number; level: string };
      expect(meta.level).toBe('HIGH');
      expect(event!.id).toBe(safetyEventId(meta, 'CASCADE_DETECTED'));
    });
  });

  test('three categories: CASCADE_DETECTED critical, and the intent halts with SAFETY_HALT', async () => {
    expect(detectCascade(CRITICAL).level).toBe('CRITICAL');
    await withWorker({}, async (h) => {
      const intent = intentFor(script({ model: 'cascade-critical', triage: { output: CRITICAL } }));
      const handle = await startIntent(world().client, intent, h.queue);
      expect(await failureOf(handle)).toContain('SAFETY_HALT');
      expect(h.agentCalls()).toBe(1);
      const found = await events(intent.id, 'CASCADE_DETECTED');
      expect(found).toEqual([expect.objectContaining({ severity: 'critical' })]);
      const runs = await world().ledger.activityRuns.ofWorkflow(`intent-${intent.id}`);
      // The halted call was paid for: its spend is in the audit.
      expect(runs.find((r) => r.activityType === 'runAgentStage')).toMatchObject({ outcome: 'failed', failureType: 'SAFETY_HALT', spendUsd: '0.004000' });
    });
  });
});

test("every safety event written by the worker's interceptor is one row per decision", async () => {
  await expectOneRowPerDecision();
});
