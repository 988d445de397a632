import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { answeringDesignStages } from '../../src/client/sample-repo';
import { createLogger } from '../../src/runtime/logger';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { demoStages, git, startSampleIntent, useTestWorld, waitFor } from '../helpers/env';
import { PLANTED, PLANTED_TEXT } from '../helpers/planted-secrets';

/**
 * Secrets an agent (or its tests) prints appear nowhere Warden keeps things: not in the worker's
 * log, the ledger, the workflow history, the intent's state, nor what goes into the target
 * repository or the worker's lineage folder (the lineage: prompts, answers, logs, test output).
 * Every planted secret holds the word PLANTED, so one search finds any of them.
 */

const logLines: string[] = [];
const world = useTestWorld('secrets', {
  logger: createLogger({ level: 'debug', destination: { write: (line: string) => void logLines.push(line) } }),
});

const saved = process.env.SAMPLE_TEXT_B64;
beforeAll(() => {
  // Reaches the agent and its tests through the environment, under a name that says nothing.
  process.env.SAMPLE_TEXT_B64 = Buffer.from(PLANTED_TEXT).toString('base64');
});
afterAll(() => {
  if (saved === undefined) delete process.env.SAMPLE_TEXT_B64;
  else process.env.SAMPLE_TEXT_B64 = saved;
});

const leak = 'printf %s "$SAMPLE_TEXT_B64" | base64 -d';

test('planted secrets printed by every stage, a failing attempt and the tests are nowhere to be found', async () => {
  expect(PLANTED.length).toBeGreaterThanOrEqual(15);
  const [wrong, right] = demoStages().impl!.map((step) => Buffer.from(String((step.edits as Array<{ content: string }>)[0]!.content)).toString('base64'));
  // Every stage prints the secrets. In impl, the first try prints them to stderr and fails (the
  // activity is retried, its failure kept in history); the first attempt's code fails the tests,
  // which print them too; the second attempt is right.
  const impl = [
    `if [ ! -f lib/.try1 ]; then touch lib/.try1; ${leak} >&2; exit 1; fi`,
    `if [ ! -f lib/.try2 ]; then touch lib/.try2; printf %s ${wrong} | base64 -d > lib/strings.js; echo done; exit 0; fi`,
    `rm -f lib/.try1 lib/.try2; printf %s ${right} | base64 -d > lib/strings.js; echo done`,
  ].join('; ');
  const command = answeringDesignStages(`p=$(cat); ${leak}; echo; case "$p" in "# Warden: impl"*) ${impl} ;; *) echo done ;; esac`);
  const { handle, repo, id } = await startSampleIntent(world(), 'sec', {
    agent: { kind: 'command', command },
    testCommand: `${leak}; npm test --silent`,
  });
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 180_000, 'the merge gate');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'tester' });
  const result = await handle.result();
  expect(result.status).toBe('merged');
  const state = await handle.query(stateQuery);
  expect(state.attempts.impl).toBe(2); // the attempt whose tests failed, printing the secrets, happened
  expect(state.tests[0]).toMatchObject({ passed: false });

  const places: Record<string, string> = {
    'workflow history': JSON.stringify((await handle.fetchHistory()).events),
    'intent state': JSON.stringify(state) + JSON.stringify(result),
    ledger: await everyLedgerRow(),
    'worker log': logLines.join(''),
    // Every ref: main, and the lineage ref with the intent's attempts below it.
    'target repository': execFileSync('git', ['log', '-p', '--all'], { cwd: repo, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 }),
    "the worker's lineage copy": readdirSync(result.lineagePath!).map((name) => readFileSync(path.join(result.lineagePath!, name), 'utf8')).join('\n'),
  };
  // The places were written to: the secrets went in redacted, not missing.
  expect(places['target repository']).toContain(`docs/lineage/active/${id}/04-impl-attempt-2-tests.log`);
  expect(git(repo, 'show', `refs/warden/lineage/${id}:04-impl-attempt-2-tests.log`)).toContain('[redacted]');
  expect(places["the worker's lineage copy"]).toContain('[redacted]');
  expect(places['target repository']).toContain('[redacted]');
  expect(places['workflow history']).toContain('[redacted]');
  expect(places['workflow history']).toMatch(/agent command exited with code 1 \(sandbox: bubblewrap\); stderr ends:.*\[redacted\]/); // the failed try
  expect(places.ledger).toContain('[redacted]');
  for (const [place, text] of Object.entries(places)) {
    const at = text.indexOf('PLANTED');
    expect({ place, leaked: at < 0 ? undefined : text.slice(Math.max(0, at - 80), at + 40) }).toEqual({ place, leaked: undefined });
  }
  expect(git(repo, 'show', 'main:lib/strings.js')).toContain('slugify');
});

async function everyLedgerRow(): Promise<string> {
  const { rows: tables } = await world().pool.query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'");
  let all = '';
  for (const { table_name: table } of tables as Array<{ table_name: string }>) {
    const { rows } = await world().pool.query(`SELECT row_to_json(t)::text AS row FROM "${table}" t`);
    all += rows.map((r: { row: string }) => r.row).join('\n');
  }
  return all;
}
