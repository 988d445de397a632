import { decideSignal, stateQuery } from '../../src/shared/messages';
import { demoScript, demoStages, git, startSampleIntent, useTestWorld, waitFor } from '../helpers/env';

/**
 * The spec's test plan is checked after impl's tests pass: a planned test impl did not write, or
 * wrote skipped, sends impl back with its name; the merge gate's review package lists the plan.
 */

const world = useTestWorld('test-plan');
const demo = demoStages();
type Edit = { path: string; content: string };
const implEdits = demo.impl![1]!.edits as Edit[];
const LIBRARY = implEdits.find((e) => e.path === 'lib/strings.js')!;
const NEW_TEST = implEdits.find((e) => e.path === 'lib/strings.test.js')!;
const PLANNED = 'slugify keeps digits and collapses separators';

function start(impl: Array<Record<string, unknown>>) {
  return startSampleIntent(world(), 'tp', { agent: { kind: 'scripted', scriptPath: demoScript({ impl }) } });
}

async function planRows(id: string): Promise<Array<{ severity: string; reason: string }>> {
  const { rows } = await world().pool.query("SELECT severity, reason FROM safety_events WHERE intent_id = $1 AND event_type = 'TEST_PLAN_CHECKED' ORDER BY seq", [id]);
  return rows as Array<{ severity: string; reason: string }>;
}

async function mergeGatePackage(handle: Awaited<ReturnType<typeof start>>['handle']) {
  return waitFor(async () => {
    const pending = (await handle.query(stateQuery)).pendingGate;
    return pending?.gate === 'merge' ? pending.package : undefined;
  }, 120_000, 'the merge gate with its package');
}

test('a planned test impl never wrote sends impl back with its name; the attempt that writes it merges, its plan on the review package', async () => {
  const withoutTest = { output: 'slugify added; the tests pass.', edits: [LIBRARY] };
  const withTest = { output: 'Added the planned test.', edits: [LIBRARY, NEW_TEST] };
  const { handle, repo, id } = await start([withoutTest, withTest]);
  const pkg = await mergeGatePackage(handle);
  expect((await handle.query(stateQuery)).attempts.impl).toBe(2);
  expect(await planRows(id)).toEqual([
    { severity: 'medium', reason: expect.stringContaining(`"${PLANNED}" in lib/strings.test.js (for "digits kept, repeated separators become one dash") is missing`) },
    { severity: 'info', reason: "impl attempt 2: the spec's test plan is kept: 3 planned test(s) ran" },
  ]);
  const prompt = git(repo, 'show', `warden/${id}:docs/lineage/active/${id}/04-impl-attempt-2.prompt.md`);
  expect(prompt).toContain('the test plan of the specification is not kept');
  expect(prompt).toContain(`"${PLANNED}" in lib/strings.test.js`);
  expect(pkg?.testPlan).toEqual([
    { requirement: expect.any(String), test: 'slugify makes a lower-case, dash-separated slug', file: 'test/strings.test.js', existing: true, status: 'ran' },
    { requirement: 'digits kept, repeated separators become one dash', test: PLANNED, file: 'lib/strings.test.js', existing: false, status: 'ran' },
    { requirement: 'capitalize unchanged', test: 'capitalize upper-cases the first letter', file: 'test/strings.test.js', existing: true, status: 'ran' },
  ]);
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');
  expect(git(repo, 'show', 'main:lib/strings.test.js')).toContain(PLANNED);
});

test('a planned test written skipped counts as missing: impl goes back until it runs', async () => {
  // A skip with a reason, which the test-tampering check lets through: the plan does not.
  const skipped = { ...NEW_TEST, content: NEW_TEST.content.replace(`test('${PLANNED}', () => {`, `test('${PLANNED}', { skip: 'later' }, () => {`) };
  expect(skipped.content).toContain("skip: 'later'");
  const { handle, repo, id } = await start([{ output: 'slugify and its test, skipped for now.', edits: [LIBRARY, skipped] }, { output: 'The test runs now.', edits: [LIBRARY, NEW_TEST] }]);
  const pkg = await mergeGatePackage(handle);
  const rows = await planRows(id);
  expect(rows.map((r) => r.severity)).toEqual(['medium', 'info']);
  expect(rows[0]!.reason).toContain(`"${PLANNED}" in lib/strings.test.js (for "digits kept, repeated separators become one dash") is skipped: make it run`);
  expect(git(repo, 'show', `warden/${id}:docs/lineage/active/${id}/04-impl-attempt-1-tests.log`)).toMatch(new RegExp(`ok \\d+ - ${PLANNED} # SKIP`));
  expect(pkg?.testPlan?.map((t) => t.status)).toEqual(['ran', 'ran', 'ran']);
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  expect((await handle.result()).status).toBe('merged');
});
