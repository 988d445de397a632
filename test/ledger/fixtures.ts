import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { migrate } from '../../src/ledger/migrate';
import { Ledger } from '../../src/ledger/ledger';
import type { CostEventInput, GateDecisionInput, SafetyEventInput } from '../../src/ledger/types';
import { freshDatabase, type FreshDatabase } from '../helpers/database';

/** A migrated database of its own and a Ledger on it; call in beforeAll, drop in afterAll. */
export async function migratedLedger(baseUrl: string): Promise<{ db: FreshDatabase; ledger: Ledger }> {
  const db = await freshDatabase(baseUrl);
  await migrate(db.pool);
  return { db, ledger: new Ledger(db.pool) };
}

export function safetyEvent(overrides: Partial<SafetyEventInput> = {}): SafetyEventInput {
  return { id: randomUUID(), timestamp: new Date(), eventType: 'STAGE_COMPLETED', severity: 'info', reason: 'done', intentId: 'intent-1', ...overrides };
}

export function costEvent(overrides: Partial<CostEventInput> = {}): CostEventInput {
  return {
    id: randomUUID(),
    timestamp: new Date(),
    intentId: 'intent-1',
    stage: 'impl',
    attempt: 1,
    agentId: 'scripted',
    modelId: 'model-a',
    inputTokens: 100,
    outputTokens: 50,
    usd: '0.010000',
    ...overrides,
  };
}

export function gateDecision(overrides: Partial<GateDecisionInput> = {}): GateDecisionInput {
  return {
    id: randomUUID(),
    intentId: 'intent-1',
    gate: 'merge',
    decision: 'approve',
    by: 'alice',
    requestedAt: new Date(Date.now() - 60_000),
    decidedAt: new Date(),
    timedOut: false,
    ...overrides,
  };
}

/** Row count of a table (names are ours, never user input). */
export async function countRows(pool: pg.Pool, table: string): Promise<number> {
  const result = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
  return result.rows[0]!.n;
}

/** Decimal string → integer millionths of a dollar, for exact arithmetic in tests. */
export function micros(usd: string): bigint {
  const [whole, fraction = ''] = usd.split('.');
  return BigInt(whole!) * 1_000_000n + BigInt(fraction.padEnd(6, '0'));
}

/** Integer millionths → the ledger's 6-decimal string. */
export function usdOf(micros: bigint): string {
  return `${micros / 1_000_000n}.${(micros % 1_000_000n).toString().padStart(6, '0')}`;
}
