import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import type { Payload } from '@temporalio/common';
import { intentFromFlags } from '../../src/client/intent-input';
import { startIntent } from '../../src/client/intents';
import { resolveConfig } from '../../src/config/load';
import { workflowIdForIntent } from '../../src/shared/ids';
import { IntentSchema, type Intent } from '../../src/shared/intent';
import { decideUpdate, stateQuery } from '../../src/shared/messages';
import { payloadConverter } from '../../src/workflows/payload-converter';
import { demoScript, git, makeSampleRepo, useTestWorld, waitFor } from '../helpers/env';

/**
 * Every start obeys the worker's config: an intent started with the bare Temporal client (the
 * Web UI's Start Workflow sends the same) gets the config's approvers and budget; one asking for
 * more than the config allows is refused; `warden run`'s intents run as they were started.
 */

const config = resolveConfig({
  limits: { cooldown: '0s', budgetUsd: '3' },
  gates: { merge: { approvers: ['alice'] } },
  // Unsigned decisions count here, so that the test decides as alice without a key.
  unsignedDecisions: { accept: 'always' },
});
const world = useTestWorld('start-obeys-config', { intentRules: { config, embeddedServer: false } });

/** Starts the workflow as a bare client does: the input as given, nothing filled in. */
async function startRaw(input: Record<string, unknown> & { id: string }): Promise<WorkflowHandle> {
  return world().client.workflow.start('intentWorkflow', { taskQueue: world().taskQueue, workflowId: workflowIdForIntent(input.id), args: [input] });
}

/** The intent the worker's check returned, as the history recorded it (the workflow runs this one). */
async function recordedIntent(handle: WorkflowHandle): Promise<Intent> {
  const history = await handle.fetchHistory();
  const marker = history.events!.find((e) => e.markerRecordedEventAttributes)?.markerRecordedEventAttributes;
  const result = marker?.details?.result?.payloads?.[0];
  if (!result) throw new Error('no local activity result in the history');
  return payloadConverter.fromPayload<Intent>(result as Payload);
}

async function atMergeGate(handle: WorkflowHandle): Promise<void> {
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
}

test("a bare client's intent gets the config's approvers and budget", async () => {
  const repo = makeSampleRepo();
  const id = `raw-${Date.now()}`;
  const handle = await startRaw({ id, goal: 'Add slugify', repoPath: repo, paths: ['lib/**'], agent: { kind: 'scripted', scriptPath: demoScript() } });
  await atMergeGate(handle);
  const intent = await recordedIntent(handle);
  expect(intent.limits).toEqual(config.limits);
  expect(intent.limits.budgetUsd).toBe('3');
  expect(intent.gates.merge?.approvers).toEqual(['alice']);
  // The gate takes only the config's approvers.
  expect(await handle.executeUpdate(decideUpdate, { args: [{ gate: 'merge', decision: 'approve', by: 'bob' }] })).toEqual({
    accepted: false,
    reason: 'bob may not decide the merge gate (approvers: alice)',
  });
  expect(await handle.executeUpdate(decideUpdate, { args: [{ gate: 'merge', decision: 'approve', by: 'alice' }] })).toEqual({ accepted: true });
  expect(((await handle.result()) as { status: string }).status).toBe('merged');
});

test('a start asking for more than the config allows is refused before it touches anything, with a ledger row', async () => {
  const repo = makeSampleRepo();
  const id = `greedy-${Date.now()}`;
  const handle = await startRaw({
    id,
    goal: 'Add slugify',
    repoPath: repo,
    agent: { kind: 'scripted', scriptPath: demoScript() },
    limits: { budgetUsd: '50' },
    gates: { merge: { approvers: ['mallory'] } },
  });
  const error = await handle.result().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(WorkflowFailedError);
  const cause = (error as WorkflowFailedError).cause as Error & { type?: string; nonRetryable?: boolean };
  expect(cause.type).toBe('INVALID_INTENT');
  expect(cause.nonRetryable).toBe(true);
  const why = `invalid intent: the worker's config forbids it: limits.budgetUsd "50" is above the config's "3"; gates.merge.approvers [mallory] are not the config's [alice]`;
  expect(cause.message).toBe(why);
  const { rows } = await world().pool.query("SELECT reason, severity FROM safety_events WHERE intent_id = $1 AND event_type = 'INTENT_REFUSED'", [id]);
  expect(rows).toEqual([{ reason: why, severity: 'high' }]);
  expect(git(repo, 'branch', '--list', `warden/${id}`)).toBe('');
});

test("startIntent sends what its caller left out as left out: the worker fills it from the config, not the schema's defaults", async () => {
  const repo = makeSampleRepo();
  const id = `client-${Date.now()}`;
  // No limits, gates or approvals: the schema's default budget (5) is above this config's (3).
  const handle = await startIntent(world().client, { id, goal: 'Add slugify', repoPath: repo, paths: ['lib/**'], agent: { kind: 'scripted', scriptPath: demoScript() } }, world().taskQueue);
  await atMergeGate(handle);
  const intent = await recordedIntent(handle);
  expect(intent.limits).toEqual(config.limits);
  expect(intent.gates.merge?.approvers).toEqual(['alice']);
  await handle.executeUpdate(decideUpdate, { args: [{ gate: 'merge', decision: 'reject', by: 'alice', reason: 'seen enough' }] });
  expect((await handle.result()).status).toBe('rejected');
});

test("warden run's intent runs exactly as it was started", async () => {
  const repo = makeSampleRepo();
  const input = intentFromFlags({ repo, goal: 'Add slugify', script: demoScript(), paths: ['lib/**'], budget: '2' }, process.cwd(), { ...config, embeddedServer: false });
  const handle = await startIntent(world().client, input, world().taskQueue);
  await atMergeGate(handle);
  expect(await recordedIntent(handle)).toEqual(IntentSchema.parse(input));
  expect((await recordedIntent(handle)).limits.budgetUsd).toBe('2');
  await handle.executeUpdate(decideUpdate, { args: [{ gate: 'merge', decision: 'reject', by: 'alice', reason: 'seen enough' }] });
  expect((await handle.result()).status).toBe('rejected');
});
