import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import { startIntent } from '../../src/client/intents';
import { revertIntentInput } from '../../src/client/revert-intent';
import { loadRuntimeConfig } from '../../src/runtime/config';
import { decideUpdate, stateQuery } from '../../src/shared/messages';
import { git, startSampleIntent, TEST_CONFIG, useTestWorld, waitFor } from '../helpers/env';

/**
 * `warden revert`: a merged intent undone on its base branch by an intent of its own: the revert
 * commit, the tests, the merge gate and the ledger; refused before it starts when there is
 * nothing to revert, and failed, saying where, when later commits conflict.
 */

const world = useTestWorld('revert');

async function mergedSample() {
  const started = await startSampleIntent(world(), 'rv');
  await waitFor(async () => ((await started.handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
  await started.handle.executeUpdate(decideUpdate, { args: [{ gate: 'merge', decision: 'approve', by: 'ana' }] });
  const outcome = await started.handle.result();
  expect(outcome.status).toBe('merged');
  return { ...started, mergedCommit: outcome.mergedCommit! };
}

const runtime = () => ({ ...loadRuntimeConfig({ DATABASE_URL: world().databaseUrl }), databaseUrl: world().databaseUrl });

test('a merged intent is reverted through the merge gate: the revert commit, its tests, a person, and the ledger', async () => {
  const { id, repo, before } = await mergedSample();
  const input = await revertIntentInput(runtime(), TEST_CONFIG, id, { reason: 'slugify broke the URLs', embeddedServer: true });
  expect(input).toMatchObject({ id: `revert-${id}`, goal: expect.stringMatching(new RegExp(`^Revert intent ${id} \\(merged as [0-9a-f]{12}\\): slugify broke the URLs$`)), baseBranch: 'main' });
  const handle = await startIntent(world().client, { ...input, limits: { ...input.limits, cooldown: '0s' } }, world().taskQueue);
  const waiting = await waitFor(async () => {
    const s = await handle.query(stateQuery);
    return s.pendingGate?.gate === 'merge' ? s : undefined;
  }, 120_000, 'the revert at the merge gate');
  expect(waiting.pendingGate?.whyNotAutomatic).toBeDefined();
  // The sample repo's test already describes slugify: without it the tests fail, and the person is told so.
  // Two files change back: slugify's lib/strings.js and the test the spec planned, lib/strings.test.js.
  expect(waiting.pendingGate!.prompt).toMatch(new RegExp(`^Revert intent ${id} \\(merged as [0-9a-f]{12}\\) on main\\? 2 file\\(s\\) change back; tests failed: exit 1 \\(1 failed, 1 passed\\)\\.$`));
  await handle.executeUpdate(decideUpdate, { args: [{ gate: 'merge', decision: 'approve', by: 'ana' }] });
  expect((await handle.result()).status).toBe('merged');
  // main's tree is what it was before the intent merged.
  expect(git(repo, 'diff', '--stat', before, 'main', '--', 'lib')).toBe('');
  expect(git(repo, 'log', '--format=%s', 'main')).toContain(`warden(revert-${id}): Revert intent ${id}`);
  expect(git(repo, 'log', '--format=%s', `refs/warden/lineage/revert-${id}`)).toContain(`Revert "warden: merge intent ${id}"`);
  const { rows } = await world().pool.query("SELECT event_type FROM safety_events WHERE intent_id = $1 AND event_type IN ('TESTS_PASSED', 'TESTS_FAILED', 'GATE_DECIDED', 'INTENT_MERGED') ORDER BY timestamp", [input.id]);
  expect(rows.map((r: { event_type: string }) => r.event_type)).toEqual(['TESTS_FAILED', 'GATE_DECIDED', 'INTENT_MERGED']);
});

test('later commits that changed the same lines make the revert fail, saying where; an intent that never merged is refused', async () => {
  const { id, repo } = await mergedSample();
  writeFileSync(path.join(repo, 'lib/strings.js'), "'use strict';\nmodule.exports = {};\n");
  // Named here: the machine may have no git identity of its own (a fresh home has none).
  git(repo, '-c', 'user.name=Someone', '-c', 'user.email=someone@localhost', 'commit', '-qam', 'rewrite strings');
  const input = await revertIntentInput(runtime(), TEST_CONFIG, id, { embeddedServer: true });
  const handle = await startIntent(world().client, input, world().taskQueue);
  const error = await handle.result().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(WorkflowFailedError);
  let cause: Error | undefined = error as Error;
  while (cause?.cause instanceof Error) cause = cause.cause;
  expect(String(cause?.message)).toContain(`later commits on main changed what ${id} changed (conflicts in lib/strings.js)`);
  expect(git(repo, 'show', 'main:lib/strings.js')).toBe("'use strict';\nmodule.exports = {};");

  await expect(revertIntentInput(runtime(), TEST_CONFIG, 'never-ran', { embeddedServer: true })).rejects.toThrow('intent never-ran has not merged (the ledger has no merge of it): there is nothing to revert');
});
