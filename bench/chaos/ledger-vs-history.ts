/**
 * Ledger rows against workflow histories: are the rows a workflow wrote all in the ledger, once?
 *
 * Every row the intent workflow writes (gate decisions, stage entries and outcomes, gate
 * requests, merges: the LedgerRecorder's safety events) goes through its `appendToLedger`
 * activity, or ahead of another activity that writes it first, with an id the workflow made
 * deterministically. Replaying a run's history with
 * ledger-capture-interceptor.ts gives the ids of the batches the history shows written. Rows of
 * the history missing from the ledger are lost; ledger rows recorded by the workflow (they carry
 * the run and history length that recorded them) that no history wrote are doubled: a write
 * whose completion the history does not hold, written again under another id.
 */
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import type pg from 'pg';
import { PAYLOAD_CONVERTER_PATH } from '../../src/workers/payload-converter-path';
import { WORKFLOW_INTERCEPTOR_MODULES } from '../../src/workers/warden-worker';
import { bundleWorkflowsApart } from '../../src/workers/workflow-bundle';
import { workflowIdForIntent } from '../../src/shared/ids';
import type { LedgerCaptureSinks } from './ledger-capture-interceptor';

export interface LedgerAgainstHistory {
  /** Rows the histories say were written. */
  readonly inHistories: number;
  /** Workflow-written rows the ledger holds. */
  readonly inLedger: number;
  /** `<intent>: <row id>` of each row in a history but not in the ledger. */
  readonly lost: string[];
  /** `<intent>: <type> <row id>` of each workflow-written ledger row no history wrote. */
  readonly doubled: string[];
  /** Histories that did not replay (their rows are not compared). */
  readonly unreplayable: string[];
}

/** Compares the rows of each intent (closed ones: a running workflow's history is still being written). */
export async function ledgerAgainstHistory(client: Client, pool: pg.Pool, intentIds: readonly string[]): Promise<LedgerAgainstHistory> {
  const bundle = await bundleWorkflowsApart([...WORKFLOW_INTERCEPTOR_MODULES, require.resolve('./ledger-capture-interceptor')]);
  const written = new Map<string, string[]>(); // workflow id → row ids
  const histories: Array<{ workflowId: string; history: Awaited<ReturnType<ReturnType<Client['workflow']['getHandle']>['fetchHistory']>> }> = [];
  for (const intentId of intentIds) {
    const workflowId = workflowIdForIntent(intentId);
    written.set(workflowId, []);
    for await (const execution of client.workflow.list({ query: `WorkflowId = '${workflowId.replaceAll("'", "\\'")}'` })) {
      const history = await client.workflow
        .getHandle(workflowId, execution.runId)
        .fetchHistory()
        .catch((error: unknown) => {
          if (error instanceof WorkflowNotFoundError) return undefined;
          throw error;
        });
      if (history) histories.push({ workflowId, history });
    }
  }
  const sinks: { [K in keyof LedgerCaptureSinks]: Record<keyof LedgerCaptureSinks[K], { fn: (info: { workflowId: string }, ids: string[]) => void; callDuringReplay: boolean }> } = {
    ledgerCapture: { written: { fn: (info, ids) => written.get(info.workflowId)?.push(...ids), callDuringReplay: true } },
  };
  const unreplayable: string[] = [];
  for await (const result of Worker.runReplayHistories({ workflowBundle: bundle, dataConverter: { payloadConverterPath: PAYLOAD_CONVERTER_PATH }, sinks }, histories)) {
    if (result.error) unreplayable.push(`${result.workflowId}: ${result.error.message.slice(0, 200)}`);
  }

  const lost: string[] = [];
  const doubled: string[] = [];
  let inHistories = 0;
  let inLedger = 0;
  for (const intentId of intentIds) {
    const workflowId = workflowIdForIntent(intentId);
    if (unreplayable.some((line) => line.startsWith(`${workflowId}:`))) continue;
    const fromHistory = new Set(written.get(workflowId));
    const rows = await pool.query<{ id: string; type: string }>(
      `SELECT id::text AS id, event_type AS type FROM safety_events WHERE intent_id = $1 AND jsonb_typeof(metadata->'historyLength') = 'number'
       UNION ALL
       SELECT id::text, 'GATE_DECISION' FROM gate_decisions WHERE intent_id = $1`,
      [intentId],
    );
    const ledgerIds = new Set(rows.rows.map((r) => r.id));
    inHistories += fromHistory.size;
    inLedger += ledgerIds.size;
    for (const id of fromHistory) if (!ledgerIds.has(id)) lost.push(`${intentId}: ${id}`);
    for (const row of rows.rows) if (!fromHistory.has(row.id)) doubled.push(`${intentId}: ${row.type} ${row.id}`);
  }
  return { inHistories, inLedger, lost, doubled, unreplayable };
}
