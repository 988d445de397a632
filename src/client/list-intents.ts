import type { Client } from '@temporalio/client';
import { intentIdFromWorkflowId } from '../shared/ids';
import { stateQuery } from '../shared/messages';

export interface IntentRow {
  readonly intentId: string;
  /** Warden's status (running, waiting, merged, …), or Temporal's when Warden's is unset. */
  readonly status: string;
  readonly stage?: string;
  readonly gate?: string;
  readonly goal?: string;
  readonly startTime: string;
  readonly closeTime?: string;
}

/**
 * Lists intents through Temporal visibility (search attributes), newest first. The same query
 * works in the Web UI, e.g. `WorkflowType = 'intentWorkflow' AND WardenStatus = 'waiting'`.
 */
/** Workflow endings the intent's own code never saw. */
const ENDED_FROM_OUTSIDE = new Set(['TERMINATED', 'TIMED_OUT']);

export async function listIntents(client: Client, options: { readonly status?: string; readonly limit: number }): Promise<IntentRow[]> {
  let query = "WorkflowType = 'intentWorkflow'";
  if (options.status) query += ` AND WardenStatus = '${options.status.replace(/'/g, '')}'`;
  const rows: IntentRow[] = [];
  for await (const wf of client.workflow.list({ query })) {
    const attr = (name: string) => wf.typedSearchAttributes.getAll().find((p) => p.key.name === name)?.value as string | undefined;
    rows.push({
      intentId: intentIdFromWorkflowId(wf.workflowId),
      // Terminated or timed out, the workflow never got to update its own word ("waiting", "running").
      status: ENDED_FROM_OUTSIDE.has(wf.status.name) ? wf.status.name.toLowerCase() : (attr('WardenStatus') ?? wf.status.name.toLowerCase()),
      stage: attr('WardenStage'),
      gate: attr('WardenGate'),
      goal: (wf.memo?.goal as string | undefined) ?? undefined,
      startTime: wf.startTime.toISOString(),
      closeTime: wf.closeTime?.toISOString(),
    });
    if (rows.length >= options.limit) break;
  }
  return rows;
}

export interface WaitingGate {
  readonly intentId: string;
  readonly gate: string;
  readonly prompt: string;
  readonly requestedAt: string;
  readonly timeoutAt: string;
  readonly ageMinutes: number;
}

/** Gates waiting for a decision: intents whose WardenStatus is `waiting`, asked for their gate. */
export async function waitingGates(client: Client, now: Date = new Date()): Promise<WaitingGate[]> {
  const gates: WaitingGate[] = [];
  for await (const wf of client.workflow.list({ query: "WorkflowType = 'intentWorkflow' AND WardenStatus = 'waiting' AND ExecutionStatus = 'Running'" })) {
    const state = await client.workflow.getHandle(wf.workflowId).query(stateQuery).catch(() => undefined);
    const pending = state?.pendingGate;
    if (!pending) continue; // decided since the list was read
    gates.push({
      intentId: intentIdFromWorkflowId(wf.workflowId),
      gate: pending.gate,
      prompt: pending.prompt,
      requestedAt: pending.requestedAt,
      timeoutAt: pending.timeoutAt,
      ageMinutes: Math.floor((now.getTime() - new Date(pending.requestedAt).getTime()) / 60_000),
    });
  }
  return gates;
}
