import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import type { WardenWorker } from '../../src/workers/host-worker';
import { intentStatus } from '../../src/client/intent-status';
import type { WardenActivities } from '../../src/activities';
import { decideSignal, pauseSignal, resumeSignal, stateQuery } from '../../src/shared/messages';
import type { IntentState } from '../../src/shared/state';
import type { KillSwitchOptions } from '../../src/workers/interceptors/agent-safety';
import { createTestWorld, git, startSampleIntent, waitFor, type TestWorld } from '../helpers/env';
import { HeldAgentCalls } from '../helpers/held-agent-calls';
import { untilIdle } from '../helpers/workflow-idle';

/**
 * "Stopped means stopped", through real workflows: a pause holds every stage activity (tests,
 * archive, merge), not only agent calls, including a pause sent during a cooldown wait; a worker
 * with WARDEN_ENABLED=false, an EMERGENCY_STOP file, or the global stop flag starts no stage
 * activity, and nothing reaches the base branch. The final cleanup still runs.
 */

let world: TestWorld;

beforeAll(async () => {
  world = await createTestWorld('stop-holds');
});

afterAll(async () => {
  await world?.close();
});

/** A fresh emergency stop file path (not created): never the repo's own .warden/EMERGENCY_STOP. */
function stopFilePath(): string {
  return path.join(mkdtempSync(path.join(tmpdir(), 'warden-stop-')), 'EMERGENCY_STOP');
}

/** Runs a worker on the world's task queue for the length of `fn`; `wrap` may replace activities. */
async function withWorker<T>(killSwitch: KillSwitchOptions, fn: () => Promise<T>, wrap?: (activities: WardenActivities) => WardenActivities): Promise<T> {
  const worker: WardenWorker = await world.worker({ killSwitch, wrap });
  const running = worker.run();
  try {
    return await fn();
  } finally {
    worker.shutdown();
    await running;
  }
}

const enabled = (): KillSwitchOptions => ({ enabled: true, emergencyStopFile: stopFilePath() });

type Handle = WorkflowHandle;

async function until(handle: Handle, test: (s: IntentState) => boolean, what: string): Promise<IntentState> {
  return waitFor(async () => {
    const s = await handle.query(stateQuery);
    return test(s) ? s : undefined;
  }, 60_000, what);
}

/** The activity types the workflow has scheduled so far, in order. */
async function scheduled(handle: Handle): Promise<string[]> {
  const history = await handle.fetchHistory();
  return history.events!.flatMap((e) => (e.activityTaskScheduledEventAttributes ? [e.activityTaskScheduledEventAttributes.activityType!.name!] : []));
}

/** When each agent call (runAgentStage) was scheduled, in order: ms since the epoch, by Temporal's clock. */
async function agentCallTimes(handle: Handle): Promise<number[]> {
  const history = await handle.fetchHistory();
  return history.events!.flatMap((e) =>
    e.activityTaskScheduledEventAttributes?.activityType?.name === 'runAgentStage' ? [Number(e.eventTime!.seconds) * 1000 + Math.floor((e.eventTime!.nanos ?? 0) / 1e6)] : [],
  );
}

/** The failure chain's types and messages (workflow → activity → application failure). */
async function failureOf(handle: Handle): Promise<string[]> {
  const error = await handle.result().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(WorkflowFailedError);
  const chain: string[] = [];
  for (let e = error as { cause?: unknown; type?: string; message?: string } | undefined; e; e = e.cause as typeof e) chain.push(`${e.type ?? ''} ${e.message ?? ''}`.trim());
  return chain;
}

async function eventsOf(id: string, type: string): Promise<Array<{ reason: string; suggestion: string | null; metadata: Record<string, unknown> }>> {
  return (await world.pool.query('SELECT reason, suggestion, metadata FROM safety_events WHERE intent_id = $1 AND event_type = $2 ORDER BY timestamp', [id, type])).rows;
}

/**
 * `warden approve ID` as a person runs it, against this file's server and ledger. Asynchronous:
 * the worker runs in this process and must go on answering while the CLI waits for it.
 */
function wardenApprove(id: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const home = mkdtempSync(path.join(tmpdir(), 'warden-cli-home-'));
  const env: NodeJS.ProcessEnv = { ...process.env, WARDEN_HOME: home, DATABASE_URL: world.databaseUrl, WARDEN_LOG_LEVEL: 'warn', USER: 'operator' };
  delete env.WARDEN_CONFIG;
  const child = spawn(process.execPath, [path.resolve(__dirname, '../../bin/warden.js'), 'approve', id], { env, cwd: home });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('pause', () => {
  test('paused at the merge gate, then approved: nothing is archived or merged until resume; then it merges', async () => {
    await withWorker(enabled(), async () => {
      const { handle, repo, id, before } = await startSampleIntent(world, 'pm');
      await until(handle, (s) => s.pendingGate?.gate === 'merge', 'the merge gate');
      await handle.signal(pauseSignal, { by: 'operator', reason: 'hold the merge' });
      await until(handle, (s) => s.status === 'paused', 'paused');

      const approve = await wardenApprove(id);
      expect(approve.stderr).toBe('');
      expect(approve.code).toBe(0);
      expect(approve.stdout).toContain(`approved the merge gate of ${id}`);
      expect(approve.stdout).toContain(`${id} is paused (by operator: hold the merge): nothing runs and nothing is merged until warden resume-run ${id}`);

      const held = await until(handle, (s) => s.stage === 'merge', 'the merge stage to be entered');
      expect(held.decisions.map((d) => d.decision)).toContain('approve');
      // Without the hold, archive and merge would be scheduled before the workflow goes idle.
      await untilIdle(handle);
      const still = await handle.query(stateQuery);
      expect(still.status).toBe('paused');
      expect(still.mergedCommit).toBeUndefined();
      const types = await scheduled(handle);
      expect(types).not.toContain('archiveLineage');
      expect(types).not.toContain('mergeIntent');
      expect(git(repo, 'rev-parse', 'main')).toBe(before);

      await handle.signal(resumeSignal, { by: 'operator' });
      const outcome = await handle.result();
      expect(outcome.status).toBe('merged');
      expect(git(repo, 'rev-parse', 'main')).toBe(outcome.mergedCommit);
      expect(git(repo, 'log', '-1', '--format=%s', 'main')).toBe(`warden: merge intent ${id}`);
    });
  });

  test('a pause while impl runs holds the test run until resume', async () => {
    const held = new HeldAgentCalls();
    const releaseImpl = held.holdNext((input) => input.stage === 'impl' && input.attempt === 1);
    await withWorker(
      enabled(),
      async () => {
        const { handle, id } = await startSampleIntent(world, 'pt');
        await until(handle, (s) => s.attempts.impl === 1, 'impl to start');
        await handle.signal(pauseSignal, { by: 'operator' });
        await until(handle, (s) => s.status === 'paused', 'paused');
        releaseImpl();
        await waitFor(async () => ((await eventsOf(id, 'STAGE_COMPLETED')).length >= 4 ? true : undefined), 120_000, 'impl to finish');
        // Without the hold, the test run would be scheduled before the workflow goes idle.
        await untilIdle(handle);
        expect(await scheduled(handle)).not.toContain('runTests');
        expect((await handle.query(stateQuery)).tests).toEqual([]);
        await handle.signal(resumeSignal, { by: 'operator' });
        await until(handle, (s) => s.pendingGate?.gate === 'merge', 'the merge gate');
        expect((await scheduled(handle)).filter((t) => t === 'runTests')).toHaveLength(2); // impl fails once, then passes
        await handle.signal(decideSignal, { gate: 'merge', decision: 'reject', by: 'operator', reason: 'done' });
        await handle.result();
      },
      held.wrap,
    );
  });

  test('a pause sent during the cooldown wait holds the next dispatch; the wait shows in the state', async () => {
    // Far longer than impl attempt 1 and its test run take, even on a busy machine: the pause
    // below always comes during the wait.
    const COOLDOWN_MS = 30_000;
    await withWorker(enabled(), async () => {
      // impl attempt 1 fails its tests; attempt 2 waits out the cooldown since attempt 1
      const { handle, id } = await startSampleIntent(world, 'pc', { limits: { cooldown: `${COOLDOWN_MS / 1000}s` } });
      const cooling = await until(handle, (s) => s.cooldown !== undefined, 'the cooldown wait');
      expect(cooling.cooldown!.stage).toBe('impl');
      // warden status reads the wait from the workflow's memo, not from the worker
      expect((await intentStatus(world.client, world.ledger, id)).cooldown).toEqual(cooling.cooldown);

      await handle.signal(pauseSignal, { by: 'operator', reason: 'during the cooldown' });
      await until(handle, (s) => s.status === 'paused', 'paused');
      // The wait counts from impl attempt 1's dispatch: after spec's, by the time impl's was scheduled.
      const dispatched = await agentCallTimes(handle);
      const waitStartedAt = Date.parse(cooling.cooldown!.until) - COOLDOWN_MS;
      expect(waitStartedAt).toBeGreaterThan(dispatched[2]!);
      expect(waitStartedAt).toBeLessThanOrEqual(dispatched[3]!);

      // The cooldown ends while the intent is paused; whatever it does next by itself, it has done once idle.
      await until(handle, (s) => s.cooldown === undefined, 'the cooldown to be over');
      await untilIdle(handle);
      const held = await handle.query(stateQuery);
      expect(held.status).toBe('paused');
      expect(held.cooldown).toBeUndefined();
      const status = await intentStatus(world.client, world.ledger, id);
      expect(status).toMatchObject({ wardenStatus: 'paused', paused: { by: 'operator', reason: 'during the cooldown', at: held.paused!.at } });
      expect(status.cooldown).toBeUndefined();
      const agentCalls = (await scheduled(handle)).filter((t) => t === 'runAgentStage');
      expect(agentCalls).toHaveLength(4); // triage, lld, spec, impl #1: impl #2 was not dispatched
      const costs = await world.pool.query('SELECT stage FROM cost_events WHERE intent_id = $1', [id]);
      expect(costs.rows.filter((r: { stage: string }) => r.stage === 'impl')).toHaveLength(1);

      await handle.signal(resumeSignal, { by: 'operator' });
      await until(handle, (s) => s.pendingGate?.gate === 'merge', 'the merge gate');
      await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'operator' });
      expect((await handle.result()).status).toBe('merged');
    });
  });
});

describe('kill switches on stage activities', () => {
  test('the global stop flag set while the intent waits at the merge gate: approve says so, the intent halts, nothing is merged', async () => {
    await withWorker(enabled(), async () => {
      const { handle, repo, id, before } = await startSampleIntent(world, 'gs');
      await until(handle, (s) => s.pendingGate?.gate === 'merge', 'the merge gate');
      await world.ledger.globalStop.set('tester', 'incident drill');
      try {
        const approve = await wardenApprove(id);
        expect(approve.stderr).toBe('');
        expect(approve.code).toBe(0);
        expect(approve.stdout).toContain(`approved the merge gate of ${id}`);
        expect(approve.stdout).toContain('Warden is stopped (global stop set by tester: incident drill)');
        expect(approve.stdout).toContain(`${id} halts before its next stage and nothing is merged`);
        const chain = await failureOf(handle);
        expect(chain.join('\n')).toContain('KILL_SWITCH kill switch (global_stop): global stop set by tester: incident drill; rebaseOntoBase was not started');
      } finally {
        await world.ledger.globalStop.clear('tester', 'drill over');
      }
      expect(git(repo, 'rev-parse', 'main')).toBe(before);
      const types = await scheduled(handle);
      expect(types).not.toContain('mergeIntent');
      const [stopped, ...more] = await eventsOf(id, 'INTENT_STOPPED');
      expect(more).toEqual([]);
      expect(stopped).toMatchObject({ metadata: expect.objectContaining({ killSwitch: 'global_stop', activityType: 'rebaseOntoBase' }) });
      expect(stopped!.suggestion).toMatch(/warden unlock/);
      expect(await eventsOf(id, 'INTENT_FAILED')).toHaveLength(1);
      // The non-cancellable cleanup still ran: no worktree is left; the decision is on record.
      expect(git(repo, 'worktree', 'list').split('\n')).toHaveLength(1);
      const decisions = await world.pool.query('SELECT decision FROM gate_decisions WHERE intent_id = $1 AND gate = $2', [id, 'merge']);
      expect(decisions.rows.map((r: { decision: string }) => r.decision)).toEqual(['approve']);
    });
  });

  test('WARDEN_ENABLED=false on the worker that picks the intent up at the merge gate: approved, but never merged', async () => {
    const started = await withWorker(enabled(), async () => {
      const intent = await startSampleIntent(world, 'we');
      await until(intent.handle, (s) => s.pendingGate?.gate === 'merge' && s.pendingGate.package !== undefined, 'the merge gate and its package');
      return intent;
    });
    const { handle, repo, id, before } = started;
    // The only worker now is one started with WARDEN_ENABLED=false.
    await withWorker({ enabled: false, emergencyStopFile: stopFilePath() }, async () => {
      await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'operator' });
      const chain = await failureOf(handle);
      expect(chain.join('\n')).toContain('KILL_SWITCH kill switch (WARDEN_ENABLED): Warden is disabled on this worker (WARDEN_ENABLED=false); rebaseOntoBase was not started');
    });
    expect(git(repo, 'rev-parse', 'main')).toBe(before);
    expect(await scheduled(handle)).not.toContain('mergeIntent');
    expect(await eventsOf(id, 'INTENT_STOPPED')).toEqual([expect.objectContaining({ metadata: expect.objectContaining({ killSwitch: 'WARDEN_ENABLED', activityType: 'rebaseOntoBase' }) })]);
    expect(git(repo, 'worktree', 'list').split('\n')).toHaveLength(1);
  });

  test('WARDEN_ENABLED=false from the start: not even the worktree is made; the cleanup still runs', async () => {
    await withWorker({ enabled: false, emergencyStopFile: stopFilePath() }, async () => {
      const { handle, repo, id, before } = await startSampleIntent(world, 'wd');
      expect((await failureOf(handle)).join('\n')).toContain('prepareWorktree was not started');
      expect(await scheduled(handle)).toEqual(['prepareWorktree']);
      expect(git(repo, 'branch', '--list', 'warden/*')).toBe('');
      expect(git(repo, 'rev-parse', 'main')).toBe(before);
      const ended = await world.pool.query("SELECT event_type FROM safety_events WHERE intent_id = $1 AND event_type IN ('INTENT_STOPPED', 'INTENT_FAILED') ORDER BY event_type", [id]);
      expect(ended.rows.map((r: { event_type: string }) => r.event_type)).toEqual(['INTENT_FAILED', 'INTENT_STOPPED']);
    });
  });

  test('an EMERGENCY_STOP file that appears while impl runs: the repo\'s tests are never run', async () => {
    const stopFile = stopFilePath();
    // The file appears inside impl's agent call, past that call's own kill-switch check.
    const stopDuringImpl = (activities: WardenActivities): WardenActivities => ({
      ...activities,
      async runAgentStage(input) {
        const result = await activities.runAgentStage(input);
        if (input.stage === 'impl') writeFileSync(stopFile, 'incident 7\n');
        return result;
      },
    });
    await withWorker(
      { enabled: true, emergencyStopFile: stopFile },
      async () => {
        const { handle, repo, id, before } = await startSampleIntent(world, 'ef');
        expect((await failureOf(handle)).join('\n')).toContain(`kill switch (EMERGENCY_STOP): the emergency stop file ${stopFile} exists; runTests was not started`);
        expect(await scheduled(handle)).toEqual(['prepareWorktree', 'runAgentStage', 'runAgentStage', 'runAgentStage', 'runAgentStage', 'runTests']);
        expect((await handle.query(stateQuery)).tests).toEqual([]);
        expect(await eventsOf(id, 'INTENT_STOPPED')).toEqual([expect.objectContaining({ metadata: expect.objectContaining({ killSwitch: 'EMERGENCY_STOP', activityType: 'runTests' }) })]);
        expect(git(repo, 'rev-parse', 'main')).toBe(before);
        expect(git(repo, 'worktree', 'list').split('\n')).toHaveLength(1);
      },
      stopDuringImpl,
    );
  });
});
