/**
 * Resume latency: an intent waits at its merge gate with a long history (≥ 1,000 events, grown
 * by pause/resume signals); `warden resume --from impl` (a reset to just before impl) → how long
 * until the new run's impl activity has started, measured on the client clock, for R runs.
 *
 *   npx tsx bench/resume.ts [--runs 5] [--events 1000] [--smoke]
 *   npm run bench:resume
 *
 * Everything is its own and torn down at the end. Results: bench/results/resume.json.
 */
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startIntent } from '../src/client/intents';
import { resumeIntent } from '../src/client/resume';
import { createSampleRepo } from '../src/client/sample-repo';
import { pauseSignal, resumeSignal, stateQuery } from '../src/shared/messages';
import { endProgress, out, percentile, progress, runBenchmark, sized, sleep, t } from './console';
import { benchWorker, startBench, withWorker, writeResult } from './harness';

const { values: flags } = parseArgs({ options: { runs: { type: 'string' }, events: { type: 'string' }, smoke: { type: 'boolean', default: false } } });
const RUNS = sized(flags.runs, flags.smoke, 5, 1);
const EVENTS = sized(flags.events, flags.smoke, 1000, 100);
if (!Number.isInteger(RUNS) || RUNS < 1 || !Number.isInteger(EVENTS) || EVENTS < 1) {
  out('--runs and --events take whole numbers ≥ 1');
  process.exit(2);
}

async function main(): Promise<number> {
  out(`resume benchmark: ${RUNS} resets of intents with ≥ ${EVENTS} history events; ${os.cpus().length} cores, node ${process.version}`);
  const b = await startBench('resume');
  const queue = 'resume';
  const samples: Array<{ historyEvents: number; ms: number }> = [];
  try {
    const worker = await benchWorker(b, queue);
    await withWorker(worker, async () => {
      for (let run = 0; run < RUNS; run++) {
        const repo = createSampleRepo(path.join(b.tmp, 'repos', `repo-${run}`));
        const id = `resume-${run}`;
        const handle = await startIntent(
          b.client,
          { id, goal: 'Add slugify', repoPath: repo, paths: ['lib/**'], agent: { kind: 'scripted', scriptPath: b.demoScript }, limits: { cooldown: '0s' } },
          queue,
        );
        while ((await handle.query(stateQuery)).pendingGate?.gate !== 'merge') await sleep(50);
        // Grow the history: each pause/resume pair adds signals, workflow tasks, search attribute updates and ledger writes.
        let length = (await handle.fetchHistory()).events?.length ?? 0;
        while (length < EVENTS) {
          for (let i = 0; i < 25; i++) {
            await handle.signal(pauseSignal, { by: 'bench' });
            await handle.signal(resumeSignal, { by: 'bench' });
          }
          await sleep(200);
          length = (await handle.fetchHistory()).events?.length ?? 0;
          progress(`run ${run + 1}/${RUNS}: history at ${length} events`);
        }
        const started = t();
        const { runId } = await resumeIntent(b.client, b.server.namespace, id, { stage: 'impl', reason: 'bench', reapplySignals: false, force: true, by: 'bench', ledger: b.ledger });
        const resumed = b.client.workflow.getHandle(`intent-${id}`, runId);
        for (;;) {
          const events = (await resumed.fetchHistory()).events ?? [];
          const scheduled = events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'runAgentStage' && e.eventId && Number(e.eventId) > 0 && isImpl(e));
          if (scheduled && events.some((e) => e.activityTaskStartedEventAttributes?.scheduledEventId?.toString() === scheduled.eventId?.toString())) break;
          await sleep(10);
        }
        const ms = t() - started;
        samples.push({ historyEvents: length, ms });
        progress(`run ${run + 1}/${RUNS}: ${length} events, impl started ${ms.toFixed(0)} ms after the reset call`);
        endProgress();
        await resumed.terminate('benchmark done');
      }
    });
    const sorted = samples.map((s) => s.ms).sort((a, c) => a - c);
    const result = { runs: RUNS, samples, medianMs: percentile(sorted, 50), maxMs: sorted.at(-1), targetMs: 1000 };
    out(`resume --from impl → impl started: median ${result.medianMs!.toFixed(0)} ms, max ${result.maxMs!.toFixed(0)} ms over ${RUNS} runs (target ≤ 1000 ms)`);
    await writeResult('resume', result);
    return 0;
  } finally {
    await b.close();
  }
}

/** Whether a scheduled runAgentStage is for impl (its input names the stage). */
function isImpl(event: { activityTaskScheduledEventAttributes?: { input?: { payloads?: Array<{ data?: Uint8Array | null }> | null } | null } | null }): boolean {
  const data = event.activityTaskScheduledEventAttributes?.input?.payloads?.[0]?.data;
  return data ? Buffer.from(data).toString('utf8').includes('"stage":"impl"') : false;
}

runBenchmark('resume', main);
