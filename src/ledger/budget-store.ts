import type pg from 'pg';
import { z } from 'zod';
import { storable } from './storable';
import { deterministicUuid } from './event-id';
import { inTransaction } from './transaction';
import { inBatchedTransaction, type Statement } from './batched-transaction';
import { costRow } from './chained-rows';
import type { LedgerWriter } from './ledger-writer';
import { LedgerError } from './ledger-error';
import {
  BUDGET_SCOPES,
  BudgetReservationRequestSchema,
  DaySchema,
  SettledCallSchema,
  UsdSchema,
  type BudgetReservation,
  type BudgetReservationRequest,
  type BudgetScope,
  type CostEventInput,
  type IntentBooks,
  type OpenReservation,
  type SettledCall,
} from './types';
import { fromMicros, normalizeUsd, toMicros } from '../shared/money';

/** pg_advisory_xact_lock class for per-day budget reservations ('WBDG'); the object is the day. */
const BUDGET_LOCK_CLASS = 0x57424447;
/** pg_advisory_xact_lock class for an intent's budget reservations ('WBIN'); the object is a hash of the intent id. */
const INTENT_BUDGET_LOCK_CLASS = 0x5742494e;
const ReservationIdSchema = z.string().min(1).max(200);
/** A reservation's settlement, if any, and whether it was at `$2`. */
const EARLIER_SETTLEMENT = 'SELECT kind, actual_usd::text AS actual, actual_usd = $2::numeric AS same FROM budget_settlements WHERE reservation_id = $1';
interface SettlementRow {
  readonly kind: string;
  readonly actual: string;
  readonly same: boolean;
}

/**
 * The budget in the ledger: reservations of paid calls against the day's, an agent's, an
 * intent's and a stage's budgets, their settlement (with the call's cost row, through the
 * writer), release and reconciliation, and the spend and books read from them. Money is exact
 * (NUMERIC in SQL, decimal strings in TypeScript).
 */
export class BudgetStore {
  constructor(
    private readonly pool: pg.Pool,
    private readonly writer: LedgerWriter,
  ) {}

  /**
   * Reserves a paid call's maximum cost against every budget it counts in, atomically: the day's
   * (`limitUsd`), the agent's day budget, the intent's budget and its stage's budget within the
   * intent (each only when given). Reservations of the same day, and of the same intent, are
   * serialised by advisory locks; a budget's committed amount is its settled spend plus open
   * reservations, and the call is granted only if every budget stays within its limit with it.
   * Denials are recorded too, so a retry with the same id gets the same answer and never
   * reserves twice.
   */
  async reserve(request: BudgetReservationRequest): Promise<BudgetReservation> {
    const r = BudgetReservationRequestSchema.parse(request);
    // BEGIN, the locks and both reads go in one round trip, the decision's row and COMMIT in another.
    return inBatchedTransaction(this.pool, async (tx) => {
      const [, , previous, committed] = await tx.open([
        // Always the day first, then the intent: two reservations never wait on each other in a cycle.
        { text: `SELECT pg_advisory_xact_lock($1, $2::date - '1970-01-01'::date)`, values: [BUDGET_LOCK_CLASS, r.day] },
        { text: `SELECT pg_advisory_xact_lock($1, hashtext($2))`, values: [INTENT_BUDGET_LOCK_CLASS, r.intentId] },
        // A shrinkable request may have been granted less than it asked: the same request still.
        {
          text: `SELECT granted, committed_usd::text AS committed, limit_usd::text AS limit, denied_by, amount_usd::text AS amount,
                        (day = $2::date AND intent_id = $3
                         AND (amount_usd = $4::numeric OR ($7::numeric IS NOT NULL AND amount_usd BETWEEN $7::numeric AND $4::numeric))
                         AND agent_id IS NOT DISTINCT FROM $5::text AND stage IS NOT DISTINCT FROM $6::text) AS same
                   FROM budget_reservations WHERE id = $1`,
          values: [r.id, r.day, r.intentId, r.amountUsd, r.agentId, r.stage, r.minAmountUsd],
        },
        // What each budget has committed: settled spend (real cost, overruns included) plus open reservations.
        // Each statement of the batch reads after the locks are held, with a snapshot of its own.
        {
          text: `SELECT round(coalesce(sum(u.usd) FILTER (WHERE r.day = $1::date), 0), 6)::text AS day,
                        round(coalesce(sum(u.usd) FILTER (WHERE r.day = $1::date AND r.agent_id = $3::text), 0), 6)::text AS agent,
                        round(coalesce(sum(u.usd) FILTER (WHERE r.intent_id = $2), 0), 6)::text AS intent,
                        round(coalesce(sum(u.usd) FILTER (WHERE r.intent_id = $2 AND r.stage = $4::text), 0), 6)::text AS stage
                   FROM budget_reservations r
                   LEFT JOIN budget_settlements s ON s.reservation_id = r.id
                   CROSS JOIN LATERAL (SELECT coalesce(s.actual_usd, r.amount_usd) AS usd) u
                  WHERE r.granted AND (r.day = $1::date OR r.intent_id = $2)`,
          values: [r.day, r.intentId, r.agentId, r.stage],
        },
      ]);
      const row = previous!.rows[0] as { granted: boolean; committed: string; limit: string; denied_by: BudgetScope | null; amount: string; same: boolean } | undefined;
      if (row) {
        if (!row.same) throw new LedgerError(`budget reservation ${r.id} already exists for a different day, intent, agent, stage or amount`);
        return reservationOf(row.granted, row.committed, row.limit, row.denied_by, row.amount);
      }
      const spent = committed!.rows[0] as Record<BudgetScope, string>;
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
      const [inserted] = await tx.commit([
        {
          text: `INSERT INTO budget_reservations (id, day, intent_id, amount_usd, limit_usd, granted, committed_usd, agent_id, stage, denied_by,
                                                  workflow_id, run_id, activity_id, activity_attempt)
                 VALUES ($1, $2::date, $3, $4::numeric, $5::numeric, $6, $7::numeric, $8, $9, $10, $11, $12, $13, $14)
                 RETURNING committed_usd::text AS committed, limit_usd::text AS limit`,
          values: [r.id, r.day, r.intentId, amountUsd, limits[decidedBy], deniedBy === undefined, spent[decidedBy], r.agentId, r.stage, deniedBy,
            r.activity?.workflowId, r.activity?.runId, r.activity?.activityId, r.activity?.attempt],
        },
      ]);
      const made = inserted!.rows[0] as { committed: string; limit: string };
      return reservationOf(deniedBy === undefined, made.committed, made.limit, deniedBy ?? null, amountUsd);
    });
  }

  /**
   * Settles a granted reservation at the call's real cost: at most the reserved amount, unless
   * `overrun` says the call could not be bounded before it ran and reported more (it is then
   * recorded at its real cost, marked as an overrun). With `call`, the call's cost row is written
   * in the same transaction (one per reservation), so the budgets and cost_events count the same
   * calls at the same amounts whatever crashes. A retry with the same amount is a no-op; a
   * different amount, or a released or denied reservation, is a LedgerError. With `spendOf`,
   * returns what those budgets have really spent (settled reservations only) once this
   * settlement counts, read in the same transaction: to warn as spend nears a limit.
   */
  async settle(
    id: string,
    actualUsd: string,
    options: { readonly overrun?: boolean; readonly call?: SettledCall; readonly spendOf?: SpendScope } = {},
  ): Promise<Record<BudgetScope, string> | undefined> {
    ReservationIdSchema.parse(id);
    const actual = UsdSchema.parse(actualUsd);
    const call = options.call === undefined ? undefined : SettledCallSchema.parse(storable(options.call));
    const spend = options.spendOf === undefined ? undefined : settledSpendOf(options.spendOf);
    // BEGIN, the reservation, an earlier settlement and the guarded insert in one round trip; the
    // cost row (when this call settled it) on its own; the spend read and COMMIT in a third.
    const { written, spent } = await inBatchedTransaction(this.pool, async (tx) => {
      const commit = async (written?: CostEventInput) => {
        const [read] = await tx.commit(spend ? [spend] : []);
        return { written, spent: read?.rows[0] as Record<BudgetScope, string> | undefined };
      };
      const [found, earlier, inserted] = await tx.open([
        { text: 'SELECT granted, $2::numeric <= amount_usd AS fits, amount_usd::text AS amount FROM budget_reservations WHERE id = $1', values: [id, actual] },
        { text: EARLIER_SETTLEMENT, values: [id, actual] },
        // Inserts only what the checks below allow; when they refuse, the rollback undoes nothing.
        {
          text: `INSERT INTO budget_settlements (reservation_id, kind, actual_usd, overrun)
                 SELECT id, 'settled', $2::numeric, NOT ($2::numeric <= amount_usd) FROM budget_reservations
                  WHERE id = $1 AND granted AND ($2::numeric <= amount_usd OR $3::boolean)
                 ON CONFLICT (reservation_id) DO NOTHING`,
          values: [id, actual, options.overrun === true],
        },
      ]);
      const reservation = found!.rows[0] as { granted: boolean; fits: boolean; amount: string } | undefined;
      if (!reservation) throw new LedgerError(`there is no budget reservation ${id}`);
      if (!reservation.granted) throw new LedgerError(`budget reservation ${id} was denied; there is nothing to settle`);
      if (!reservation.fits && !options.overrun) throw new LedgerError(`cannot settle budget reservation ${id} at $${actual}: only $${reservation.amount} was reserved`);
      if (inserted!.rowCount === 1) return commit(call ? await insertSettledCost(tx.client, id, actual, call, this.writer) : undefined);
      // Another settlement of the same reservation that committed after the batch's read is read now.
      const settlement = ((earlier!.rows[0] as SettlementRow | undefined) ??
        (await tx.client.query<SettlementRow>(EARLIER_SETTLEMENT, [id, actual])).rows[0])!;
      if (settlement.kind === 'settled' && settlement.same) return commit();
      throw new LedgerError(
        settlement.kind === 'released'
          ? `budget reservation ${id} was released; it cannot be settled`
          : `budget reservation ${id} is already settled at $${settlement.actual}`,
      );
    });
    if (written) this.writer.observer?.cost(written);
    return spent;
  }

  /** Cancels a granted, unsettled reservation. True if released now; false if it was already settled, released or denied. */
  async release(id: string): Promise<boolean> {
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

  /**
   * Closes every granted reservation still open that was made before `olderThan` and names no
   * activity (made before activities were recorded), at its maximum, with a cost row at that
   * amount: a call whose worker died before it could settle (it may have been billed). Safe to
   * run from several workers at once: each reservation is closed once. Returns what it closed.
   * Reservations that name their activity are released once Temporal says it no longer runs
   * (see src/workers/stale-reservations.ts).
   */
  async reconcileStale(olderThan: Date): Promise<Array<{ readonly id: string; readonly intentId: string; readonly amountUsd: string }>> {
    z.date().parse(olderThan);
    return inTransaction(this.pool, async (client) => {
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
}

/** The budgets one call counts against: the day's, its agent's that day, its intent's and its stage's. */
export interface SpendScope {
  readonly day: string;
  readonly agentId: string;
  readonly intentId: string;
  readonly stage: string;
}

/** What `scope`'s budgets have really spent (settled reservations only). */
function settledSpendOf(scope: SpendScope): Statement {
  DaySchema.parse(scope.day);
  return {
    text: `SELECT round(coalesce(sum(s.actual_usd) FILTER (WHERE r.day = $1::date), 0), 6)::text AS day,
                  round(coalesce(sum(s.actual_usd) FILTER (WHERE r.day = $1::date AND r.agent_id = $2), 0), 6)::text AS agent,
                  round(coalesce(sum(s.actual_usd) FILTER (WHERE r.intent_id = $3), 0), 6)::text AS intent,
                  round(coalesce(sum(s.actual_usd) FILTER (WHERE r.intent_id = $3 AND r.stage = $4), 0), 6)::text AS stage
             FROM budget_reservations r JOIN budget_settlements s ON s.reservation_id = r.id AND s.kind <> 'released'
            WHERE r.granted AND (r.day = $1::date OR r.intent_id = $3)`,
    values: [scope.day, scope.agentId, scope.intentId, scope.stage],
  };
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
