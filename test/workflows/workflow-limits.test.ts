import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import type { IntentInput } from '../../src/shared/intent';
import { decideSignal, pauseSignal, stateQuery } from '../../src/shared/messages';
import type { IntentState } from '../../src/shared/state';
import { demoScript, demoStages, git, startSampleIntent, useTestWorld, waitFor, worktreeFoldersLeft } from '../helpers/env';

/**
 * The limits the workflow enforces itself, through a real workflow with the scripted agent: time
 * per stage, the completeness gate's cap, test runs whose counts cannot be read, the blast radius
 * before any work and after every attempt, and a suggestion on every trip and halt.
 */

const world = useTestWorld('workflow-limits');
const demo = demoStages();
const GOOD_IMPL = demo.impl![1]!;
const BAD_IMPL = demo.impl![0]!;
/** An LLD that names a file that does not exist and one outside the declared paths: refused every time. */
const PHANTOM_LLD = { output: '# Design\n\n## Files\n- lib/strngs.js: add slugify\n- src/app.js: call it\n\n## Tests\n- test/strings.test.js\n' };
/** Leaves a stub behind; with `testCommand: 'true'` its tests still pass. */
const STUB_IMPL = {
  output: 'Done.',
  edits: [{ path: 'lib/strings.js', content: "'use strict';\nfunction capitalize(t) { return t; }\nfunction slugify(text) {\n  // TODO: implement\n  throw new Error('not implemented');\n}\nmodule.exports = { capitalize, slugify };\n" }],
};

function start(stages: Record<string, Array<Record<string, unknown>>>, overrides: Partial<IntentInput> = {}) {
  return startSampleIntent(world(), 'l', { agent: { kind: 'scripted', scriptPath: demoScript(stages) }, ...overrides });
}

function triageSaying(predicted: { files: number; lines: number }) {
  return { triage: [{ output: `Triage.\n\`\`\`json\n${JSON.stringify({ risk: 'LOW', confidence: 0.9, predicted })}\n\`\`\`\n` }] };
}

async function failure(handle: WorkflowHandle): Promise<string> {
  const error = await handle.result().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(WorkflowFailedError);
  return String((error as WorkflowFailedError).cause?.message);
}

type Event = { event_type: string; severity: string; reason: string; suggestion: string | null; stage: string | null };
async function events(id: string): Promise<Event[]> {
  return (await world().pool.query('SELECT event_type, severity, reason, suggestion, stage FROM safety_events WHERE intent_id = $1 ORDER BY seq, timestamp', [id])).rows;
}

async function until(handle: WorkflowHandle, test: (s: IntentState) => boolean, what: string): Promise<IntentState> {
  return waitFor(async () => {
    const s = await handle.query(stateQuery);
    return test(s) ? s : undefined;
  }, 60_000, what);
}

async function agentCalls(id: string): Promise<string[]> {
  return (await world().pool.query('SELECT stage FROM cost_events WHERE intent_id = $1 ORDER BY timestamp', [id])).rows.map((r: { stage: string }) => r.stage);
}

describe('stage time limits (workflow timers)', () => {
  test('a stage that runs past its limit is cancelled and halts the intent with TIME_LIMIT_EXCEEDED, a reason and a suggestion', async () => {
    // The agent would answer in ten minutes, after the test's own timeout: only the limit can end it.
    const { handle, repo, id, before } = await start({ triage: [{ output: 'slow', delayMs: 600_000 }] }, { limits: { stageTimeLimits: { triage: '3s' } } });
    expect(await failure(handle)).toBe('TIME_LIMIT_EXCEEDED: stage triage has worked 3 s, its limit is 3 s');
    // Cancelled at the limit, in its first attempt: not retried.
    const history = await handle.fetchHistory();
    expect(history.events!.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runAgentStage')).toHaveLength(1);
    expect(history.events!.filter((e) => e.activityTaskStartedEventAttributes).map((e) => e.activityTaskStartedEventAttributes!.attempt)).toEqual([1, 1]);
    expect(history.events!.some((e) => e.activityTaskCancelRequestedEventAttributes)).toBe(true);
    const halt = (await events(id)).find((e) => e.event_type === 'TIME_LIMIT_EXCEEDED')!;
    expect(halt).toMatchObject({ severity: 'high', stage: 'triage', reason: 'stage triage has worked 3 s, its limit is 3 s' });
    expect(halt.suggestion).toMatch(/limits\.stageTimeLimits\.triage/);
    expect(git(repo, 'rev-parse', 'main')).toBe(before);
    expect(worktreeFoldersLeft(world().worktreeRoot).filter((f) => f.startsWith(id))).toEqual([]);
  });

  test("the limit covers all of a stage's attempts together, not each one", async () => {
    // each lld attempt takes 1 s, well within 6 s, and is refused by the document checks; the cap
    // of 10 attempts would take 10 s of answers alone: the stage's limit ends it first, however
    // slow the machine (a slow one only fits fewer attempts in the 6 s)
    const { handle, id } = await start({ lld: [{ ...PHANTOM_LLD, delayMs: 1000 }] }, { limits: { stageTimeLimits: { lld: '6s' }, attempts: { lld: 10 } } });
    expect(await failure(handle)).toMatch(/^TIME_LIMIT_EXCEEDED: stage lld has worked 6 s/);
    expect((await handle.query(stateQuery)).attempts.lld).toBeGreaterThanOrEqual(2);
    expect((await events(id)).filter((e) => e.event_type === 'MAX_ITERATIONS_EXCEEDED')).toEqual([]);
  });

  test("time waiting for a person at a gate counts against neither the stage's limit nor the total", async () => {
    // impl attempt 1 outgrows the prediction: the blast-radius gate opens inside impl. The limits
    // are far above what the work itself takes, even on a busy machine; the wait at the gate
    // lasts until, in wall-clock time, impl has run past its limit and the intent past its own.
    const IMPL_LIMIT_MS = 20_000;
    const TOTAL_LIMIT_MS = 45_000;
    const startedAt = Date.now();
    const { handle, id } = await start(triageSaying({ files: 1, lines: 2 }), { limits: { stageTimeLimits: { impl: `${IMPL_LIMIT_MS / 1000}s` }, totalTimeout: `${TOTAL_LIMIT_MS / 1000}s` } });
    const gate = await until(handle, (s) => s.pendingGate?.gate === 'blast-radius', 'the blast-radius gate');
    const gateOpenedAt = Date.parse(gate.pendingGate!.requestedAt);
    // Were time at a gate counted, both limits would have tripped by the end of this wait.
    await new Promise((r) => setTimeout(r, Math.max(startedAt + TOTAL_LIMIT_MS, gateOpenedAt + IMPL_LIMIT_MS) + 1_000 - Date.now()));
    for (let decided = 0; ; decided++) {
      const s = await until(handle, (x) => (x.pendingGate !== undefined && x.decisions.length === decided) || x.status === 'failed', 'the next gate');
      expect(s.error).toBeUndefined();
      if (s.pendingGate?.gate === 'merge') break;
      expect(s.pendingGate?.gate).toBe('blast-radius');
      await handle.signal(decideSignal, { gate: 'blast-radius', decision: 'approve', by: 'tester' });
    }
    await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
    expect((await handle.result()).status).toBe('merged');
    expect((await events(id)).map((e) => e.event_type)).not.toContain('TIME_LIMIT_EXCEEDED');
  }, 300_000);
});

describe('completeness gate cap', () => {
  test('three refusals halt the intent with MAX_ITERATIONS_EXCEEDED naming the completeness cap, before the impl cap', async () => {
    // the tests "pass" (exit 0, no counts printed): neither the two-strike rule nor the impl cap (5) may decide this
    const { handle, id, repo, before } = await start({ impl: [STUB_IMPL] }, { testCommand: 'true' });
    expect(await failure(handle)).toBe('MAX_ITERATIONS_EXCEEDED: completeness gate: 3 refusal(s) (stubs or test tampering) reached the cap of 3');
    expect((await handle.query(stateQuery)).attempts.impl).toBe(3);
    const all = await events(id);
    expect(all.map((e) => e.event_type)).not.toContain('STAGNATION_DETECTED');
    expect(all.filter((e) => e.event_type === 'STAGE_FAILED' && e.severity === 'medium').map((e) => e.reason.replace(/^.*\((.*)\)$/, '$1'))).toEqual([
      'completeness gate refusal 1 of 3',
      'completeness gate refusal 2 of 3',
      'completeness gate refusal 3 of 3',
    ]);
    expect(all.find((e) => e.event_type === 'MAX_ITERATIONS_EXCEEDED')!.suggestion).toMatch(/limits\.attempts\.completeness/);
    expect(git(repo, 'rev-parse', 'main')).toBe(before);
  });

  test('the cap comes from limits.attempts.completeness', async () => {
    const { handle } = await start({ impl: [STUB_IMPL] }, { testCommand: 'true', limits: { attempts: { completeness: 2 } } });
    expect(await failure(handle)).toMatch(/^MAX_ITERATIONS_EXCEEDED: completeness gate: 2 refusal\(s\)/);
    expect((await handle.query(stateQuery)).attempts.impl).toBe(2);
  });
});

describe('the two-strike rule and test counts', () => {
  test('passing tests whose counts cannot be read are not "0 passed, 0 failed": no false STAGNATION_DETECTED', async () => {
    // with the completeness cap out of the way, only the impl cap may stop these attempts
    const { handle, id } = await start({ impl: [STUB_IMPL] }, { testCommand: 'true', limits: { attempts: { completeness: 5 } } });
    expect(await failure(handle)).toMatch(/^MAX_ITERATIONS_EXCEEDED: completeness gate: 5 refusal/);
    expect((await handle.query(stateQuery)).attempts.impl).toBe(5);
    expect((await events(id)).map((e) => e.event_type)).not.toContain('STAGNATION_DETECTED');
  });

  test('failing runs with no readable counts are unknown, not identical: the impl cap ends them', async () => {
    const { handle, id } = await start({ impl: [BAD_IMPL] }, { testCommand: 'exit 1', limits: { attempts: { impl: 3 } } });
    expect(await failure(handle)).toBe('MAX_ITERATIONS_EXCEEDED: stage impl: attempt 4 would exceed the cap of 3');
    expect((await events(id)).map((e) => e.event_type)).not.toContain('STAGNATION_DETECTED');
  });
});

describe('blast radius', () => {
  test('a triage prediction over the hard cap stops at the blast-radius gate before any work; reject halts it', async () => {
    const { handle, id, repo, before } = await start(triageSaying({ files: 30, lines: 100 }));
    const asked = await until(handle, (s) => s.pendingGate?.gate === 'blast-radius', 'the blast-radius gate');
    expect(asked.pendingGate!.prompt).toBe('Triage predicts 30 files / 100 lines, over the hard cap of 10 files / 2000 lines. Start the work anyway?');
    expect(asked.attempts).toEqual({ triage: 1 });
    await handle.signal(decideSignal, { gate: 'blast-radius', decision: 'reject', by: 'tester', reason: 'split it' });
    expect(await failure(handle)).toBe('stopped at the blast-radius gate: split it');
    expect(await agentCalls(id)).toEqual(['triage']);
    expect(git(repo, 'rev-parse', 'main')).toBe(before);
    const all = await events(id);
    expect(all.find((e) => e.event_type === 'ANOMALY_DETECTED')).toMatchObject({ reason: 'blast radius: predicted 30 files, over the hard cap of 10', stage: 'triage' });
    expect(all.find((e) => e.event_type === 'STAGE_FAILED')!.suggestion).toMatch(/split the intent/);
  });

  test('after a person approved a 1.5× overrun, the next attempt is still checked against the hard cap', async () => {
    // Each demo impl attempt writes lib/strings.js and the test the spec plans, lib/strings.test.js:
    // 2 files, at the cap; attempt 2 adds two more, over it.
    const extraFiles = ['lib/a.js', 'lib/b.js'].map((path) => ({ path, content: `'use strict';\nmodule.exports = { name: '${path}' };\n` }));
    const { handle, repo, before } = await start(
      { ...triageSaying({ files: 1, lines: 2 }), impl: [BAD_IMPL, { ...GOOD_IMPL, edits: [...(GOOD_IMPL.edits as object[]), ...extraFiles] }] },
      { limits: { blastRadius: { maxFiles: 2 } } },
    );
    const first = await until(handle, (s) => s.pendingGate?.gate === 'blast-radius', 'the first blast-radius gate');
    expect(first.pendingGate!.prompt).toMatch(/^The change is 2 files \/ \d+ lines; triage predicted 1 files \/ 2 lines\. Let it go on\?$/);
    await handle.signal(decideSignal, { gate: 'blast-radius', decision: 'approve', by: 'tester' });
    const second = await until(handle, (s) => s.pendingGate?.gate === 'blast-radius' && s.attempts.impl === 2, 'the blast-radius gate after impl attempt 2');
    expect(second.pendingGate!.prompt).toMatch(/^The change is 4 files \/ \d+ lines; triage predicted 1 files \/ 2 lines; 2 files \/ \d+ lines was approved before\. Let it go on\?$/);
    await handle.signal(decideSignal, { gate: 'blast-radius', decision: 'reject', by: 'tester', reason: 'too many files' });
    expect(await failure(handle)).toBe('stopped at the blast-radius gate: too many files');
    expect(git(repo, 'rev-parse', 'main')).toBe(before);
  });
});

describe('suggestions', () => {
  test('an activity failure is recorded with a suggestion that fits its kind, in STAGE_FAILED and INTENT_FAILED', async () => {
    const { handle, id } = await start({ triage: [{ output: '', fail: 'the agent crashed' }] });
    await failure(handle);
    const all = await events(id);
    expect(all.find((e) => e.event_type === 'STAGE_FAILED')).toMatchObject({ reason: 'the agent crashed', stage: 'triage' });
    for (const type of ['STAGE_FAILED', 'INTENT_FAILED']) {
      expect(all.find((e) => e.event_type === type)!.suggestion).toMatch(new RegExp(`run its command by hand.*warden resume ${id}`));
    }
  });

  test("the workflow's own halts say what to do too: a PROHIBITED triage", async () => {
    const { handle, id } = await start({ triage: [{ output: `No.\n\`\`\`json\n${JSON.stringify({ risk: 'PROHIBITED', confidence: 0.95, rationale: 'deletes production data' })}\n\`\`\`\n` }] });
    expect(await failure(handle)).toMatch(/^RISK_PROHIBITED/);
    const all = await events(id);
    for (const type of ['RISK_ASSESSED', 'STAGE_FAILED', 'INTENT_FAILED']) expect(all.find((e) => e.event_type === type)!.suggestion).toMatch(/does not carry out PROHIBITED work/);
  });

  test('every trip and every halt in this file was recorded with a reason and a suggestion', async () => {
    const { rows } = await world().pool.query<{ event_type: string; reason: string }>(
      "SELECT event_type, reason FROM safety_events WHERE severity IN ('high', 'critical') AND (suggestion IS NULL OR suggestion = '' OR reason = '')",
    );
    expect(rows).toEqual([]);
    const { rows: counted } = await world().pool.query<{ n: number }>("SELECT count(*)::int AS n FROM safety_events WHERE severity IN ('high', 'critical')");
    expect(counted[0]!.n).toBeGreaterThan(20);
  });
});

describe('a pause has a timeout and a policy, like a gate', () => {
  test('a pause not resumed within its timeout is escalated, then stops the intent (policy stop)', async () => {
    const { handle, id, repo, before } = await start({ triage: [{ ...demo.triage![0]!, delayMs: 1500 }] });
    await handle.signal(pauseSignal, { by: 'olga', reason: 'lunch', timeout: '2s' });
    expect(await failure(handle)).toMatch(/^TIME_LIMIT_EXCEEDED: paused by olga at .* and not resumed within 2s \(limits\.pauseTimeout; policy: stop\)$/);
    const escalated = (await events(id)).find((e) => e.event_type === 'GATE_ESCALATED')!;
    expect(escalated.reason).toMatch(/escalated to the intent owner; timeout policy: stop$/);
    expect(git(repo, 'rev-parse', 'main')).toBe(before);
  });

  test('with onPauseTimeout resume, the forgotten pause is escalated and the intent goes on', async () => {
    const { handle, id } = await start({}, { limits: { pauseTimeout: '2s', onPauseTimeout: 'resume' } });
    await handle.signal(pauseSignal, { by: 'olga' });
    await until(handle, (s) => s.pendingGate?.gate === 'merge', 'the merge gate');
    const overrides = (await events(id)).filter((e) => e.event_type === 'OVERRIDE' || e.event_type === 'GATE_ESCALATED').map((e) => `${e.event_type}: ${e.reason}`);
    expect(overrides).toEqual([
      'OVERRIDE: paused by olga (for at most 2s, then: resume)',
      expect.stringMatching(/^GATE_ESCALATED: paused by olga at .* and not resumed within 2s; escalated to the intent owner; timeout policy: resume$/),
      'OVERRIDE: resumed by warden (pause timeout)',
    ]);
    await handle.signal(decideSignal, { gate: 'merge', decision: 'reject', by: 'olga', reason: 'enough' });
    expect((await handle.result()).status).toBe('rejected');
  });
});
