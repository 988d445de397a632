import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import type pg from 'pg';
import type { ChainMark } from '../ledger/chain';
import { workflowIdForIntent } from '../shared/ids';
import { ANCHOR_WORKFLOW_TYPE } from '../workers/anchor-schedule';
import type { LedgerAnchor } from '../workflows/ledger-anchor-workflow';

/*
 * What the Temporal server keeps that the ledger's database owner does not control alone: the
 * anchors (chain heads in the anchor workflows' results) and the decisions each intent's workflow
 * received. `warden ledger verify` holds the ledger against both.
 */

/** Every anchor of `ledger` (see ledgerIdentity) the server still keeps (from `since` on), oldest first; an anchor that names no ledger counts. */
export async function readAnchors(client: Client, ledger: string, since?: Date): Promise<ChainMark[]> {
  const query = `WorkflowType = '${ANCHOR_WORKFLOW_TYPE}' AND ExecutionStatus = 'Completed'${since ? ` AND StartTime >= '${since.toISOString()}'` : ''}`;
  const anchors: ChainMark[] = [];
  for await (const run of client.workflow.list({ query })) {
    const anchor = await client.workflow.getHandle<() => Promise<LedgerAnchor>>(run.workflowId, run.runId).result();
    if (anchor.ledger !== undefined && anchor.ledger !== ledger) continue;
    anchors.push({ chain: '', length: anchor.length, head: anchor.head, by: `anchor ${run.workflowId} (${anchor.at})` });
  }
  return anchors.sort((a, b) => a.length - b.length);
}

/** A gate decision as a workflow history received it (a `decide` signal or an accepted `decision` update). */
interface ReceivedDecision {
  readonly gate?: string;
  readonly decision?: string;
  readonly by?: string;
  readonly reason?: string;
  readonly runId: string;
  readonly eventId: number;
}

/** Where the ledger and a workflow history disagree. */
export interface HistoryDisagreement {
  readonly intentId: string;
  readonly table: string;
  readonly id: string;
  readonly problem: string;
}

/** How a run of an intent's workflow ended, as its history says (its result). */
interface RunEnding {
  readonly status?: string;
  readonly mergedCommit?: string;
  readonly runId: string;
  readonly eventId: number;
}

/** What every run of an intent's workflow received and how it ended; undefined when the server keeps no run of it. */
async function intentHistory(client: Client, workflowId: string): Promise<{ decisions: ReceivedDecision[]; endings: RunEnding[] } | undefined> {
  const decisions: ReceivedDecision[] = [];
  const endings: RunEnding[] = [];
  let runs = 0;
  for await (const run of client.workflow.list({ query: `WorkflowId = '${workflowId.replace(/'/g, "\\'")}'` })) {
    runs += 1;
    const history = await client.workflow.getHandle(workflowId, run.runId).fetchHistory();
    for (const event of history.events ?? []) {
      decisions.push(...decisionsIn(event, run.runId));
      const result = event.workflowExecutionCompletedEventAttributes?.result?.payloads?.[0];
      if (!result) continue;
      try {
        const outcome = defaultPayloadConverter.fromPayload<{ status?: string; mergedCommit?: string }>(result);
        endings.push({ status: outcome.status, mergedCommit: outcome.mergedCommit, runId: run.runId, eventId: Number(event.eventId ?? 0) });
      } catch {
        // a result that is not an intent's outcome: nothing to hold the ledger against
      }
    }
  }
  return runs === 0 ? undefined : { decisions, endings };
}

function decisionsIn(event: temporal.api.history.v1.IHistoryEvent, runId: string): ReceivedDecision[] {
  const eventId = Number(event.eventId ?? 0);
  const signal = event.workflowExecutionSignaledEventAttributes;
  const update = event.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input;
  const payload =
    signal?.signalName === 'decide' ? signal.input?.payloads?.[0] : update?.name === 'decision' ? update.args?.payloads?.[0] : undefined;
  if (!payload) return [];
  try {
    const body = defaultPayloadConverter.fromPayload<Record<string, unknown>>(payload);
    const text = (v: unknown): string | undefined => (typeof v === 'string' ? v.trim() : undefined);
    return [{ gate: text(body.gate), decision: text(body.decision), by: text(body.by), reason: text(body.reason), runId, eventId }];
  } catch {
    return [];
  }
}

/**
 * The ledger against the workflow histories, from `since` on. Each person's gate decision must be
 * one its intent's workflow received: same gate, decision and approver (and reason, where the
 * message gave one); a decision of the automation ladder or a timeout (signed NULL) came from no
 * message and is not checked here (the chain covers it). Each merge (INTENT_MERGED, with its
 * commit) and rejection (INTENT_REJECTED) must be how a run of the intent ended. Returns every
 * disagreement, and how many rows were checked.
 */
export async function ledgerAgainstHistories(client: Client, pool: pg.Pool, since?: Date): Promise<{ checked: number; disagreements: HistoryDisagreement[] }> {
  const { rows: decisions } = await pool.query<{ id: string; intent_id: string; gate: string; decision: string; decided_by: string; reason: string | null }>(
    `SELECT id::text, intent_id, gate, decision, decided_by, reason FROM gate_decisions
      WHERE signed IS NOT NULL AND NOT timed_out AND ($1::timestamptz IS NULL OR decided_at >= $1) ORDER BY decided_at`,
    [since ?? null],
  );
  const { rows: endings } = await pool.query<{ id: string; intent_id: string; event_type: string; merged_commit: string | null }>(
    `SELECT id::text, intent_id, event_type, metadata->>'mergedCommit' AS merged_commit FROM safety_events
      WHERE event_type IN ('INTENT_MERGED', 'INTENT_REJECTED') AND intent_id IS NOT NULL AND ($1::timestamptz IS NULL OR "timestamp" >= $1) ORDER BY "timestamp"`,
    [since ?? null],
  );
  const histories = new Map<string, Awaited<ReturnType<typeof intentHistory>>>();
  const historyOf = async (intentId: string) => {
    if (!histories.has(intentId)) histories.set(intentId, await intentHistory(client, workflowIdForIntent(intentId)));
    return histories.get(intentId);
  };
  const disagreements: HistoryDisagreement[] = [];
  const gone = (says: string): string => `the ledger says ${says}, but the server keeps no history of the intent (past its retention, or never run)`;
  for (const row of decisions) {
    const history = await historyOf(row.intent_id);
    const says = `${row.decision} by ${row.decided_by} at ${row.gate}${row.reason ? `: ${row.reason}` : ''}`;
    if (history === undefined) {
      disagreements.push({ intentId: row.intent_id, table: 'gate_decisions', id: row.id, problem: gone(says) });
      continue;
    }
    const same = history.decisions.some((r) => r.gate === row.gate && r.decision === row.decision && r.by === row.decided_by && (r.reason === undefined || r.reason === '' || r.reason === (row.reason ?? '')));
    if (same) continue;
    const atGate = history.decisions.filter((r) => r.gate === row.gate);
    const has = atGate.length
      ? atGate.map((r) => `${r.decision} by ${r.by}${r.reason ? `: ${r.reason}` : ''} (run ${r.runId.slice(0, 8)}, event ${r.eventId})`).join('; ')
      : 'no decision at that gate';
    disagreements.push({ intentId: row.intent_id, table: 'gate_decisions', id: row.id, problem: `the ledger says ${says}; the workflow history has ${has}` });
  }
  for (const row of endings) {
    const history = await historyOf(row.intent_id);
    const merged = row.event_type === 'INTENT_MERGED';
    const says = merged ? `the intent merged as ${row.merged_commit ?? '(no commit)'}` : 'the intent was rejected';
    if (history === undefined) {
      disagreements.push({ intentId: row.intent_id, table: 'safety_events', id: row.id, problem: gone(says) });
      continue;
    }
    const same = history.endings.some((e) => (merged ? e.status === 'merged' && e.mergedCommit === (row.merged_commit ?? undefined) : e.status === 'rejected'));
    if (same) continue;
    const has = history.endings.length
      ? history.endings.map((e) => `${e.status ?? 'an ending'}${e.mergedCommit ? ` as ${e.mergedCommit}` : ''} (run ${e.runId.slice(0, 8)}, event ${e.eventId})`).join('; ')
      : 'no run that ended merged or rejected';
    disagreements.push({ intentId: row.intent_id, table: 'safety_events', id: row.id, problem: `the ledger says ${says}; the workflow history has ${has}` });
  }
  return { checked: decisions.length + endings.length, disagreements };
}
