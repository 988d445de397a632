import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startIntent } from '../../src/client/intents';
import { chainEnds } from '../../src/ledger/chain';
import { anchorScheduleId, keepAnchorSchedule } from '../../src/workers/anchor-schedule';
import { decideSignal, stateQuery } from '../../src/shared/messages';
import { ledgerAnchorWorkflow } from '../../src/workflows';
import { FAKE_GITHUB_TOKEN } from '../helpers/fake-credentials';
import { freshDatabase } from '../helpers/database';
import { Ledger } from '../../src/ledger/ledger';
import { migrate } from '../../src/ledger/migrate';
import { demoStages, makeSampleRepo, testDatabaseUrl, useTestWorld, waitFor, writeScript } from '../helpers/env';

const world = useTestWorld('ledger-evidence');
const BIN = path.resolve(__dirname, '../../bin/warden.js');

/** `warden ARGS` for real, against this file's ledger and the test Temporal server. */
function warden(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const home = mkdtempSync(path.join(tmpdir(), 'warden-evidence-home-'));
  const env = { ...process.env, WARDEN_HOME: home, WARDEN_LOG_LEVEL: 'warn', DATABASE_URL: world().databaseUrl };
  const result = spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8', timeout: 120_000 });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

const TRIGGERS = ['safety_events', 'gate_decisions', 'cost_events'];

let intentId = '';
let gateRow = { id: '', pos: 0 };

beforeAll(async () => {
  const demo = { stages: demoStages() };
  const repo = makeSampleRepo();
  intentId = `evidence-${Date.now()}`;
  const handle = await startIntent(
    world().client,
    { id: intentId, goal: 'Add slugify', repoPath: repo, paths: ['lib/**'], agent: { kind: 'scripted', scriptPath: writeScript({ stages: { ...demo.stages, impl: [demo.stages.impl![1]!] } }) }, limits: { cooldown: '0s' } },
    world().taskQueue,
  );
  await waitFor(async () => ((await handle.query(stateQuery)).pendingGate?.gate === 'merge' ? true : undefined), 120_000, 'the merge gate');
  await handle.signal(decideSignal, { gate: 'merge', decision: 'reject', by: 'bob', reason: 'not yet' });
  expect((await handle.result()).status).toBe('rejected');
  const { rows } = await world().pool.query(`SELECT id::text, chain_pos::int AS pos FROM gate_decisions WHERE intent_id = $1 AND gate = 'merge'`, [intentId]);
  gateRow = rows[0];
  // A row with a secret in it, as an agent's output might carry one.
  await world().ledger.audit.recordSafetyEvent({ id: '00000000-0000-4000-8000-00000000e001', timestamp: new Date(), eventType: 'ANOMALY_DETECTED', severity: 'high', intentId, reason: `leaked ${FAKE_GITHUB_TOKEN}` });
});

test("an anchor run lists the intents' heads in the system chain and keeps its head in its history; verify finds the ledger whole and in agreement", async () => {
  const anchor = await world().client.workflow.execute(ledgerAnchorWorkflow, { taskQueue: world().taskQueue, workflowId: `anchor-${Date.now()}` });
  const system = (await chainEnds(world().pool)).get('')!;
  expect(anchor).toMatchObject({ length: system.length, head: system.head });
  expect(anchor.chains).toBeGreaterThanOrEqual(1);
  const { rows } = await world().pool.query(`SELECT metadata->'heads'->$1 AS head FROM safety_events WHERE event_type = 'LEDGER_ANCHOR'`, [intentId]);
  const intent = (await chainEnds(world().pool)).get(intentId)!;
  expect(rows).toEqual([{ head: [intent.length, intent.head] }]);

  const verified = warden('ledger', 'verify');
  expect(verified.stderr).toBe('');
  // the system chain's head from the anchor run, and every intent's head from its LEDGER_ANCHOR row
  expect(verified.stdout).toMatch(/^the chains are whole: \d+ row\(s\) in \d+ chain\(s\), ([2-9]|\d\d+) anchored head\(s\) agree\n2 gate decision\(s\) and ending\(s\) agree with the workflow histories\n$/);
  expect(verified.code).toBe(0);
});

test('an anchor of another ledger whose workers share the namespace is not held against this one', async () => {
  const other = await freshDatabase(testDatabaseUrl());
  try {
    await migrate(other.pool);
    const taskQueue = `${world().taskQueue}-other-ledger`;
    const worker = await world().worker({ taskQueue, ledger: new Ledger(other.pool) });
    const foreign = await worker.runUntil(world().client.workflow.execute(ledgerAnchorWorkflow, { taskQueue, workflowId: `anchor-other-${Date.now()}` }));
    expect(foreign.ledger).not.toBe((await world().client.workflow.execute(ledgerAnchorWorkflow, { taskQueue: world().taskQueue, workflowId: `anchor-own-${Date.now()}` })).ledger);
    const verified = warden('ledger', 'verify');
    expect(verified.stdout).toMatch(/^the chains are whole: /);
    expect(verified.code).toBe(0);
  } finally {
    await other.drop();
  }
});

test('an export verifies offline, redacts secrets, and fails after a one-byte change, naming the row', () => {
  for (const format of ['jsonl', 'csv']) {
    const out = path.join(mkdtempSync(path.join(tmpdir(), 'warden-export-')), 'export');
    const exported = warden('ledger', 'export', '--since', '1d', '--format', format, '--out', out);
    expect(exported.stderr).toBe('');
    expect(exported.stdout).toMatch(/^wrote \d+ row\(s\) of \d+ chain\(s\), ([2-9]|\d\d+) anchored head\(s\) and the manifest to .*; 1 row\(s\) had secrets redacted/);
    const eventsFile = path.join(out, `events.${format}`);
    const events = readFileSync(eventsFile, 'utf8');
    expect(events).not.toContain(FAKE_GITHUB_TOKEN);

    const offline = warden('ledger', 'verify', '--file', out);
    expect(offline.stdout).toMatch(/the chains are whole: .*anchored head\(s\) agree\n1 row\(s\) had secrets redacted: checked by their digest only/);
    expect(offline.code).toBe(0);

    // One byte of the gate decision's content: "bob" becomes "cob".
    const at = events.indexOf('bob');
    expect(at).toBeGreaterThan(0);
    writeFileSync(eventsFile, `${events.slice(0, at)}c${events.slice(at + 1)}`);
    const changed = warden('ledger', 'verify', '--file', path.join(out, 'manifest.json'));
    expect(changed.code).toBe(1);
    expect(changed.stdout).toContain(`events.${format} does not have the sha256 the manifest records`);
    expect(changed.stdout).toContain(`a chain is broken at gate_decisions row ${gateRow.id} (position ${gateRow.pos} of intent ${intentId}'s chain`);
    expect(changed.stdout).toMatch(/: edited, or moved in the chain\n/);
  }
});

test("an export of one intent holds its chain only, and verifies", () => {
  const out = path.join(mkdtempSync(path.join(tmpdir(), 'warden-export-')), 'export');
  expect(warden('ledger', 'export', '--since', '2020-01-01', '--intent', intentId, '--out', out).code).toBe(0);
  const rows = readFileSync(path.join(out, 'events.jsonl'), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as { chain: string; pos: number });
  expect(rows.length).toBeGreaterThan(3);
  expect(rows.every((row) => row.chain === intentId)).toBe(true);
  expect(rows.map((row) => row.pos)).toEqual(rows.map((_, i) => i + 1));
  const verified = warden('ledger', 'verify', '--file', out);
  expect(verified.stdout).toMatch(/^the chains are whole: \d+ row\(s\) in 1 chain\(s\), 1 anchored head\(s\) agree\n/);
  expect(verified.code).toBe(0);
});

test('a gate decision and an ending rewritten in the database are named by the chain and by the workflow history', async () => {
  const client = await world().pool.connect();
  try {
    await client.query(`BEGIN; ${TRIGGERS.map((t) => `ALTER TABLE ${t} DISABLE TRIGGER USER;`).join(' ')}`);
    await client.query(`UPDATE gate_decisions SET decision = 'approve', decided_by = 'alice', reason = 'tampered' WHERE id = $1`, [gateRow.id]);
    await client.query(`UPDATE safety_events SET event_type = 'INTENT_MERGED', metadata = metadata || '{"mergedCommit": "0123456789abcdef"}' WHERE intent_id = $1 AND event_type = 'INTENT_REJECTED'`, [intentId]);
    await client.query(`${TRIGGERS.map((t) => `ALTER TABLE ${t} ENABLE TRIGGER USER;`).join(' ')} COMMIT`);
  } finally {
    client.release();
  }
  const verified = warden('ledger', 'verify');
  expect(verified.code).toBe(1);
  const lines = verified.stdout.trim().split('\n');
  // The first break in the intent's chain is the gate decision's batch (a workflow's flush): named by its first row.
  const { rows } = await world().pool.query(
    `SELECT id::text, chain_pos::int AS pos FROM (SELECT id, chain_pos, chain_head, intent_id FROM safety_events UNION ALL SELECT id, chain_pos, chain_head, intent_id FROM gate_decisions) r
      WHERE intent_id = $1 AND chain_head = (SELECT chain_head FROM gate_decisions WHERE id = $2) ORDER BY chain_pos LIMIT 1`,
    [intentId, gateRow.id],
  );
  expect(lines[0]).toMatch(new RegExp(`^a chain is broken at [a-z_]+ row ${rows[0].id} \\(position ${rows[0].pos} of intent ${intentId}'s chain, [^)]+\\): `));
  expect(lines[1]).toMatch(
    new RegExp(`^intent ${intentId}, gate_decisions row ${gateRow.id}: the ledger says approve by alice at merge: tampered; the workflow history has reject by bob: not yet \\(run [0-9a-f-]{8}, event \\d+\\)$`),
  );
  expect(lines[2]).toMatch(
    new RegExp(`^intent ${intentId}, safety_events row [0-9a-f-]+: the ledger says the intent merged as 0123456789abcdef; the workflow history has rejected \\(run [0-9a-f-]{8}, event \\d+\\)$`),
  );
  expect(lines).toHaveLength(3);
});

test('verify and export refuse bad input with one line', () => {
  const noSince = warden('ledger', 'export', '--format', 'csv');
  expect(noSince.code).not.toBe(0);
  expect(noSince.stderr).toMatch(/--since/);
  const noFile = warden('ledger', 'verify', '--file', path.join(tmpdir(), 'no-such-export'));
  expect(noFile.code).toBe(2);
  expect(noFile.stderr).toMatch(/^warden: .*cannot be read: --file takes an export's directory or its manifest.json\n$/);
});

test('the anchor schedule: workers installing it at once agree, one changed by hand is put back, and a triggered run anchors', async () => {
  const queue = world().taskQueue;
  const handle = world().client.schedule.getHandle(anchorScheduleId(queue));
  try {
    const changes = await Promise.all([1, 2, 3].map(() => keepAnchorSchedule(world().client, queue)));
    expect(changes.sort()).toEqual(['created', 'kept', 'kept']);
    await handle.update((previous) => ({ ...previous, spec: { intervals: [{ every: '1d' }] } }));
    expect(await keepAnchorSchedule(world().client, queue)).toBe('updated');
    expect(await keepAnchorSchedule(world().client, queue)).toBe('kept');
    const before = (await handle.describe()).info.recentActions.length;
    await handle.trigger();
    const action = await waitFor(async () => (await handle.describe()).info.recentActions[before], 120_000, 'the triggered anchor run');
    const result = await world().client.workflow.getHandle(action.action.workflow.workflowId, action.action.workflow.firstExecutionRunId).result();
    const system = (await chainEnds(world().pool)).get('')!;
    expect(result).toMatchObject({ length: system.length, head: system.head });
  } finally {
    await handle.delete().catch(() => undefined);
  }
});
