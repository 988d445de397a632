/**
 * Where an intent's time goes: N intents (default 16) through the whole pipeline with the
 * zero-delay scripted agent, C at a time (default 8), as `bench/pipeline.ts` runs them; then,
 * from each intent's history, the time per activity type (queued = scheduled → started, run =
 * started → closed) and per workflow task, as medians and totals over all intents.
 *
 *   npx tsx bench/profile.ts [--intents 16] [--concurrency 8] [--smoke]
 *
 * Local activities leave no scheduled/started events, only a marker; their time is inside the
 * workflow task that ran them ("workflow task run"). Results: bench/results/profile.json.
 */
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { temporal } from '@temporalio/proto';
import { createSampleRepo } from '../src/client/sample-repo';
import { LadderStore } from '../src/ledger/ladder-store';
import { mapLimit, out, percentile, progress, endProgress, runBenchmark, secs, sized, t } from './console';
import { benchWorker, runToMerge, startBench, withWorker, writeResult } from './harness';

const { values: flags } = parseArgs({
  options: { intents: { type: 'string' }, concurrency: { type: 'string' }, smoke: { type: 'boolean', default: false } },
});
const N = sized(flags.intents, flags.smoke, 16, 2);
const C = sized(flags.concurrency, flags.smoke, 8, 2);
for (const [name, value] of [['--intents', N], ['--concurrency', C]] as const) {
  if (!Number.isInteger(value) || value < 1) {
    out(`${name} takes a whole number ≥ 1`);
    process.exit(2);
  }
}

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
const ms = (e: HistoryEvent): number => Number(e.eventTime!.seconds) * 1000 + (e.eventTime!.nanos ?? 0) / 1e6;

/** Adds each span of one history to `spans`, keyed "activity <type> queued|run" or "workflow task queued|run". */
function collectSpans(events: readonly HistoryEvent[], spans: Map<string, number[]>): void {
  const byId = new Map<string, HistoryEvent>();
  for (const e of events) byId.set(String(e.eventId), e);
  const add = (key: string, value: number): void => void (spans.get(key) ?? spans.set(key, []).get(key)!).push(value);
  for (const [i, e] of events.entries()) {
    const started = e.activityTaskStartedEventAttributes;
    if (started) {
      const scheduled = byId.get(String(started.scheduledEventId))!;
      add(`activity ${scheduled.activityTaskScheduledEventAttributes!.activityType!.name} queued`, ms(e) - ms(scheduled));
    }
    const closed = e.activityTaskCompletedEventAttributes ?? e.activityTaskFailedEventAttributes;
    if (closed) {
      const startedEvent = byId.get(String(closed.startedEventId))!;
      const scheduled = byId.get(String(closed.scheduledEventId))!;
      add(`activity ${scheduled.activityTaskScheduledEventAttributes!.activityType!.name} run`, ms(e) - ms(startedEvent));
    }
    const wftStarted = e.workflowTaskStartedEventAttributes;
    if (wftStarted) add('workflow task queued', ms(e) - ms(byId.get(String(Number(e.eventId) - 1))!));
    const wftCompleted = e.workflowTaskCompletedEventAttributes;
    if (wftCompleted) add(`workflow task run, ${localActivitiesOf(events, i)}`, ms(e) - ms(byId.get(String(wftCompleted.startedEventId))!));
  }
}

/** The events a workflow task's commands write, besides markers. */
const COMMAND_ATTRIBUTES = [
  'activityTaskScheduledEventAttributes',
  'activityTaskCancelRequestedEventAttributes',
  'timerStartedEventAttributes',
  'timerCanceledEventAttributes',
  'upsertWorkflowSearchAttributesEventAttributes',
  'workflowPropertiesModifiedEventAttributes',
  'startChildWorkflowExecutionInitiatedEventAttributes',
  'signalExternalWorkflowExecutionInitiatedEventAttributes',
  'requestCancelExternalWorkflowExecutionInitiatedEventAttributes',
  'workflowExecutionCompletedEventAttributes',
  'workflowExecutionFailedEventAttributes',
  'workflowExecutionCanceledEventAttributes',
  'workflowExecutionContinuedAsNewEventAttributes',
] as const satisfies ReadonlyArray<keyof HistoryEvent>;

/**
 * How many local activities the workflow task completed at `events[completedAt]` ran: the
 * MARKER_RECORDED events among its commands, which follow it up to the next event that is not a
 * command (a task, an activity's progress, a signal). A task's local activities keep it open.
 */
function localActivitiesOf(events: readonly HistoryEvent[], completedAt: number): string {
  let markers = 0;
  for (const e of events.slice(completedAt + 1)) {
    if (e.markerRecordedEventAttributes) markers++;
    else if (!COMMAND_ATTRIBUTES.some((name) => e[name])) break;
  }
  return markers === 0 ? 'no local activity' : markers === 1 ? '1 local activity' : `${markers} local activities`;
}

async function main(): Promise<number> {
  out(`profile: ${N} intents, concurrency ${C}; ${os.cpus().length} cores, node ${process.version}`);
  const s = await startBench('profile');
  try {
    const queue = 'profile';
    const agent = 'bench-profile';
    await new LadderStore(s.database.pool).setLevel({ scope: `agent:${agent}`, level: 3, pinned: true, by: 'bench', defaults: { level: 0, allowLevelUp: false } });
    const repos = Array.from({ length: N }, (_, i) => createSampleRepo(path.join(s.tmp, 'repos', `repo-${i}`)));
    const worker = await benchWorker(s, queue);
    const spans = new Map<string, number[]>();
    const perIntent: number[] = [];
    const started = t();
    await withWorker(worker, () =>
      mapLimit(repos, C, async (repo, i) => {
        const begun = t();
        const handle = await runToMerge(s, queue, { id: `profile-${i}`, repo, agentName: agent });
        perIntent.push(t() - begun);
        collectSpans((await handle.fetchHistory()).events ?? [], spans);
        progress(`${perIntent.length}/${N} merged, ${secs(t() - started)}`);
      }),
    );
    endProgress();
    const rows = [...spans.entries()]
      .map(([key, values]) => {
        const sorted = [...values].sort((a, b) => a - b);
        return { key, count: values.length, medianMs: percentile(sorted, 50)!, totalMs: values.reduce((a, b) => a + b, 0) };
      })
      .sort((a, b) => b.totalMs - a.totalMs);
    const sortedIntents = [...perIntent].sort((a, b) => a - b);
    out(`median per intent ${secs(percentile(sortedIntents, 50)!)}, wall ${secs(t() - started)}`);
    out('| span | count | median | total over all intents |');
    out('|---|---|---|---|');
    for (const r of rows) out(`| ${r.key} | ${r.count} | ${r.medianMs.toFixed(0)} ms | ${secs(r.totalMs)} |`);
    await writeResult('profile', { intents: N, concurrency: C, medianPerIntentMs: percentile(sortedIntents, 50), spans: rows });
    return 0;
  } finally {
    await s.close();
  }
}

runBenchmark('profile', main);
