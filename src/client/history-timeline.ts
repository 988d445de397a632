import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import type pg from 'pg';
import { timelineSources, type TimelineSource } from '../ledger/timeline-sources';
import { workflowIdForIntent } from '../shared/ids';

/** The history event a ledger row is tied to. */
export interface HistoryTie {
  readonly runId: string;
  readonly eventId: number;
  /**
   * ActivityTaskScheduled (MarkerRecorded for a local activity): the activity attempt that wrote
   * the row. WorkflowTaskStarted: the workflow task whose code recorded it; its event id is the
   * history's length at that point.
   */
  readonly eventType: 'ActivityTaskScheduled' | 'MarkerRecorded' | 'WorkflowTaskStarted';
}

export interface TimelineWithHistory extends TimelineSource {
  readonly history: HistoryTie | null;
  /** Why a row is not tied, when it is not. */
  readonly untied?: string;
}

/** What the tie needs of one run's history. */
export interface RunHistory {
  readonly runId: string;
  /** Activity id → the event that scheduled it (ActivityTaskScheduled, or a local activity's MarkerRecorded). */
  readonly activities: ReadonlyMap<string, { readonly eventId: number; readonly eventType: 'ActivityTaskScheduled' | 'MarkerRecorded' }>;
  /** Event ids of its WorkflowTaskStarted events. */
  readonly taskStarts: ReadonlySet<number>;
}

const RUN_GONE = "the run is not in the server's history any more (past its retention)";
const OUTSIDE =
  "written outside the intent's workflow (a warden command such as stop or resume, the web app, the sweeper, a worker's own check), or by a Warden that did not yet record where in the history";

/**
 * Ties each row to the history: a row naming its activity to the event that scheduled that
 * activity in its run; a row the workflow recorded to the WorkflowTaskStarted event its
 * history length names; a gate decision to the task of the GATE_DECIDED event written after it.
 */
export function tieToHistory(rows: readonly TimelineSource[], runs: readonly RunHistory[]): TimelineWithHistory[] {
  const tied = rows.map((row): TimelineWithHistory => {
    const run = row.runId ? runs.find((r) => r.runId === row.runId) : undefined;
    if (row.runId && row.activityId) {
      const scheduled = run?.activities.get(row.activityId);
      if (!run) return { ...row, history: null, untied: RUN_GONE };
      if (!scheduled) return { ...row, history: null, untied: `activity ${row.activityId} is not in run ${row.runId}'s history` };
      return { ...row, history: { runId: row.runId, ...scheduled } };
    }
    if (row.runId && row.historyLength !== null) {
      if (!run) return { ...row, history: null, untied: RUN_GONE };
      if (!run.taskStarts.has(row.historyLength)) return { ...row, history: null, untied: `event ${row.historyLength} of run ${row.runId} is not a workflow task's start` };
      return { ...row, history: { runId: row.runId, eventId: row.historyLength, eventType: 'WorkflowTaskStarted' } };
    }
    return { ...row, history: null, untied: OUTSIDE };
  });
  // The workflow writes a gate's decision row and then its GATE_DECIDED event, in one task.
  return tied.map((entry, index) => {
    if (entry.kind !== 'gate') return entry;
    const event = tied.slice(index + 1).find((later) => later.type === 'GATE_DECIDED');
    return event?.history ? { ...entry, history: event.history, untied: undefined } : entry;
  });
}

/** The intent's ledger rows beside its workflow's histories, every run the server still has. */
export async function timelineWithHistory(client: Client, pool: pg.Pool, intentId: string): Promise<TimelineWithHistory[]> {
  const rows = await timelineSources(pool, intentId);
  const workflowId = workflowIdForIntent(intentId);
  const runIds = new Set(rows.flatMap((row) => (row.runId ? [row.runId] : [])));
  // Runs that wrote no row naming them are found by their workflow id.
  for await (const execution of client.workflow.list({ query: `WorkflowId = '${workflowId.replaceAll("'", "\\'")}'` })) runIds.add(execution.runId);
  const runs: Array<RunHistory & { readonly startedAt: number }> = [];
  for (const runId of runIds) {
    // A run the server no longer keeps (past its retention): its rows stay untied.
    const history = await client.workflow
      .getHandle(workflowId, runId)
      .fetchHistory()
      .catch((error: unknown) => {
        if (error instanceof WorkflowNotFoundError) return undefined;
        throw error;
      });
    if (history) runs.push(runHistoryOf(runId, history.events ?? []));
  }
  runs.sort((a, b) => a.startedAt - b.startedAt);
  return tieToHistory(rows, runs);
}

function runHistoryOf(runId: string, events: readonly temporal.api.history.v1.IHistoryEvent[]): RunHistory & { readonly startedAt: number } {
  const activities = new Map<string, { eventId: number; eventType: 'ActivityTaskScheduled' | 'MarkerRecorded' }>();
  const taskStarts = new Set<number>();
  for (const event of events) {
    const eventId = Number(event.eventId);
    const activityId = event.activityTaskScheduledEventAttributes?.activityId;
    if (activityId) activities.set(activityId, { eventId, eventType: 'ActivityTaskScheduled' });
    const local = localActivityIdOf(event);
    if (local) activities.set(local, { eventId, eventType: 'MarkerRecorded' });
    if (event.workflowTaskStartedEventAttributes) taskStarts.add(eventId);
  }
  const first = events[0]?.eventTime;
  return { runId, activities, taskStarts, startedAt: first ? millisOf(first) : 0 };
}

/** A local activity's id, from the marker the SDK records for it. */
function localActivityIdOf(event: temporal.api.history.v1.IHistoryEvent): string | undefined {
  const marker = event.markerRecordedEventAttributes;
  if (marker?.markerName !== 'core_local_activity') return undefined;
  const data = marker.details?.data?.payloads?.[0]?.data;
  if (!data) return undefined;
  try {
    const parsed = JSON.parse(Buffer.from(data).toString('utf8')) as { activity_id?: unknown };
    return typeof parsed.activity_id === 'string' ? parsed.activity_id : undefined;
  } catch {
    return undefined;
  }
}

function millisOf(time: temporal.api.history.v1.IHistoryEvent['eventTime'] & object): number {
  return Number(time.seconds ?? 0) * 1000 + Math.floor((time.nanos ?? 0) / 1_000_000);
}
