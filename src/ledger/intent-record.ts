import type pg from 'pg';
import { normalizeUsd } from '../shared/money';
import type { SafetyEventType } from '../shared/safety-events';

/**
 * One intent as the ledger records it, for `warden status`: what it spent, how far each stage
 * got, its tests, the decisions at its gates, the gate it waits at, and how it ended with where
 * its lineage went. Read from the ledger alone, so it needs neither a worker nor the workflow's
 * history, and it is there for an intent that failed or was stopped as much as for a merged one.
 */
export interface IntentRecord {
  /** Its INTENT_STARTED; undefined when the ledger has nothing of the intent. */
  readonly started?: { readonly at: Date; readonly goal: string };
  /** What its agent calls cost, exactly (cost_events), and how many there were. */
  readonly spendUsd: string;
  readonly calls: number;
  /** Per stage, the attempt it last started. */
  readonly attempts: Readonly<Record<string, number>>;
  /** The stage it last started. */
  readonly stage?: string;
  readonly tests: readonly RecordedTests[];
  readonly decisions: readonly LedgerDecision[];
  readonly refusedDecisions: readonly LedgerRefusal[];
  /** What its agent-written code was seen trying in the sandbox (ESCAPE_ATTEMPTED, ANSWER_REDACTED), oldest first. */
  readonly sandboxAttempts: readonly RecordedAttempt[];
  /** Each review of its lld and spec by another model (DESIGN_REVIEWED), oldest first. */
  readonly designReviews: readonly RecordedDesignReview[];
  /** Its pull request on the team's forge (`merge.via: pull-request`), as last opened, updated, merged or closed. */
  readonly pullRequest?: RecordedPullRequest;
  /** The gate it was last asked at, when no decision has closed it and the intent has not ended since. */
  readonly openGate?: { readonly gate: string; readonly requestedAt: string; readonly prompt: string };
  /** How it ended, when the ledger says so and no stage has started since (a resume). */
  readonly ending?: IntentEnding;
}

export interface RecordedPullRequest {
  readonly url: string;
  readonly state: 'open' | 'merged' | 'closed';
  /** The latest PULL_REQUEST_* row's reason. */
  readonly last: string;
}

export interface RecordedTests {
  readonly attempt?: number;
  readonly passed: boolean;
  /** The TESTS_PASSED / TESTS_FAILED row's reason, e.g. `impl attempt 1: tests failed (…)`. */
  readonly summary: string;
}

/** A gate decision as the ledger holds it (gate_decisions, and whether its GATE_DECIDED says it was signed). */
export interface LedgerDecision {
  readonly gate: string;
  readonly decision: string;
  readonly by: string;
  readonly reason?: string;
  readonly conditions?: readonly string[];
  /** ISO time the workflow accepted it. */
  readonly at: string;
  readonly timedOut: boolean;
  /** Unknown (undefined) for decisions written before the ledger numbered its rows. */
  readonly signed?: boolean;
}

/** A decision the workflow refused (DECISION_REFUSED); gate and sender as the refused payload claimed them. */
export interface LedgerRefusal {
  readonly at: string;
  readonly gate?: string;
  readonly by?: string;
  readonly reason: string;
}

/** One ESCAPE_ATTEMPTED or ANSWER_REDACTED row. */
export interface RecordedDesignReview {
  readonly stage?: string;
  readonly verdict: string;
  /** The DESIGN_REVIEWED row's first line, e.g. `lld attempt 1 reviewed by gpt (gpt-4.1): BLOCK — …`. */
  readonly summary: string;
}

export interface RecordedAttempt {
  readonly at: string;
  readonly stage?: string;
  readonly reason: string;
}

export interface IntentEnding {
  readonly type: (typeof ENDINGS)[number];
  readonly at: Date;
  readonly stage?: string;
  /** The error of a failed intent, the reason of a rejected one, else its status. */
  readonly reason: string;
  /** Where its lineage was kept (the ending's lineagePath, or the sweep's lineageCopy). */
  readonly lineagePath?: string;
  /** The repository's ref that holds the lineage (`refs/warden/lineage/<id>`), when one was written. */
  readonly lineageRef?: string;
  readonly mergedCommit?: string;
  /** For INTENT_SWEPT: how the workflow ended (TERMINATED, TIMED_OUT). */
  readonly workflowStatus?: string;
}

/** The events that end an intent: its own ending, or the sweep after a workflow that never ran its cleanup. */
const ENDINGS = ['INTENT_MERGED', 'INTENT_REJECTED', 'INTENT_FAILED', 'INTENT_CANCELLED', 'INTENT_TERMINATED', 'INTENT_SWEPT'] as const satisfies readonly SafetyEventType[];

const READ_EVENTS: readonly SafetyEventType[] = ['INTENT_STARTED', 'STAGE_STARTED', 'TESTS_PASSED', 'TESTS_FAILED', 'GATE_REQUESTED', 'GATE_DECIDED', 'DECISION_REFUSED', 'ESCAPE_ATTEMPTED', 'ANSWER_REDACTED', 'DESIGN_REVIEWED', 'PULL_REQUEST_OPENED', 'PULL_REQUEST_UPDATED', 'PULL_REQUEST_MERGED', 'PULL_REQUEST_CLOSED', ...ENDINGS];

interface EventRow {
  readonly seq: string | null;
  readonly event_type: SafetyEventType;
  readonly timestamp: Date;
  readonly stage: string | null;
  readonly reason: string;
  readonly metadata: Record<string, unknown>;
}

interface DecisionRow {
  readonly seq: string | null;
  readonly gate: string;
  readonly decision: string;
  readonly decided_by: string;
  readonly reason: string | null;
  readonly conditions: string[];
  readonly requested_at: Date;
  readonly decided_at: Date;
  readonly timed_out: boolean;
  /** NULL for the ladder's and a timeout's decisions, and rows from before the column. */
  readonly signed: boolean | null;
}

/** Rows in the order the ledger received them; those from before it numbered them first, by their clocks. */
const LEDGER_ORDER = 'seq NULLS FIRST, "timestamp", recorded_at, id';

export async function readIntentRecord(pool: pg.Pool, intentId: string): Promise<IntentRecord> {
  const [events, decisionRows, costs] = await Promise.all([
    pool.query<EventRow>(`SELECT seq, event_type, "timestamp", stage, reason, metadata FROM safety_events WHERE intent_id = $1 AND event_type = ANY($2) ORDER BY ${LEDGER_ORDER}`, [intentId, READ_EVENTS]),
    pool.query<DecisionRow>(
      `SELECT seq, gate, decision, decided_by, reason, conditions, requested_at, decided_at, timed_out, signed FROM gate_decisions
        WHERE intent_id = $1 ORDER BY seq NULLS FIRST, decided_at, recorded_at, id`,
      [intentId],
    ),
    pool.query<{ usd: string; calls: number }>('SELECT coalesce(sum(usd), 0)::text AS usd, count(*)::int AS calls FROM cost_events WHERE intent_id = $1', [intentId]),
  ]);
  const decided = events.rows.filter((e) => e.event_type === 'GATE_DECIDED');
  const decisions = decisionRows.rows.map((row) => ledgerDecision(row, decided));
  let started: IntentRecord['started'];
  const attempts: Record<string, number> = {};
  let stage: string | undefined;
  const tests: RecordedTests[] = [];
  const refusedDecisions: LedgerRefusal[] = [];
  const sandboxAttempts: RecordedAttempt[] = [];
  const designReviews: RecordedDesignReview[] = [];
  let request: EventRow | undefined;
  let pullRequest: RecordedPullRequest | undefined;
  let ending: IntentEnding | undefined;
  for (const event of events.rows) {
    const { metadata } = event;
    switch (event.event_type) {
      case 'INTENT_STARTED':
        started ??= { at: event.timestamp, goal: event.reason };
        break;
      case 'STAGE_STARTED':
        stage = event.stage ?? stage;
        if (event.stage && typeof metadata.attempt === 'number') attempts[event.stage] = metadata.attempt;
        // A stage after an ending is a resume: that ending is no longer how the intent stands.
        ending = undefined;
        break;
      case 'TESTS_PASSED':
      case 'TESTS_FAILED':
        tests.push({ ...(typeof metadata.attempt === 'number' ? { attempt: metadata.attempt } : {}), passed: event.event_type === 'TESTS_PASSED', summary: event.reason });
        break;
      case 'GATE_REQUESTED':
        request = event;
        break;
      case 'DECISION_REFUSED':
        refusedDecisions.push({ at: event.timestamp.toISOString(), ...claimedBy(metadata.payload), reason: event.reason });
        break;
      case 'GATE_DECIDED':
        break;
      case 'DESIGN_REVIEWED':
        designReviews.push({ ...(event.stage ? { stage: event.stage } : {}), verdict: String(metadata.verdict), summary: event.reason.split('\n')[0]! });
        break;
      case 'PULL_REQUEST_OPENED':
      case 'PULL_REQUEST_UPDATED':
      case 'PULL_REQUEST_MERGED':
      case 'PULL_REQUEST_CLOSED': {
        const url = typeof metadata.url === 'string' ? metadata.url : pullRequest?.url;
        const state = event.event_type === 'PULL_REQUEST_MERGED' ? 'merged' : event.event_type === 'PULL_REQUEST_CLOSED' ? 'closed' : 'open';
        if (url) pullRequest = { url, state, last: event.reason.split('\n')[0]! };
        break;
      }
      case 'ESCAPE_ATTEMPTED':
      case 'ANSWER_REDACTED':
        sandboxAttempts.push({ at: event.timestamp.toISOString(), ...(event.stage ? { stage: event.stage } : {}), reason: event.reason });
        break;
      default:
        ending = intentEnding(event);
        request = undefined;
    }
  }
  return {
    ...(started ? { started } : {}),
    spendUsd: normalizeUsd(costs.rows[0]!.usd),
    calls: costs.rows[0]!.calls,
    attempts,
    ...(stage ? { stage } : {}),
    tests,
    decisions,
    refusedDecisions,
    sandboxAttempts,
    designReviews,
    ...(pullRequest ? { pullRequest } : {}),
    ...(request && !closedBy(request, decisionRows.rows) ? { openGate: { gate: String(request.metadata.gate), requestedAt: String(request.metadata.requestedAt), prompt: request.reason } } : {}),
    ...(ending ? { ending } : {}),
  };
}

/**
 * The decision, and whether it was signed: the workflow writes each decision's GATE_DECIDED
 * right after it, so it is the first one of that gate, decision and approver numbered after it.
 */
function ledgerDecision(row: DecisionRow, decided: readonly EventRow[]): LedgerDecision {
  const event =
    row.seq === null
      ? undefined
      : decided.find((e) => e.seq !== null && Number(e.seq) > Number(row.seq) && e.metadata.gate === row.gate && e.metadata.decision === row.decision && e.metadata.by === row.decided_by);
  return {
    gate: row.gate,
    decision: row.decision,
    by: row.decided_by,
    ...(row.reason !== null ? { reason: row.reason } : {}),
    ...(row.conditions.length > 0 ? { conditions: row.conditions } : {}),
    at: row.decided_at.toISOString(),
    timedOut: row.timed_out,
    ...(row.signed !== null ? { signed: row.signed } : event ? { signed: event.metadata.signed === true } : {}),
  };
}

/** Whether a decision other than a defer answered this opening of the gate. */
function closedBy(request: EventRow, decisions: readonly DecisionRow[]): boolean {
  const requestedAt = Date.parse(String(request.metadata.requestedAt));
  return decisions.some((d) => d.gate === request.metadata.gate && d.decision !== 'defer' && d.requested_at.getTime() === requestedAt);
}

function intentEnding(event: EventRow): IntentEnding {
  const { metadata } = event;
  const lineagePath = metadata.lineagePath ?? metadata.lineageCopy;
  return {
    type: event.event_type as IntentEnding['type'],
    at: event.timestamp,
    ...(event.stage ? { stage: event.stage } : {}),
    reason: event.reason,
    ...(typeof lineagePath === 'string' ? { lineagePath } : {}),
    ...(typeof metadata.lineageRef === 'string' ? { lineageRef: metadata.lineageRef } : {}),
    ...(typeof metadata.mergedCommit === 'string' ? { mergedCommit: metadata.mergedCommit } : {}),
    ...(typeof metadata.workflowStatus === 'string' ? { workflowStatus: metadata.workflowStatus } : {}),
  };
}

/** The gate and sender a refused payload named (it is recorded as JSON, cut at 500 characters). */
function claimedBy(payload: unknown): { gate?: string; by?: string } {
  try {
    const claimed = JSON.parse(String(payload)) as Record<string, unknown>;
    return {
      ...(typeof claimed.gate === 'string' ? { gate: claimed.gate } : {}),
      ...(typeof claimed.by === 'string' ? { by: claimed.by } : {}),
    };
  } catch {
    return {};
  }
}
