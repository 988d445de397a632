import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ExchangeStore } from '../../src/ledger/exchange-store';
import { Ledger } from '../../src/ledger/ledger';
import { migrate } from '../../src/ledger/migrate';
import { freshDatabase, type FreshDatabase } from '../helpers/database';

/** `warden recording ID` against a ledger holding a recorded intent, as a person runs it. */

const BIN = path.resolve(__dirname, '../../bin/warden.js');
const home = mkdtempSync(path.join(tmpdir(), 'warden-recording-home-'));
let db: FreshDatabase;
const intentId = `recorded-${randomUUID().slice(0, 8)}`;

const warden = (...args: string[]) =>
  spawnSync(process.execPath, [BIN, ...args], { env: { ...process.env, WARDEN_HOME: home, DATABASE_URL: db.url, WARDEN_LOG_LEVEL: 'warn' }, encoding: 'utf8', timeout: 120_000 });

beforeAll(async () => {
  db = await freshDatabase(process.env.WARDEN_TEST_EMBEDDED_DATABASE_URL!);
  await migrate(db.pool);
  const ledger = new Ledger(db.pool);
  const store = new ExchangeStore(db.pool);
  const calls = [
    { stage: 'triage', answer: { kind: 'whole' as const, text: '{"content":[{"type":"text","text":"LOW"}]}' } },
    { stage: 'impl', answer: { kind: 'events' as const, events: ['event: message_start\ndata: {}\n\n', 'event: message_stop\ndata: {}\n\n'] } },
  ];
  for (const [i, call] of calls.entries()) {
    const id = randomUUID();
    await ledger.modelCalls.record({
      id,
      timestamp: new Date(Date.now() + i),
      intentId,
      stage: call.stage,
      attempt: 1,
      agentId: 'claude',
      api: 'messages',
      modelId: 'claude-test',
      streamed: call.answer.kind === 'events',
      status: 200,
      outcome: 'answered',
      inputTokens: 10,
      outputTokens: 5,
      usd: '0.000105',
      estimated: false,
      latencyMs: 12,
    });
    await store.record({ callId: id, intentId, stage: call.stage, attempt: 1, order: 1, request: '{"model":"claude-test"}', requestKey: 'k'.repeat(64), answer: call.answer, status: 200 });
  }
  await store.recordContext(intentId, { baseCommit: 'f'.repeat(40), configHash: 'e'.repeat(64), wardenVersion: '0.1.0', agents: { default: { kind: 'command', cli: 'claude' } }, cliVersions: { claude: '2.1.331 (Claude Code)' } });
});

afterAll(async () => {
  await db?.drop();
  rmSync(home, { recursive: true, force: true });
});

test('lists each recorded call with its stage, attempt, order, model, sizes, and the replay context', () => {
  const result = warden('recording', intentId);
  expect(result.stderr).toBe('');
  expect(result.status).toBe(0);
  const lines = result.stdout.trimEnd().split('\n');
  expect(lines[0]).toBe(`base ${'f'.repeat(12)}, config ${'e'.repeat(12)}, Warden 0.1.0, agents default (claude 2.1.331 (Claude Code))`);
  expect(lines[2]).toMatch(/^triage\s+1\s+1\s+claude-test\s+answered\s+200\s+23 B\s+42 B$/);
  expect(lines[3]).toMatch(/^impl\s+1\s+1\s+claude-test\s+answered\s+200\s+23 B\s+\d+ B \(stream\)$/);
  expect(lines.at(-1)).toMatch(/^2 exchange\(s\), \d+ bytes stored$/);
});

test('--json gives the bodies as stored', () => {
  const result = warden('recording', intentId, '--json');
  expect(result.status).toBe(0);
  const recording = JSON.parse(result.stdout);
  expect(recording.exchanges.map((e: { stage: string; answer: unknown }) => [e.stage, e.answer])).toEqual([
    ['triage', { kind: 'whole', text: '{"content":[{"type":"text","text":"LOW"}]}' }],
    ['impl', { kind: 'events', events: ['event: message_start\ndata: {}\n\n', 'event: message_stop\ndata: {}\n\n'] }],
  ]);
});

test('an intent with nothing recorded: one line, exit 1', () => {
  const result = warden('recording', 'never-ran');
  expect(result.status).toBe(1);
  expect(result.stderr.trimEnd().split('\n')).toEqual([expect.stringMatching(/^warden: nothing was recorded of intent never-ran \(/)]);
  expect(result.stdout).toBe('');
});

test('warden replay of an intent with nothing recorded: one line, exit 1, before any server or worker starts', () => {
  const result = warden('replay', 'never-ran');
  expect(result.stderr.trimEnd().split('\n')).toEqual([expect.stringMatching(/^warden: intent never-ran has no recording to replay \(/)]);
  expect(result.status).toBe(1);
  expect(result.stdout).toBe('');
});
