import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { MockActivityEnvironment } from '@temporalio/testing';
import pg from 'pg';
import pino from 'pino';
import type { LedgerBatch } from '../../src/activities';
import { Ledger } from '../../src/ledger/ledger';
import { CARRIED_ROWS_FIELD } from '../../src/shared/carried-rows';
import { createRedactor } from '../../src/shared/redact';
import { carriedRowsInterceptor } from '../../src/workers/interceptors/carried-rows';
import { migratedDatabaseForFile } from '../helpers/database';
import { testDatabaseUrl } from '../helpers/env';

/**
 * The worker's half of rows sent ahead of an activity: they are in the ledger before the activity
 * runs, once however often it is attempted; the activity gets its argument without them; and an
 * activity whose rows cannot be written never runs.
 */
const database = migratedDatabaseForFile(testDatabaseUrl);

const logger = pino({ level: 'silent' });

function stageRows(intentId: string): { id: string; batch: LedgerBatch } {
  const id = randomUUID();
  return { id, batch: { rows: [{ safetyEvent: { id, timestamp: new Date(), eventType: 'STAGE_COMPLETED', severity: 'info', reason: 'triage attempt 1 done', intentId, stage: 'triage' } }] } };
}

/** Runs `activity` through the interceptor over `ledger`, with `args` as the attempt's arguments. */
function runThrough(ledger: Ledger, args: unknown[], activity: (...args: unknown[]) => Promise<unknown>, startToCloseTimeoutMs = 60_000): Promise<unknown> {
  const env = new MockActivityEnvironment({ activityType: 'runAgentStage', startToCloseTimeoutMs });
  const intercept = carriedRowsInterceptor({ ledger, redact: createRedactor({}), logger });
  return env.run(() => intercept(Context.current()).inbound!.execute!({ args, headers: {} }, (input) => activity(...input.args)));
}

async function reasonsOf(id: string): Promise<string> {
  const { rows } = await database().pool.query('SELECT reason FROM safety_events WHERE id = $1', [id]);
  return rows.map((r: { reason: string }) => r.reason).join(',');
}

test('the rows an activity carries are in the ledger before it runs, once however often it is attempted, and the activity does not see them', async () => {
  const ledger = new Ledger(database().pool);
  const { id, batch } = stageRows('carried-1');
  const seen: unknown[] = [];
  const activity = async (input: unknown): Promise<string> => {
    seen.push(input);
    return reasonsOf(id);
  };
  const args = [{ stage: 'lld', attempt: 1, [CARRIED_ROWS_FIELD]: batch }, 'second'];
  expect(await runThrough(ledger, args, activity as (...a: unknown[]) => Promise<unknown>)).toBe('triage attempt 1 done');
  expect(await runThrough(ledger, args, activity as (...a: unknown[]) => Promise<unknown>)).toBe('triage attempt 1 done');
  expect(seen).toEqual([{ stage: 'lld', attempt: 1 }, { stage: 'lld', attempt: 1 }]);
  const { rows } = await database().pool.query('SELECT count(*)::int AS n FROM safety_events WHERE intent_id = $1', ['carried-1']);
  expect(rows[0]).toEqual({ n: 1 });
});

test('an activity that carries no rows gets its arguments as they were', async () => {
  const args = [{ stage: 'lld' }, 2];
  expect(await runThrough(new Ledger(database().pool), args, async (...got) => got)).toEqual(args);
});

test('an activity whose rows cannot be written never runs: the attempt fails, to be retried', async () => {
  // Nothing listens on port 1: every connection is refused at once.
  const pool = new pg.Pool({ connectionString: 'postgres://warden@127.0.0.1:1/nowhere', connectionTimeoutMillis: 1_000 });
  let ran = false;
  try {
    // A deadline already past: the interceptor gives up on the first refused connection.
    await expect(
      runThrough(new Ledger(pool), [{ [CARRIED_ROWS_FIELD]: stageRows('carried-2').batch }], async () => {
        ran = true;
        return 'acted';
      }, 1_000),
    ).rejects.toThrow();
  } finally {
    await pool.end();
  }
  expect(ran).toBe(false);
});
