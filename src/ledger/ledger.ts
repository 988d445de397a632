import { storable } from './storable';
import { deterministicUuid } from './event-id';
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { z } from 'zod';
import {
  ActivityRunSchema,
  BUDGET_SCOPES,
  BudgetReservationRequestSchema,
  COST_GROUPINGS,
  SettledCallSchema,
  ModelCallSchema,
  type ModelCallInput,
  type ModelCallRow,
  DaySchema,
  SafetyEventSchema,
  UsdSchema,
  type ActivityOutcome,
  type ActivityRun,
  type ActivityRunInput,
  type BudgetReservation,
  type BudgetReservationRequest,
  type BudgetScope,
  type CostEventInput,
  type IntentBooks,
  type OpenReservation,
  type SettledCall,
  type CostGrouping,
  type CostRow,
  type DailyReport,
  type GlobalStop,
  type TimelineEntry,
} from './types';
import type { Severity } from '../shared/safety-events';
import { dailyReport } from './daily-report';
import { readIntentRecord, type IntentRecord } from './intent-record';
import { inTransaction } from './transaction';
import { retentionCut } from './chain';
import { LedgerWriter } from './ledger-writer';
import { AuditStore } from './audit-store';
import { LedgerError } from './ledger-error';
import { costRow, safetyEventRow } from './chained-rows';
import { fromMicros, normalizeUsd, toMicros } from '../shared/money';
import { workflowIdForIntent } from '../shared/ids';

/** pg_advisory_xact_lock class for per-day budget reservations ('WBDG'); the object is the day. */
const BUDGET_LOCK_CLASS = 0x57424447;
/** pg_advisory_xact_lock class for an intent's budget reservations ('WBIN'); the object is a hash of the intent id. */
const INTENT_BUDGET_LOCK_CLASS = 0x5742494e;
const ZERO_USD = '0.000000';

const CostGroupingSchema = z.enum(COST_GROUPINGS);
const GROUP_KEY: Record<CostGrouping, string> = {
  intent: 'intent_id',
  stage: 'stage',
  model: 'model_id',
  agent: 'agent_id',
  day: `to_char("timestamp" AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
};
const ReservationIdSchema = z.string().min(1).max(200);
const ActorSchema = z.string().trim().min(1, 'say who');
const ReasonSchema = z.string().trim().min(1, 'give a reason');

/**
 * Warden's ledger on PostgreSQL: the append-only audit tables, the per-day budget, the global
 * stop flag, and the queries behind `warden audit`, `warden costs`, `warden report` and retention.
 * Writes are idempotent by id; money is exact (NUMERIC in SQL, decimal strings in TypeScript).
 */
export class Ledger {
  /** The chained writes every store goes through, and the observer they tell. */
  readonly writer: LedgerWriter;
  readonly audit: AuditStore;

  constructor(
    readonly pool: pg.Pool,
    opts: { readonly unchainedForBenchmark?: boolean } = {},
  ) {
    this.writer = new LedgerWriter(opts.unchainedForBenchmark !== true);
    this.audit = new AuditStore(pool, this.writer);
  }

  /**
   * Closes every granted reservation still open that was made before `olderThan` and names no
   * activity (made before activities were recorded), at its maximum, with a cost row at that
   * amount: a call whose worker died before it could settle (it may have been billed). Safe to
   * run from several workers at once: each reservation is closed once. Returns what it closed.
   * Reservations that name their activity are released once Temporal says it no longer runs
   * (see src/workers/stale-reservations.ts).
   */
  async reconcileStaleReservations(olderThan: Date): Promise<Array<{ readonly id: string; readonly intentId: string; readonly amountUsd: string }>> {
    z.date().parse(olderThan);
    return this.transaction(async (client) => {
      const closed = await client.query<{ id: string; intent_id: string; amount: string; agent_id: string | null; stage: string | null; cost_id: string; at: Date }>(
        `WITH stale AS (
           SELECT r.id, r.intent_id, r.amount_usd, r.agent_id, r.stage FROM budget_reservations r
            WHERE r.granted AND r.created_at < $1 AND r.activity_id IS NULL
              AND NOT EXISTS (SELECT 1 FROM budget_settlements s WHERE s.reservation_id = r.id)
         ), closed AS (
           INSERT INTO budget_settlements (reservation_id, kind, actual_usd)
           SELECT id, 'reconciled', amount_usd FROM stale
           ON CONFLICT (reservation_id) DO NOTHING
           RETURNING reservation_id
         )
         SELECT stale.id, stale.intent_id, stale.amount_usd::text AS amount, stale.agent_id, stale.stage,
                md5('reconciled-cost:' || stale.id)::uuid::text AS cost_id, now() AS at
           FROM stale JOIN closed ON closed.reservation_id = stale.id ORDER BY stale.id`,
        [olderThan],
      );
      // Counted in cost_events too, at the same amount, in the same transaction: the books keep balancing.
      await this.writer.write(
        client,
        closed.rows.map((r) =>
          costRow({ id: r.cost_id, timestamp: r.at, intentId: r.intent_id, stage: r.stage ?? 'unknown', attempt: 1, agentId: r.agent_id ?? 'unknown', modelId: 'unknown', inputTokens: 0, outputTokens: 0, usd: normalizeUsd(r.amount), reservationId: r.id }),
        ),
      );
      return closed.rows.map((r) => ({ id: r.id, intentId: r.intent_id, amountUsd: normalizeUsd(r.amount) }));
    });
  }

  /** Appends one request made through the model gateway. True if inserted; false if the id already exists. */
  async recordModelCall(input: ModelCallInput): Promise<boolean> {
    const m = ModelCallSchema.parse(storable(input));
    const result = await this.pool.query(
      `INSERT INTO model_calls (id, "timestamp", intent_id, stage, attempt, agent_id, api, model_id, streamed, status, outcome, refusal,
                                input_tokens, output_tokens, usd, estimated, latency_ms)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
       ON CONFLICT (id) DO NOTHING`,
      [m.id, m.timestamp, m.intentId, m.stage, m.attempt, m.agentId, m.api, m.modelId, m.streamed, m.status, m.outcome, m.refusal ?? null,
       m.inputTokens, m.outputTokens, m.usd, m.estimated, m.latencyMs],
    );
    return result.rowCount === 1;
  }

  /** The gateway requests of an intent, oldest first. */
  async modelCallsOf(intentId: string): Promise<ModelCallRow[]> {
    const result = await this.pool.query<Record<string, unknown>>(
      `SELECT id, "timestamp", intent_id, stage, attempt, agent_id, api, model_id, streamed, status, outcome, refusal,
              input_tokens::int AS input_tokens, output_tokens::int AS output_tokens, usd::text AS usd, estimated, latency_ms
         FROM model_calls WHERE intent_id = $1 ORDER BY "timestamp", recorded_at`,
      [intentId],
    );
    return result.rows.map((r) => ({
      id: r.id as string,
      timestamp: r.timestamp as Date,
      intentId: r.intent_id as string,
      stage: r.stage as string,
      attempt: r.attempt as number,
      agentId: r.agent_id as string,
      api: r.api as ModelCallRow['api'],
      modelId: r.model_id as string,
      streamed: r.streamed as boolean,
      status: r.status as number,
      outcome: r.outcome as ModelCallRow['outcome'],
      ...(r.refusal === null ? {} : { refusal: r.refusal as string }),
      inputTokens: r.input_tokens as number,
      outputTokens: r.output_tokens as number,
      usd: normalizeUsd(r.usd as string),
      estimated: r.estimated as boolean,
      latencyMs: r.latency_ms as number,
    }));
  }

  /**
   * Reserves a paid call's maximum cost against every budget it counts in, atomically: the day's
   * (`limitUsd`), the agent's day budget, the intent's budget and its stage's budget within the
   * intent (each only when given). Reservations of the same day, and of the same intent, are
   * serialised by advisory locks; a budget's committed amount is its settled spend plus open
   * reservations, and the call is granted only if every budget stays within its limit with it.
   * Denials are recorded too, so a retry with the same id gets the same answer and never
   * reserves twice.
   */
  async reserveBudget(request: BudgetReservationRequest): Promise<BudgetReservation> {
    const r = BudgetReservationRequestSchema.parse(request);
    return this.transaction(async (client) => {
      // Always the day first, then the intent: two reservations never wait on each other in a cycle.
      await client.query(`SELECT pg_advisory_xact_lock($1, $2::date - '1970-01-01'::date)`, [BUDGET_LOCK_CLASS, r.day]);
      await client.query(`SELECT pg_advisory_xact_lock($1, hashtext($2))`, [INTENT_BUDGET_LOCK_CLASS, r.intentId]);
      // A shrinkable request may have been granted less than it asked: the same request still.
      const previous = await client.query<{ granted: boolean; committed: string; limit: string; denied_by: BudgetScope | null; amount: string; same: boolean }>(
        `SELECT granted, committed_usd::text AS committed, limit_usd::text AS limit, denied_by, amount_usd::text AS amount,
                (day = $2::date AND intent_id = $3
                 AND (amount_usd = $4::numeric OR ($7::numeric IS NOT NULL AND amount_usd BETWEEN $7::numeric AND $4::numeric))
                 AND agent_id IS NOT DISTINCT FROM $5 AND stage IS NOT DISTINCT FROM $6) AS same
           FROM budget_reservations WHERE id = $1`,
        [r.id, r.day, r.intentId, r.amountUsd, r.agentId ?? null, r.stage ?? null, r.minAmountUsd ?? null],
      );
      const row = previous.rows[0];
      if (row) {
        if (!row.same) throw new LedgerError(`budget reservation ${r.id} already exists for a different day, intent, agent, stage or amount`);
        return reservationOf(row.granted, row.committed, row.limit, row.denied_by, row.amount);
      }
      // What each budget has committed: settled spend (real cost, overruns included) plus open reservations.
      const committed = await client.query<Record<BudgetScope, string>>(
        `SELECT round(coalesce(sum(u.usd) FILTER (WHERE r.day = $1::date), 0), 6)::text AS day,
                round(coalesce(sum(u.usd) FILTER (WHERE r.day = $1::date AND r.agent_id = $3), 0), 6)::text AS agent,
                round(coalesce(sum(u.usd) FILTER (WHERE r.intent_id = $2), 0), 6)::text AS intent,
                round(coalesce(sum(u.usd) FILTER (WHERE r.intent_id = $2 AND r.stage = $4), 0), 6)::text AS stage
           FROM budget_reservations r
           LEFT JOIN budget_settlements s ON s.reservation_id = r.id
           CROSS JOIN LATERAL (SELECT coalesce(s.actual_usd, r.amount_usd) AS usd) u
          WHERE r.granted AND (r.day = $1::date OR r.intent_id = $2)`,
        [r.day, r.intentId, r.agentId ?? null, r.stage ?? null],
      );
      const spent = committed.rows[0]!;
      const limits: Record<BudgetScope, string | undefined> = { day: r.limitUsd, agent: r.agentLimitUsd, intent: r.intentLimitUsd, stage: r.stageLimitUsd };
      // The most every budget still allows; a shrinkable request takes that when it is enough.
      const headroom = BUDGET_SCOPES.reduce<bigint | undefined>((least, scope) => {
        const limit = limits[scope];
        if (limit === undefined) return least;
        const left = toMicros(limit) - toMicros(spent[scope]);
        return least === undefined || left < least ? left : least;
      }, undefined);
      let amount = toMicros(r.amountUsd);
      if (headroom !== undefined && amount > headroom && r.minAmountUsd !== undefined && headroom >= toMicros(r.minAmountUsd)) amount = headroom;
      const deniedBy = BUDGET_SCOPES.find((scope) => {
        const limit = limits[scope];
        return limit !== undefined && toMicros(spent[scope]) + amount > toMicros(limit);
      });
      const decidedBy = deniedBy ?? 'day';
      const amountUsd = fromMicros(amount);
      const inserted = await client.query<{ committed: string; limit: string }>(
        `INSERT INTO budget_reservations (id, day, intent_id, amount_usd, limit_usd, granted, committed_usd, agent_id, stage, denied_by,
                                          workflow_id, run_id, activity_id, activity_attempt)
         VALUES ($1, $2::date, $3, $4::numeric, $5::numeric, $6, $7::numeric, $8, $9, $10, $11, $12, $13, $14)
         RETURNING committed_usd::text AS committed, limit_usd::text AS limit`,
        [r.id, r.day, r.intentId, amountUsd, limits[decidedBy], deniedBy === undefined, spent[decidedBy], r.agentId ?? null, r.stage ?? null, deniedBy ?? null,
         r.activity?.workflowId ?? null, r.activity?.runId ?? null, r.activity?.activityId ?? null, r.activity?.attempt ?? null],
      );
      const made = inserted.rows[0]!;
      return reservationOf(deniedBy === undefined, made.committed, made.limit, deniedBy ?? null, amountUsd);
    });
  }

  /**
   * Settles a granted reservation at the call's real cost: at most the reserved amount, unless
   * `overrun` says the call could not be bounded before it ran and reported more (it is then
   * recorded at its real cost, marked as an overrun). With `call`, the call's cost row is written
   * in the same transaction (one per reservation), so the budgets and cost_events count the same
   * calls at the same amounts whatever crashes. A retry with the same amount is a no-op; a
   * different amount, or a released or denied reservation, is a LedgerError.
   */
  async settleReservation(id: string, actualUsd: string, options: { readonly overrun?: boolean; readonly call?: SettledCall } = {}): Promise<void> {
    ReservationIdSchema.parse(id);
    const actual = UsdSchema.parse(actualUsd);
    const call = options.call === undefined ? undefined : SettledCallSchema.parse(storable(options.call));
    const written = await this.transaction(async (client) => {
      const found = await client.query<{ granted: boolean; fits: boolean; amount: string }>(
        'SELECT granted, $2::numeric <= amount_usd AS fits, amount_usd::text AS amount FROM budget_reservations WHERE id = $1',
        [id, actual],
      );
      const reservation = found.rows[0];
      if (!reservation) throw new LedgerError(`there is no budget reservation ${id}`);
      if (!reservation.granted) throw new LedgerError(`budget reservation ${id} was denied; there is nothing to settle`);
      if (!reservation.fits && !options.overrun) throw new LedgerError(`cannot settle budget reservation ${id} at $${actual}: only $${reservation.amount} was reserved`);
      const inserted = await client.query(
        `INSERT INTO budget_settlements (reservation_id, kind, actual_usd, overrun) VALUES ($1, 'settled', $2, $3) ON CONFLICT (reservation_id) DO NOTHING`,
        [id, actual, !reservation.fits],
      );
      if (inserted.rowCount === 1) return call ? await insertSettledCost(client, id, actual, call, this.writer) : undefined;
      const earlier = await client.query<{ kind: string; actual: string; same: boolean }>(
        'SELECT kind, actual_usd::text AS actual, actual_usd = $2::numeric AS same FROM budget_settlements WHERE reservation_id = $1',
        [id, actual],
      );
      const settlement = earlier.rows[0]!;
      if (settlement.kind === 'settled' && settlement.same) return undefined;
      throw new LedgerError(
        settlement.kind === 'released'
          ? `budget reservation ${id} was released; it cannot be settled`
          : `budget reservation ${id} is already settled at $${settlement.actual}`,
      );
    });
    if (written) this.writer.observer?.cost(written);
  }

  /**
   * Granted reservations still open that were made before `before`: calls in flight, or calls
   * whose worker died before it could settle them.
   */
  async openReservations(before: Date): Promise<OpenReservation[]> {
    z.date().parse(before);
    const result = await this.pool.query<Record<string, unknown>>(
      `SELECT r.id, r.intent_id, r.amount_usd::text AS amount, r.created_at, r.agent_id, r.stage,
              r.workflow_id, r.run_id, r.activity_id, r.activity_attempt
         FROM budget_reservations r
        WHERE r.granted AND r.created_at < $1
          AND NOT EXISTS (SELECT 1 FROM budget_settlements s WHERE s.reservation_id = r.id)
        ORDER BY r.created_at, r.id`,
      [before],
    );
    return result.rows.map((r) => ({
      id: r.id as string,
      intentId: r.intent_id as string,
      amountUsd: normalizeUsd(r.amount as string),
      createdAt: r.created_at as Date,
      ...(r.agent_id !== null ? { agentId: r.agent_id as string } : {}),
      ...(r.stage !== null ? { stage: r.stage as string } : {}),
      ...(r.workflow_id !== null
        ? { activity: { workflowId: r.workflow_id as string, runId: r.run_id as string, activityId: r.activity_id as string, attempt: r.activity_attempt as number } }
        : {}),
    }));
  }

  /**
   * Each intent's spend in the budget tables (settled and reconciled reservations) beside its
   * cost_events total: the two agree to the cent when every paid call was counted once in both.
   * Every intent with a reservation or a cost row, or the one `intentId`.
   */
  async books(options: { readonly intentId?: string } = {}): Promise<IntentBooks[]> {
    const result = await this.pool.query<{ intent_id: string; budget: string; costs: string; open: number }>(
      `WITH budget AS (
         SELECT r.intent_id,
                coalesce(sum(s.actual_usd) FILTER (WHERE s.kind IN ('settled', 'reconciled')), 0) AS usd,
                count(*) FILTER (WHERE r.granted AND s.reservation_id IS NULL)::int AS open
           FROM budget_reservations r LEFT JOIN budget_settlements s ON s.reservation_id = r.id
          WHERE $1::text IS NULL OR r.intent_id = $1
          GROUP BY r.intent_id
       ), costs AS (
         SELECT intent_id, sum(usd) AS usd FROM cost_events WHERE $1::text IS NULL OR intent_id = $1 GROUP BY intent_id
       )
       SELECT coalesce(b.intent_id, c.intent_id) AS intent_id,
              round(coalesce(b.usd, 0), 6)::text AS budget, round(coalesce(c.usd, 0), 6)::text AS costs, coalesce(b.open, 0) AS open
         FROM budget b FULL JOIN costs c ON c.intent_id = b.intent_id
        ORDER BY 1`,
      [options.intentId ?? null],
    );
    return result.rows.map((r) => ({ intentId: r.intent_id, budgetUsd: normalizeUsd(r.budget), costEventsUsd: normalizeUsd(r.costs), openReservations: r.open }));
  }

  /** Cancels a granted, unsettled reservation. True if released now; false if it was already settled, released or denied. */
  async releaseReservation(id: string): Promise<boolean> {
    ReservationIdSchema.parse(id);
    const found = await this.pool.query<{ granted: boolean }>('SELECT granted FROM budget_reservations WHERE id = $1', [id]);
    if (!found.rows[0]) throw new LedgerError(`there is no budget reservation ${id}`);
    if (!found.rows[0].granted) return false;
    const inserted = await this.pool.query(
      `INSERT INTO budget_settlements (reservation_id, kind, actual_usd) VALUES ($1, 'released', 0) ON CONFLICT (reservation_id) DO NOTHING`,
      [id],
    );
    return inserted.rowCount === 1;
  }

  /** The day's settled spend and its still-open reservations. */
  async daySpend(day: string): Promise<{ settledUsd: string; reservedUsd: string }> {
    DaySchema.parse(day);
    const result = await this.pool.query<{ settled: string; reserved: string }>(
      `SELECT round(coalesce(sum(s.actual_usd) FILTER (WHERE s.kind IN ('settled', 'reconciled')), 0), 6)::text AS settled,
              round(coalesce(sum(r.amount_usd) FILTER (WHERE s.reservation_id IS NULL), 0), 6)::text AS reserved
         FROM budget_reservations r LEFT JOIN budget_settlements s ON s.reservation_id = r.id
        WHERE r.day = $1::date AND r.granted`,
      [day],
    );
    return { settledUsd: result.rows[0]!.settled, reservedUsd: result.rows[0]!.reserved };
  }

  /**
   * What each budget a call counts against has really spent (settled reservations only): the
   * day's, the agent's that day, the intent's and its stage's. Read after a settlement, to warn
   * as spend nears a limit.
   */
  async settledSpend(scope: { readonly day: string; readonly agentId: string; readonly intentId: string; readonly stage: string }): Promise<Record<BudgetScope, string>> {
    DaySchema.parse(scope.day);
    const result = await this.pool.query<Record<BudgetScope, string>>(
      `SELECT round(coalesce(sum(s.actual_usd) FILTER (WHERE r.day = $1::date), 0), 6)::text AS day,
              round(coalesce(sum(s.actual_usd) FILTER (WHERE r.day = $1::date AND r.agent_id = $2), 0), 6)::text AS agent,
              round(coalesce(sum(s.actual_usd) FILTER (WHERE r.intent_id = $3), 0), 6)::text AS intent,
              round(coalesce(sum(s.actual_usd) FILTER (WHERE r.intent_id = $3 AND r.stage = $4), 0), 6)::text AS stage
         FROM budget_reservations r JOIN budget_settlements s ON s.reservation_id = r.id AND s.kind <> 'released'
        WHERE r.granted AND (r.day = $1::date OR r.intent_id = $3)`,
      [scope.day, scope.agentId, scope.intentId, scope.stage],
    );
    return result.rows[0]!;
  }

  /**
   * Records one activity attempt (start, end, duration, outcome, spend). True if inserted; false
   * if this (workflow, run, activity, attempt) is already recorded: a repeated write is a no-op.
   */
  async recordActivityRun(input: ActivityRunInput): Promise<boolean> {
    const r = ActivityRunSchema.parse(storable(input));
    const result = await this.pool.query(
      `INSERT INTO activity_runs (workflow_id, run_id, activity_id, attempt, activity_type, task_queue, intent_id, stage,
                                  agent_id, model_id, started_at, ended_at, duration_ms, outcome, failure_type, spend_usd)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
       ON CONFLICT (workflow_id, run_id, activity_id, attempt) DO NOTHING`,
      [
        r.workflowId,
        r.runId,
        r.activityId,
        r.attempt,
        r.activityType,
        r.taskQueue,
        r.intentId ?? null,
        r.stage ?? null,
        r.agentId ?? null,
        r.modelId ?? null,
        r.startedAt,
        r.endedAt,
        r.endedAt.getTime() - r.startedAt.getTime(),
        r.outcome,
        r.failureType ?? null,
        r.spendUsd ?? null,
      ],
    );
    return result.rowCount === 1;
  }

  /** The activity attempts recorded for a workflow id (every run), in the order they started. */
  async activityRuns(workflowId: string): Promise<ActivityRun[]> {
    z.string().min(1).parse(workflowId);
    const result = await this.pool.query<{
      workflow_id: string; run_id: string; activity_id: string; attempt: number; activity_type: string; task_queue: string;
      intent_id: string | null; stage: string | null; agent_id: string | null; model_id: string | null; started_at: Date;
      ended_at: Date; duration_ms: number; outcome: ActivityOutcome; failure_type: string | null; spend_usd: string | null;
    }>(
      `SELECT workflow_id, run_id, activity_id, attempt, activity_type, task_queue, intent_id, stage, agent_id, model_id,
              started_at, ended_at, duration_ms, outcome, failure_type, spend_usd::text AS spend_usd
         FROM activity_runs WHERE workflow_id = $1
        ORDER BY started_at, run_id, activity_id COLLATE "C", attempt`,
      [workflowId],
    );
    return result.rows.map((row) => ({
      workflowId: row.workflow_id,
      runId: row.run_id,
      activityId: row.activity_id,
      attempt: row.attempt,
      activityType: row.activity_type,
      taskQueue: row.task_queue,
      ...(row.intent_id !== null && { intentId: row.intent_id }),
      ...(row.stage !== null && { stage: row.stage }),
      ...(row.agent_id !== null && { agentId: row.agent_id }),
      ...(row.model_id !== null && { modelId: row.model_id }),
      startedAt: row.started_at,
      endedAt: row.ended_at,
      durationMs: row.duration_ms,
      outcome: row.outcome,
      ...(row.failure_type !== null && { failureType: row.failure_type }),
      ...(row.spend_usd !== null && { spendUsd: row.spend_usd }),
    }));
  }

  /** What one agent (cost events' agent id) spent on a UTC day, across intents, exact. */
  async agentDaySpend(agentId: string, day: string): Promise<string> {
    z.string().min(1).parse(agentId);
    DaySchema.parse(day);
    const result = await this.pool.query<{ usd: string }>(
      `SELECT round(coalesce(sum(usd), 0), 6)::text AS usd FROM cost_events
        WHERE agent_id = $1 AND "timestamp" >= ($2::date)::timestamp AT TIME ZONE 'UTC'
          AND "timestamp" < ($2::date + 1)::timestamp AT TIME ZONE 'UTC'`,
      [agentId, day],
    );
    return result.rows[0]!.usd;
  }

  /** The global stop flag: its latest change decides. */
  async globalStop(): Promise<GlobalStop> {
    const result = await this.pool.query<{ active: boolean; set_by: string; reason: string; at: Date }>(
      `SELECT active, set_by, reason, at FROM controls WHERE control = 'global_stop' ORDER BY seq DESC LIMIT 1`,
    );
    const row = result.rows[0];
    return row ? { stopped: row.active, by: row.set_by, reason: row.reason, at: row.at } : { stopped: false };
  }

  /** Sets the global stop (appends to its history) and records the GLOBAL_STOP_SET event in the same transaction. */
  async setGlobalStop(by: string, reason: string): Promise<void> {
    await this.changeGlobalStop(true, ActorSchema.parse(by), ReasonSchema.parse(reason));
  }

  /** Clears the global stop (appends to its history) and records GLOBAL_STOP_CLEARED in the same transaction. */
  async clearGlobalStop(by: string, reason: string): Promise<void> {
    await this.changeGlobalStop(false, ActorSchema.parse(by), ReasonSchema.parse(reason));
  }

  /** Where an intent worked: the repository its INTENT_STARTED event names (undefined if unknown). */
  async intentRepoPath(intentId: string): Promise<string | undefined> {
    const { rows } = await this.pool.query<{ repo: string | null }>(
      `SELECT metadata->>'repoPath' AS repo FROM safety_events WHERE intent_id = $1 AND event_type = 'INTENT_STARTED' ORDER BY seq NULLS FIRST, "timestamp" LIMIT 1`,
      [intentId],
    );
    return rows[0]?.repo ?? undefined;
  }

  /** Every repository an intent started in (from INTENT_STARTED): where the sweeper looks for resume refs past their date. */
  async intentRepositories(): Promise<string[]> {
    const { rows } = await this.pool.query<{ repo: string }>(
      `SELECT DISTINCT metadata->>'repoPath' AS repo FROM safety_events WHERE event_type = 'INTENT_STARTED' AND metadata->>'repoPath' IS NOT NULL`,
    );
    return rows.map((row) => row.repo);
  }

  /**
   * A merged intent as the ledger knows it: where it worked (INTENT_STARTED) and the commit its
   * merge made (INTENT_MERGED); undefined when it never merged.
   */
  async mergedIntent(intentId: string): Promise<{ readonly repoPath: string; readonly baseBranch: string; readonly mergedCommit: string } | undefined> {
    const { rows } = await this.pool.query<{ repo: string | null; base: string | null; merged: string | null }>(
      `SELECT (SELECT metadata->>'repoPath' FROM safety_events WHERE intent_id = $1 AND event_type = 'INTENT_STARTED' ORDER BY seq DESC NULLS LAST, "timestamp" DESC LIMIT 1) AS repo,
              (SELECT metadata->>'baseBranch' FROM safety_events WHERE intent_id = $1 AND event_type = 'INTENT_STARTED' ORDER BY seq DESC NULLS LAST, "timestamp" DESC LIMIT 1) AS base,
              (SELECT metadata->>'mergedCommit' FROM safety_events WHERE intent_id = $1 AND event_type = 'INTENT_MERGED' ORDER BY seq DESC NULLS LAST, "timestamp" DESC LIMIT 1) AS merged`,
      [intentId],
    );
    const row = rows[0];
    return row?.repo && row.base && row.merged ? { repoPath: row.repo, baseBranch: row.base, mergedCommit: row.merged } : undefined;
  }

  /**
   * Everything the ledger holds about one intent (safety events, costs, gate decisions), in the
   * order the ledger received them (`seq`; rows from before it was numbered come first, by their
   * clocks); with `activities`, also each activity attempt the worker ran (`activity_runs`),
   * placed where it was written, at its end, with its start and outcome in the summary.
   */
  async timeline(intentId: string, opts: { activities?: boolean } = {}): Promise<TimelineEntry[]> {
    z.string().min(1).parse(intentId);
    const result = await this.pool.query<{ at: Date; kind: TimelineEntry['kind']; type: string; stage: string | null; summary: string; severity: Severity | null; usd: string | null }>(
      `SELECT at, kind, type, stage, summary, severity, usd FROM (
         SELECT seq, "timestamp" AS at, 'safety' AS kind, 0 AS kind_order, event_type AS type, stage, reason AS summary,
                severity, NULL::text AS usd, recorded_at, id::text AS id
           FROM safety_events WHERE intent_id = $1
         UNION ALL
         SELECT seq, "timestamp", 'cost', 1, 'COST', stage,
                agent_id || ' / ' || model_id || ', attempt ' || attempt || ': ' || input_tokens || ' input + ' || output_tokens || ' output tokens',
                NULL, usd::text, recorded_at, id::text
           FROM cost_events WHERE intent_id = $1
         UNION ALL
         SELECT seq, decided_at, 'gate', 2, 'GATE_DECISION', NULL,
                gate || ' gate: ' || decision || ' by ' || decided_by
                  || CASE WHEN signed THEN ' (signed)' WHEN NOT signed THEN ' (unsigned)' ELSE '' END
                  || CASE WHEN timed_out THEN ' (timed out)' ELSE '' END
                  || coalesce(': ' || reason, '')
                  || CASE WHEN jsonb_array_length(conditions) > 0
                          THEN '; conditions: ' || (SELECT string_agg(c, '; ') FROM jsonb_array_elements_text(conditions) AS c)
                          ELSE '' END,
                NULL, NULL, recorded_at, id::text
           FROM gate_decisions WHERE intent_id = $1
         UNION ALL
         SELECT seq, ended_at, 'activity', 3, activity_type, stage,
                'attempt ' || attempt || ' ' || outcome || coalesce(' (' || failure_type || ')', '')
                  || ' after ' || round(duration_ms / 1000.0, 1) || ' s, started ' || to_char(started_at AT TIME ZONE 'UTC', 'HH24:MI:SS.MS')
                  || ' (run ' || left(run_id, 8) || ', activity ' || activity_id || ')',
                NULL, spend_usd::text, recorded_at,
                run_id || '/' || activity_id || '/' || attempt
           FROM activity_runs WHERE $2 AND (workflow_id = $3 OR intent_id = $1)
       ) AS entries
       ORDER BY seq NULLS FIRST, at, recorded_at, kind_order, id`,
      [intentId, opts.activities === true, workflowIdForIntent(intentId)],
    );
    return result.rows.map((row) => ({
      at: row.at,
      kind: row.kind,
      type: row.type,
      ...(row.stage !== null && { stage: row.stage }),
      summary: row.summary,
      ...(row.severity !== null && { severity: row.severity }),
      ...(row.usd !== null && { usd: row.usd }),
    }));
  }

  /**
   * Spend grouped by intent, stage, model, agent or day (UTC), summed in SQL so every total is
   * exact. Rows are ordered by spend, largest first (by date for `day`).
   */
  async costs(opts: { since?: Date; by: CostGrouping }): Promise<{ rows: CostRow[]; totalUsd: string }> {
    const by = CostGroupingSchema.parse(opts.by);
    const since = z.date().optional().parse(opts.since);
    const key = GROUP_KEY[by];
    // Byte order, so the answer does not depend on the server's collation.
    const order = by === 'day' ? `${key} COLLATE "C"` : `sum(usd) DESC, ${key} COLLATE "C"`;
    const result = await this.pool.query<{ key: string; usd: string; input: string; output: string; calls: number; total: string }>(
      `SELECT ${key} AS key, round(sum(usd), 6)::text AS usd, sum(input_tokens)::text AS input, sum(output_tokens)::text AS output,
              count(*)::int AS calls, round(sum(sum(usd)) OVER (), 6)::text AS total
         FROM cost_events
        WHERE $1::timestamptz IS NULL OR "timestamp" >= $1::timestamptz
        GROUP BY 1
        ORDER BY ${order}`,
      [since ?? null],
    );
    return {
      rows: result.rows.map((row) => ({ key: row.key, usd: row.usd, inputTokens: Number(row.input), outputTokens: Number(row.output), calls: row.calls })),
      totalUsd: result.rows[0]?.total ?? ZERO_USD,
    };
  }
  /** One intent as the ledger records it, for `warden status` (see intent-record.ts). */
  intentRecord(intentId: string): Promise<IntentRecord> {
    return readIntentRecord(this.pool, z.string().min(1).parse(intentId));
  }

  /** The daily health report for a UTC day (see dailyReport in daily-report.ts). */
  dailyReport(opts: { date: string; dayBudgetUsd?: string }): Promise<DailyReport> {
    return dailyReport(this.pool, opts);
  }

  /**
   * Retention: deletes rows older than `retentionDays` (before `now` minus the retention), the
   * only DELETE path (the tables' triggers refuse any other). Never deletes an unsettled
   * reservation, nor the latest state of a control or of a ladder scope. Returns rows deleted per table.
   */
  async cleanup(retentionDays: number, now: Date = new Date()): Promise<Record<string, number>> {
    z.number().positive().finite().parse(retentionDays);
    z.date().parse(now);
    const cutoff = new Date(now.getTime() - retentionDays * 86_400_000);
    return this.transaction(async (client) => {
      await client.query(`SET LOCAL warden.retention_cleanup = 'on'`);
      // What leaves the hash chains (whole batches from each chain's start) is summarised in them
      // first, so they still verify; rows from before the chains go by their time alone.
      const chained = await retentionCut(client, cutoff, now, randomUUID());
      const deleted: Record<string, number> = {};
      for (const [table, column] of [['safety_events', '"timestamp"'], ['cost_events', '"timestamp"'], ['gate_decisions', 'decided_at']] as const) {
        deleted[table] = (await client.query(`DELETE FROM ${table} WHERE id = ANY($1::uuid[]) OR (chain_pos IS NULL AND ${column} < $2)`, [chained[table], cutoff])).rowCount ?? 0;
      }
      const simple: Array<[table: string, column: string]> = [
        ['model_calls', '"timestamp"'],
        ['activity_runs', 'ended_at'],
        ['notification_dispatches', 'at'],
        ['notification_dead_letters', 'at'],
        ['decision_links', 'used_at'],
        ['gate_view_links', 'made_at'],
      ];
      for (const [table, column] of simple) {
        deleted[table] = (await client.query(`DELETE FROM ${table} WHERE ${column} < $1`, [cutoff])).rowCount ?? 0;
      }
      // One statement, so "settled" is judged before the settlement rows go.
      const budget = await client.query<{ reservations: number; settlements: number }>(
        `WITH old AS (
           SELECT r.id FROM budget_reservations r
            WHERE r.created_at < $1 AND (NOT r.granted OR EXISTS (SELECT 1 FROM budget_settlements s WHERE s.reservation_id = r.id))
         ), settlements AS (
           DELETE FROM budget_settlements s USING old WHERE s.reservation_id = old.id RETURNING 1
         ), reservations AS (
           DELETE FROM budget_reservations r USING old WHERE r.id = old.id RETURNING 1
         )
         SELECT (SELECT count(*) FROM reservations)::int AS reservations, (SELECT count(*) FROM settlements)::int AS settlements`,
        [cutoff],
      );
      deleted.budget_reservations = budget.rows[0]!.reservations;
      deleted.budget_settlements = budget.rows[0]!.settlements;
      deleted.controls =
        (
          await client.query(
            `DELETE FROM controls c WHERE c.at < $1 AND EXISTS (SELECT 1 FROM controls n WHERE n.control = c.control AND n.seq > c.seq)`,
            [cutoff],
          )
        ).rowCount ?? 0;
      deleted.ladder_metrics =
        (
          await client.query(
            `DELETE FROM ladder_metrics m WHERE m.recorded_at < $1
                AND EXISTS (SELECT 1 FROM ladder_metrics n WHERE n.scope = m.scope AND (n.recorded_at, n.id) > (m.recorded_at, m.id))`,
            [cutoff],
          )
        ).rowCount ?? 0;
      return deleted;
    });
  }

  private async changeGlobalStop(active: boolean, by: string, reason: string): Promise<void> {
    await this.transaction(async (client) => {
      const row = await client.query<{ seq: string; at: Date }>(
        `INSERT INTO controls (control, active, set_by, reason) VALUES ('global_stop', $1, $2, $3) RETURNING seq::text, at`,
        [active, by, reason],
      );
      const { seq, at } = row.rows[0]!;
      const event = SafetyEventSchema.parse({
        id: randomUUID(),
        timestamp: at,
        eventType: active ? 'GLOBAL_STOP_SET' : 'GLOBAL_STOP_CLEARED',
        severity: active ? 'critical' : 'info',
        reason: `${active ? 'global stop set' : 'global stop cleared'} by ${by}: ${reason}`,
        metadata: { control: 'global_stop', seq: Number(seq), by },
      });
      await this.writer.write(client, [safetyEventRow(event)]);
    });
  }

  private async transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return inTransaction(this.pool, fn);
  }
}

function reservationOf(granted: boolean, committedUsd: string, limitUsd: string, deniedBy: BudgetScope | null, amountUsd: string): BudgetReservation {
  return { granted, committedUsd, limitUsd, amountUsd: normalizeUsd(amountUsd), ...(deniedBy !== null && { deniedBy }) };
}

/** The cost row of a settled call, keyed by its reservation: a repeated settlement writes none. */
async function insertSettledCost(client: pg.PoolClient, reservationId: string, usd: string, call: SettledCall, writer: LedgerWriter): Promise<CostEventInput | undefined> {
  const c = SettledCallSchema.parse(call);
  const row: CostEventInput = { id: deterministicUuid('settled-cost', reservationId), usd, ...c };
  const inserted = await writer.write(client, [costRow({ ...c, id: row.id, usd, reservationId })]);
  return inserted.length === 1 ? row : undefined;
}

/**
 * How far apart the budget tables and cost_events are, summed over intents, in whole cents
 * (each intent's difference rounded half up): 0 when the books balance.
 */
export function booksDifferenceCents(books: readonly IntentBooks[]): number {
  let cents = 0n;
  for (const b of books) {
    const micros = toMicros(b.budgetUsd) - toMicros(b.costEventsUsd);
    cents += ((micros < 0n ? -micros : micros) + 5_000n) / 10_000n;
  }
  return Number(cents);
}
