import type { IntentInput } from '../../src/shared/intent';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { demoScript, demoStages, git, startSampleIntent, useTestWorld, waitFor } from '../helpers/env';

/** The LLD and the spec pass their mechanical checks before anything is built on them. */

const world = useTestWorld('design-checks');
const demo = demoStages();

function start(script: Record<string, Array<Record<string, unknown>>>, extra: Partial<IntentInput> = {}) {
  return startSampleIntent(world(), 'd', { paths: ['lib/**', 'test/**'], agent: { kind: 'scripted', scriptPath: demoScript(script) }, ...extra });
}

async function failures(id: string): Promise<string[]> {
  const { rows } = await world().pool.query("SELECT reason FROM safety_events WHERE intent_id = $1 AND event_type = 'STAGE_FAILED' ORDER BY timestamp", [id]);
  return rows.map((r: { reason: string }) => r.reason);
}

test('an LLD naming a phantom file goes back with the error; the fixed one goes on', async () => {
  const phantom = { output: '# Design\n\n## Files\n- lib/strngs.js: add slugify\n- src/app.js: call it\n\n## Tests\n- test/strings.test.js\n' };
  const { handle, repo, id } = await start({ lld: [phantom, demo.lld![0]!] });
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
  const state = await handle.query(stateQuery);
  expect(state.attempts.lld).toBe(2);
  expect(await failures(id)).toEqual([
    'lld attempt 1: the document failed its mechanical checks: lib/strngs.js does not exist: mark it "(new)" if the change creates it, or name the right file; src/app.js is outside the declared paths (lib/**, test/**)',
  ]);
  const prompt = git(repo, 'show', `warden/${id}:docs/lineage/active/${id}/02-lld-attempt-2.prompt.md`);
  expect(prompt).toMatch(/refused by the mechanical checks[\s\S]*- lib\/strngs\.js does not exist/);
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');
});

test('a spec that never maps its requirements to tests halts at the attempt cap, before impl', async () => {
  const vague = { output: '# Test specification\n\nWe will test slugify thoroughly.\n' };
  const { handle, repo, id } = await start({ spec: [vague] }, { limits: { attempts: { spec: 2 } } });
  const before = git(repo, 'rev-parse', 'main');
  await expect(handle.result()).rejects.toThrow();
  const state = await handle.query(stateQuery);
  expect(state.attempts).toEqual({ triage: 1, lld: 1, spec: 3 }); // the third was refused by the cap
  const { rows } = await world().pool.query('SELECT stage FROM cost_events WHERE intent_id = $1 ORDER BY timestamp', [id]);
  expect(rows.map((r: { stage: string }) => r.stage)).toEqual(['triage', 'lld', 'spec', 'spec']);
  expect(state.error).toMatch(/MAX_ITERATIONS_EXCEEDED/);
  expect(await failures(id)).toEqual(expect.arrayContaining([expect.stringMatching(/^spec attempt 1: the document failed its mechanical checks: no requirement is mapped to a test/)]));
  expect(git(repo, 'rev-parse', 'main')).toBe(before);
});
