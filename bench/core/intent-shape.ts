import { temporal } from '@temporalio/proto';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

/** What one intent costs the server: its history's events and workflow tasks, and what made them. */
export interface IntentShape {
  readonly historyEvents: number;
  readonly workflowTasks: number;
  /** Each workflow task, in order: what woke it, the commands it ended with, and how long it ran. */
  readonly tasks: readonly string[];
  /** The history's events by type, most first. */
  readonly eventsByType: ReadonlyArray<readonly [string, number]>;
}

const EventType = temporal.api.enums.v1.EventType;

const eventMs = (e: HistoryEvent): number => Number(e.eventTime?.seconds ?? 0) * 1000 + (e.eventTime?.nanos ?? 0) / 1e6;

/** The short name of an event type (EVENT_TYPE_ACTIVITY_TASK_SCHEDULED → ActivityTaskScheduled). */
function typeName(e: HistoryEvent): string {
  const name = EventType[e.eventType ?? 0] ?? String(e.eventType);
  return name
    .replace(/^EVENT_TYPE_/, '')
    .toLowerCase()
    .replace(/(^|_)([a-z])/g, (_, __, c: string) => c.toUpperCase());
}

/** A local activity's type, from its marker's payload (the SDK writes it there as JSON). */
function localActivityType(e: HistoryEvent): string {
  const data = e.markerRecordedEventAttributes?.details?.data?.payloads?.[0]?.data;
  if (!data) return '?';
  try {
    const parsed = JSON.parse(Buffer.from(data).toString('utf8')) as { activity_type?: string; activityType?: string };
    return parsed.activity_type ?? parsed.activityType ?? '?';
  } catch {
    return '?';
  }
}

/** One event as the breakdown names it: an activity or local activity by its type, a signal by its name. */
function describe(e: HistoryEvent, activityTypes: Map<string, string>): string {
  const name = typeName(e);
  if (e.activityTaskScheduledEventAttributes) return `${name}(${e.activityTaskScheduledEventAttributes.activityType?.name})`;
  const scheduledId = e.activityTaskCompletedEventAttributes?.scheduledEventId ?? e.activityTaskStartedEventAttributes?.scheduledEventId;
  if (scheduledId !== undefined && scheduledId !== null) return `${name}(${activityTypes.get(String(scheduledId)) ?? '?'})`;
  if (e.markerRecordedEventAttributes) return `LocalActivity(${localActivityType(e)})`;
  if (e.workflowExecutionSignaledEventAttributes) return `${name}(${e.workflowExecutionSignaledEventAttributes.signalName})`;
  if (e.workflowExecutionUpdateAcceptedEventAttributes) return `${name}(${e.workflowExecutionUpdateAcceptedEventAttributes.acceptedRequest?.input?.name})`;
  return name;
}

/**
 * The history's events as the breakdown names them, in order: `ActivityTaskScheduled(runTests)`,
 * `LocalActivity(appendToLedger)`, `TimerStarted`… (what a test can check the shape of a run by).
 */
export function eventLabels(events: readonly HistoryEvent[]): string[] {
  const activityTypes = new Map<string, string>();
  return events.map((e) => {
    if (e.activityTaskScheduledEventAttributes) activityTypes.set(String(e.eventId), e.activityTaskScheduledEventAttributes.activityType?.name ?? '?');
    return describe(e, activityTypes);
  });
}

/**
 * Reads a history as workflow tasks: for each, the events that woke it (since the previous task
 * ended) and the commands and markers it wrote when it completed.
 */
export function intentShape(events: readonly HistoryEvent[]): IntentShape {
  const activityTypes = new Map<string, string>();
  const counts = new Map<string, number>();
  const tasks: string[] = [];
  let woke: string[] = [];
  let wrote: string[] | undefined;
  let startedAt = 0;
  let ranMs = 0;
  const close = () => {
    if (!wrote) return;
    tasks.push(`woken by ${woke.join(', ') || '–'} → ${wrote.join(', ') || '–'} (ran ${ranMs.toFixed(1)} ms)`);
    wrote = undefined;
    woke = [];
  };
  for (const e of events) {
    if (e.activityTaskScheduledEventAttributes) activityTypes.set(String(e.eventId), e.activityTaskScheduledEventAttributes.activityType?.name ?? '?');
    const label = describe(e, activityTypes);
    const bucket = label.replace(/\(.*\)$/, '') === 'LocalActivity' ? label : typeName(e);
    counts.set(bucket, (counts.get(bucket) ?? 0) + 1);
    if (e.workflowTaskStartedEventAttributes) startedAt = eventMs(e);
    if (e.workflowTaskScheduledEventAttributes || e.workflowTaskStartedEventAttributes) continue;
    if (e.workflowTaskCompletedEventAttributes) {
      close();
      wrote = [];
      // From the worker taking the task to its reply: the workflow code and its local activities.
      ranMs = eventMs(e) - startedAt;
      continue;
    }
    if (e.workflowTaskFailedEventAttributes || e.workflowTaskTimedOutEventAttributes) {
      woke.push(label);
      continue;
    }
    // Commands follow their task's completion until the next thing from outside arrives.
    const command = e.activityTaskScheduledEventAttributes || e.markerRecordedEventAttributes || e.timerStartedEventAttributes || e.timerCanceledEventAttributes || e.workflowExecutionCompletedEventAttributes || e.workflowExecutionUpdateCompletedEventAttributes || e.workflowExecutionUpdateAcceptedEventAttributes || e.upsertWorkflowSearchAttributesEventAttributes || e.workflowPropertiesModifiedEventAttributes || e.startChildWorkflowExecutionInitiatedEventAttributes || e.signalExternalWorkflowExecutionInitiatedEventAttributes;
    if (wrote && command) wrote.push(label);
    else {
      close();
      woke.push(label);
    }
  }
  close();
  const workflowTasks = events.filter((e) => e.workflowTaskCompletedEventAttributes).length;
  return { historyEvents: events.length, workflowTasks, tasks, eventsByType: [...counts].sort((a, b) => b[1] - a[1]) };
}
