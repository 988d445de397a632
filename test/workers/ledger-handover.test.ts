import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { defaultPayloadConverter } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import pg from 'pg';
import pino from 'pino';
import type { LedgerBatch } from '../../src/activities';
import { Ledger } from '../../src/ledger/ledger';
import { migrate } from '../../src/ledger/migrate';
import { LEDGER_ROWS_HEADER } from '../../src/shared/ledger-handover';
import { createRedactor } from '../../src/shared/redact';
import { ledgerHandOverInterceptor } from '../../src/workers/interceptors/ledger-handover';
import { freshDatabase, type FreshDatabase } from '../helpers/database';
import { testDatabaseUrl } from '../helpers/env';

/**
 * The worker's half of a gate decision's hand-over: the rows an activity carries are in the
 * ledger before the activity runs, and an activity whose rows cannot be written never runs.
 */
let database: FreshDatabase;
beforeAll(async () => {
  database = await freshDatabase(testDatabaseUrl());
  await migrate(database.pool);
});
afterAll(async () => {
  await database.drop();
});

const logger = pino({ level: 'silent' });

function decisionBatch(intentId: string): { id: string; batch: LedgerBatch } {
  const id = randomUUID();
  const at = new Date().toISOString();
  return { id, batch: { rows: [{ gateDecision: { id, intentId, gate: 'merge', decision: 'approve', by: 'tester', requestedAt: at, decidedAt: at, timedOut: false } }] } };
}

/** Runs `activity` in an attempt whose headers carry `batch`, through the interceptor over `ledger`. */
function runCarrying(ledger: Ledger, batch: LedgerBatch, activity: () => Promise<string>, startToCloseTimeoutMs = 60_000): Promise<unknown> {
  const env = new MockActivityEnvironment({ activityType: 'rebaseOntoBase', startToCloseTimeoutMs });
  const intercept = ledgerHandOverInterceptor({ ledger, redact: createRedactor({}), logger });
  return env.run(() => intercept(Context.current()).inbound!.execute!({ args: [], headers: { [LEDGER_ROWS_HEADER]: defaultPayloadConverter.toPayload(batch) } }, activity));
}

test('the rows an activity carries are in the ledger before it runs, once however often it is attempted', async () => {
  const ledger = new Ledger(database.pool);
  const { id, batch } = decisionBatch('handover-1');
  const seen = async (): Promise<string> => {
    const { rows } = await database.pool.query('SELECT decision FROM gate_decisions WHERE id = $1', [id]);
    return rows.map((r: { decision: string }) => r.decision).join(',');
  };
  expect(await runCarrying(ledger, batch, seen)).toBe('approve');
  expect(await runCarrying(ledger, batch, seen)).toBe('approve');
  const { rows } = await database.pool.query('SELECT count(*)::int AS n FROM gate_decisions WHERE intent_id = $1', ['handover-1']);
  expect(rows[0]).toEqual({ n: 1 });
});

test('an activity whose rows cannot be written never runs: the attempt fails, to be retried', async () => {
  // Nothing listens on port 1: every connection is refused at once.
  const pool = new pg.Pool({ connectionString: 'postgres://warden@127.0.0.1:1/nowhere', connectionTimeoutMillis: 1_000 });
  let ran = false;
  try {
    // A deadline already past: the interceptor gives up on the first refused connection.
    await expect(
      runCarrying(new Ledger(pool), decisionBatch('handover-2').batch, async () => {
        ran = true;
        return 'acted';
      }, 1_000),
    ).rejects.toThrow();
  } finally {
    await pool.end();
  }
  expect(ran).toBe(false);
});
