import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { decideUpdate, stateQuery } from '../../src/shared/messages';
import type { IntentState } from '../../src/shared/state';
import { git, startSampleIntent, useTestWorld, waitFor } from '../helpers/env';

/**
 * What a person can answer at a gate beyond yes and no: request changes (the stage before the
 * gate runs again with their comments, within its attempts), approve their own edit of a design
 * document (the next stage reads it, the ledger keeps both), and conditions at the gates before
 * merge, which are checks that block the merge until they hold.
 */

const world = useTestWorld('gate-answers');

async function atGate(handle: WorkflowHandle, gate: string, after = 0): Promise<IntentState> {
  return waitFor(async () => {
    const s = await handle.query(stateQuery);
    return s.pendingGate?.gate === gate && s.decisions.length >= after ? s : undefined;
  }, 120_000, `the ${gate} gate`);
}

const decide = (handle: WorkflowHandle, decision: Record<string, unknown>) => handle.executeUpdate(decideUpdate, { args: [{ by: 'rita', ...decision }] });

async function events(id: string, type: string): Promise<Array<{ reason: string; metadata: Record<string, unknown>; severity: string }>> {
  const { rows } = await world().pool.query('SELECT reason, metadata, severity FROM safety_events WHERE intent_id = $1 AND event_type = $2 ORDER BY recorded_at', [id, type]);
  return rows;
}

test('request changes at the merge gate: impl and review run again with the comments, then the gate asks again', async () => {
  const { handle, id, repo } = await startSampleIntent(world(), 'ga');
  const first = await atGate(handle, 'merge');
  const implBefore = first.attempts.impl!;
  expect(await decide(handle, { gate: 'merge', decision: 'request-changes', reason: 'Also document slugify in a JSDoc comment.' })).toEqual({ accepted: true });
  const second = await atGate(handle, 'merge', first.decisions.length + 1);
  expect(second.attempts.impl).toBe(implBefore + 1);
  expect(second.attempts.review).toBe((first.attempts.review ?? 0) + 1);
  const prompt = git(repo, 'show', `warden/${id}:docs/lineage/active/${id}/04-impl-attempt-${implBefore + 1}.prompt.md`);
  expect(prompt).toContain('At the merge gate, rita asked for changes');
  expect(prompt).toContain('Also document slugify in a JSDoc comment.');
  expect(await decide(handle, { gate: 'merge', decision: 'approve' })).toEqual({ accepted: true });
  expect((await handle.result()).status).toBe('merged');
  const { rows } = await world().pool.query("SELECT decision FROM gate_decisions WHERE intent_id = $1 AND gate = 'merge' ORDER BY decided_at", [id]);
  expect(rows.map((r: { decision: string }) => r.decision)).toEqual(['request-changes', 'approve']);
});

test('edit then approve at the lld gate: the next stage reads the edited design, the ledger keeps both versions', async () => {
  const { handle, id, repo } = await startSampleIntent(world(), 'ga', { gates: { lld: { minRisk: 'LOW' } } });
  const waiting = await atGate(handle, 'lld');
  expect(waiting.pendingGate).toMatchObject({ changes: true, editable: expect.stringMatching(/02-lld\.md$/) });
  const original = git(repo, 'show', `warden/${id}:${waiting.pendingGate!.editable!}`);
  const edited = `${original.trimEnd()}\n\n## Approver's note\nslugify must also fold accents (é → e).\n`;
  expect(await decide(handle, { gate: 'lld', decision: 'approve-with-edits', document: edited })).toEqual({ accepted: true });
  await atGate(handle, 'merge');
  expect(git(repo, 'show', `warden/${id}:${waiting.pendingGate!.editable!}`)).toBe(edited.trimEnd());
  const specPrompt = git(repo, 'show', `warden/${id}:docs/lineage/active/${id}/03-spec.prompt.md`);
  expect(specPrompt).toContain('slugify must also fold accents');
  const [edit] = await events(id, 'DOCUMENT_EDITED');
  expect(edit!.metadata).toMatchObject({ by: 'rita', original: `${original}\n`, edited });
  expect(edit!.metadata.originalSha256).not.toBe(edit!.metadata.editedSha256);
  await decide(handle, { gate: 'merge', decision: 'reject', reason: 'enough for the test' });
  expect((await handle.result()).status).toBe('rejected');
});

test('request changes at the spec gate runs spec again with the comments; approve-with-edits is refused where there is no document', async () => {
  const { handle, id, repo } = await startSampleIntent(world(), 'ga', { gates: { spec: { minRisk: 'LOW' } } });
  const first = await atGate(handle, 'spec');
  expect(await decide(handle, { gate: 'spec', decision: 'request-changes', reason: 'Add a row for an empty string.' })).toEqual({ accepted: true });
  await atGate(handle, 'spec', first.decisions.length + 1);
  expect(git(repo, 'show', `warden/${id}:docs/lineage/active/${id}/03-spec-attempt-2.prompt.md`)).toContain('Add a row for an empty string.');
  await decide(handle, { gate: 'spec', decision: 'approve' });
  await atGate(handle, 'merge');
  expect(await decide(handle, { gate: 'merge', decision: 'approve-with-edits', document: 'mine' })).toEqual({
    accepted: false,
    reason: 'the merge gate has no document to edit: only the lld and spec gates take approve-with-edits',
  });
  await handle.cancel();
});

test('conditions at the merge gate are checks: a free-text one is refused, a met one lets it merge', async () => {
  const { handle, id } = await startSampleIntent(world(), 'ga');
  await atGate(handle, 'merge');
  const refused = await decide(handle, { gate: 'merge', decision: 'approve-with-conditions', conditions: ['keep the public API'] });
  expect(refused).toEqual({ accepted: false, reason: expect.stringContaining('a condition at the merge gate is a check run before the merge') });
  expect(await decide(handle, { gate: 'merge', decision: 'approve-with-conditions', conditions: ['max-files: 3', 'only-paths: lib/**', 'run: grep -q slugify lib/strings.js'] })).toEqual({ accepted: true });
  expect((await handle.result()).status).toBe('merged');
  const [checked] = await events(id, 'MERGE_CONDITIONS_CHECKED');
  expect(checked).toMatchObject({ severity: 'info', metadata: { results: [{ met: true }, { met: true }, { met: true }] } });
});

test('a merge condition whose command reaches for the control plane is a row; a person approved, so it merges', async () => {
  const { handle, id } = await startSampleIntent(world(), 'ga');
  await atGate(handle, 'merge');
  const reach = `run: node -e "require('net').connect(7233, '127.0.0.1').on('error', () => {})"`;
  expect(await decide(handle, { gate: 'merge', decision: 'approve-with-conditions', conditions: [reach] })).toEqual({ accepted: true });
  expect((await handle.result()).status).toBe('merged');
  const escapes = await events(id, 'ESCAPE_ATTEMPTED');
  expect(escapes).toEqual([expect.objectContaining({ severity: 'high', reason: expect.stringMatching(/^the merge conditions: connected to port 7233/), metadata: expect.objectContaining({ kind: 'connect', port: 7233 }) })]);
});

test('an unmet merge condition blocks the merge: impl runs again with it, and the gate asks again', async () => {
  const { handle, id, repo, before } = await startSampleIntent(world(), 'ga');
  const first = await atGate(handle, 'merge');
  await decide(handle, { gate: 'merge', decision: 'approve-with-conditions', conditions: ['run: test -f lib/CHANGELOG.md'] });
  await atGate(handle, 'merge', first.decisions.length + 1);
  const [checked] = await events(id, 'MERGE_CONDITIONS_CHECKED');
  expect(checked).toMatchObject({ severity: 'medium', reason: expect.stringContaining('NOT MET: run: test -f lib/CHANGELOG.md') });
  const implAttempt = (await handle.query(stateQuery)).attempts.impl!;
  expect(git(repo, 'show', `warden/${id}:docs/lineage/active/${id}/04-impl-attempt-${implAttempt}.prompt.md`)).toContain('The merge is blocked');
  expect(git(repo, 'rev-parse', 'main')).toBe(before);
  await decide(handle, { gate: 'merge', decision: 'reject', reason: 'no changelog' });
  expect((await handle.result()).status).toBe('rejected');
});

/** Commits `content` as `file` on main of `repo` (a person's push while the intent waited). */
function pushToMain(repo: string, file: string, content: string): string {
  writeFileSync(path.join(repo, file), content);
  git(repo, 'add', file);
  git(repo, '-c', 'user.name=pat', '-c', 'user.email=pat@example.com', 'commit', '-q', '-m', `pat: ${file}`);
  return git(repo, 'rev-parse', 'HEAD');
}

const STRINGS = (line5: string, exports = 'module.exports = { capitalize };') =>
  ["'use strict';", '', '/** Upper-cases the first letter. */', 'function capitalize(text) {', line5, '}', '', exports, ''].join('\n');

describe('the base branch moved while the intent waited', () => {
  test('an unrelated push: the branch is rebased, tested again, still the change approved, and merges', async () => {
    const { handle, id, repo } = await startSampleIntent(world(), 'gb');
    await atGate(handle, 'merge');
    const pushed = pushToMain(repo, 'NOTES.md', 'notes\n');
    await decide(handle, { gate: 'merge', decision: 'approve' });
    const outcome = await handle.result();
    expect(outcome.status).toBe('merged');
    expect(git(repo, 'merge-base', '--is-ancestor', pushed, 'main')).toBe('');
    expect(git(repo, 'show', 'main:lib/strings.js')).toContain('function slugify');
    const [moved] = await events(id, 'BASE_MOVED');
    expect(moved).toMatchObject({ severity: 'info', reason: expect.stringMatching(/rebased onto it, tests passed .*; the change is the one approved: it merges$/) });
    expect((await handle.query(stateQuery)).decisions.filter((d) => d.gate === 'merge')).toHaveLength(1);
  });

  test('a push next to the change: it rebases cleanly but is no longer the change approved, so the gate asks again', async () => {
    const { handle, id, repo } = await startSampleIntent(world(), 'gb');
    const first = await atGate(handle, 'merge');
    pushToMain(repo, 'lib/strings.js', STRINGS('  return text.charAt(0).toUpperCase() + text.slice(1); // first letter only'));
    await decide(handle, { gate: 'merge', decision: 'approve' });
    await atGate(handle, 'merge', first.decisions.length + 1);
    const [moved] = await events(id, 'BASE_MOVED');
    expect(moved).toMatchObject({ severity: 'medium', reason: expect.stringContaining('the change is no longer the one approved: the gates ask again') });
    expect((await handle.query(stateQuery)).attempts.impl).toBe(first.attempts.impl);
    await decide(handle, { gate: 'merge', decision: 'approve' });
    expect((await handle.result()).status).toBe('merged');
    expect(git(repo, 'show', 'main:lib/strings.js')).toContain('// first letter only');
  });

  test('a conflicting push: impl makes the change again on top of it, then review and the gate', async () => {
    const { handle, id, repo } = await startSampleIntent(world(), 'gb');
    const first = await atGate(handle, 'merge');
    const pushed = pushToMain(repo, 'lib/strings.js', STRINGS('  return text.charAt(0).toUpperCase() + text.slice(1);', 'module.exports = { capitalize: capitalize };'));
    await decide(handle, { gate: 'merge', decision: 'approve' });
    const second = await atGate(handle, 'merge', first.decisions.length + 1);
    expect(second.attempts.impl).toBe(first.attempts.impl! + 1);
    const [moved] = await events(id, 'BASE_MOVED');
    expect(moved).toMatchObject({ severity: 'medium', reason: expect.stringContaining('conflicts in lib/strings.js') });
    const prompt = git(repo, 'show', `warden/${id}:docs/lineage/active/${id}/04-impl-attempt-${second.attempts.impl}.prompt.md`);
    expect(prompt).toContain('no longer applied to it (conflicts in lib/strings.js)');
    // The branch now starts from the push, its lineage kept.
    expect(git(repo, 'merge-base', '--is-ancestor', pushed, `warden/${id}`)).toBe('');
    expect(git(repo, 'show', `warden/${id}:docs/lineage/active/${id}/01-triage.md`)).toContain('Triage');
    await decide(handle, { gate: 'merge', decision: 'approve' });
    expect((await handle.result()).status).toBe('merged');
  });
});
