import type pg from 'pg';
import type { LedgerPeriod } from './gate-statistics';

/** One move of a circuit, as the worker whose call made it recorded it. */
export interface BreakerChange {
  readonly at: string;
  /** The endpoint (kind/base URL/model), or `error-rate` for the fleet's error-rate breaker. */
  readonly endpoint: string;
  /** Where it came from; null where the row does not say (an error-rate reset). */
  readonly from: string | null;
  readonly to: 'OPEN' | 'HALF_OPEN' | 'CLOSED';
  /** The machine's reason (consecutive-failures, error-rate, cool-down-elapsed, probe-failed, probes-succeeded), where the row has one. */
  readonly cause: string | null;
  /** The event's sentence, with the numbers. */
  readonly reason: string;
  /** The intent whose call made the move. */
  readonly intentId: string | null;
}

/** Rate-limit refusals of one agent and model over the period. */
export interface RateLimitRefusals {
  readonly agentId: string | null;
  readonly modelId: string | null;
  readonly refusals: number;
  readonly first: string;
  readonly last: string;
}

export interface BreakerHistory {
  readonly since: string | null;
  readonly until: string | null;
  /** Oldest first. */
  readonly changes: readonly BreakerChange[];
  /** Most refused first. */
  readonly rateLimits: readonly RateLimitRefusals[];
}

const TO_OF_TYPE = { CIRCUIT_TRIPPED: 'OPEN', CIRCUIT_HALF_OPEN: 'HALF_OPEN', CIRCUIT_RESET: 'CLOSED' } as const;

/**
 * Every circuit state change in the period (CIRCUIT_TRIPPED, CIRCUIT_HALF_OPEN, CIRCUIT_RESET
 * rows) in the order the ledger received them, and the RATE_LIMIT_BLOCK refusals per agent and model.
 */
export async function breakerHistory(pool: pg.Pool, period: LedgerPeriod = {}): Promise<BreakerHistory> {
  const since = period.since ?? null;
  const until = period.until ?? null;
  const inPeriod = `($1::timestamptz IS NULL OR "timestamp" >= $1) AND ($2::timestamptz IS NULL OR "timestamp" < $2)`;
  const [changes, limits] = await Promise.all([
    pool.query<{ at: Date; event_type: keyof typeof TO_OF_TYPE; endpoint: string; from: string | null; cause: string | null; reason: string; intent_id: string | null }>(
      `SELECT "timestamp" AS at, event_type, coalesce(breaker_id, '?') AS endpoint, metadata->>'from' AS "from",
              metadata->>'cause' AS cause, reason, intent_id
         FROM safety_events
        WHERE event_type IN ('CIRCUIT_TRIPPED', 'CIRCUIT_HALF_OPEN', 'CIRCUIT_RESET') AND ${inPeriod}
        ORDER BY seq NULLS FIRST, "timestamp", id`,
      [since, until],
    ),
    pool.query<{ agent_id: string | null; model_id: string | null; n: number; first: Date; last: Date }>(
      `SELECT agent_id, model_id, count(*)::int AS n, min("timestamp") AS first, max("timestamp") AS last
         FROM safety_events
        WHERE event_type = 'RATE_LIMIT_BLOCK' AND ${inPeriod}
        GROUP BY 1, 2
        ORDER BY n DESC, agent_id COLLATE "C", model_id COLLATE "C"`,
      [since, until],
    ),
  ]);
  return {
    since: since?.toISOString() ?? null,
    until: until?.toISOString() ?? null,
    changes: changes.rows.map((row) => ({
      at: row.at.toISOString(),
      endpoint: row.endpoint,
      from: row.from,
      to: TO_OF_TYPE[row.event_type],
      cause: row.cause,
      reason: row.reason,
      intentId: row.intent_id,
    })),
    rateLimits: limits.rows.map((row) => ({ agentId: row.agent_id, modelId: row.model_id, refusals: row.n, first: row.first.toISOString(), last: row.last.toISOString() })),
  };
}
