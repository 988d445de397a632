/**
 * Pipeline benchmark, side by side in one run on one machine:
 *
 * - safety overhead: N intents (default 200) through the whole pipeline with the zero-delay
 *   scripted demo agent — worktree, five agent stages, the repo's tests (impl fails once, then
 *   passes), the mechanical checks, the ledger, the merge (passed by the automation ladder at a
 *   pinned L3, so no person is in the loop) — with the safety interceptors on and off, in halves
 *   run on, off, off, on (after an untimed warm-up of each) so that a drifting load weighs on both alike; and a
 *   bare Temporal workflow of six no-op activities as the floor;
 * - gate latency: G intents (default 100) wait at the merge gate; the bench approves each and
 *   reads, from the workflow history, the time from the signal to the next activity's start;
 * - where one intent's time goes: after the timed runs, K intents (default 5) one at a time, with
 *   the git processes Warden started, the ledger round trips, and the time of the agent and of the
 *   repo's tests (process-tally.ts), the rest being Warden's own.
 *
 *   npx tsx bench/pipeline.ts [--intents 200] [--gates 100] [--concurrency 8] [--measured 5] [--smoke] [--cpu-profile DIR]
 *   npm run bench:pipeline -- --intents 50
 *
 * `--cpu-profile DIR` profiles the worker's main thread through each timed half, into
 * DIR/<half>.cpuprofile, and prints each one's top functions.
 *
 * Everything is its own (an in-memory dev server, an embedded PostgreSQL in a temp folder, the
 * repos) and is torn down at the end. Results: bench/results/pipeline.json.
 */
import { mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Worker } from '@temporalio/worker';
import { startIntent } from '../src/client/intents';
import { createSampleRepo } from '../src/client/sample-repo';
import { LadderStore } from '../src/ledger/ladder-store';
import { processTally, tallySince } from '../src/activities/process-tally';
import { decideSignal, stateQuery } from '../src/shared/messages';
import * as bareActivities from './bare/activities';
import { startCpuProfile, startCpuWindow } from './cpu';
import { endProgress, mapLimit, out, pct, percentile, progress, runBenchmark, secs, sized, sleep, t } from './console';
import { benchWorker, runToMerge, startBench, withWorker, writeResult, type Bench } from './harness';

const { values: flags } = parseArgs({
  options: {
    intents: { type: 'string' },
    gates: { type: 'string' },
    concurrency: { type: 'string' },
    measured: { type: 'string' },
    smoke: { type: 'boolean', default: false },
    'cpu-profile': { type: 'string' },
  },
});
const N = sized(flags.intents, flags.smoke, 200, 2);
const G = sized(flags.gates, flags.smoke, 100, 2);
const C = sized(flags.concurrency, flags.smoke, 8, 2);
const K = sized(flags.measured, flags.smoke, 5, 2);
for (const [name, value] of [['--intents', N], ['--gates', G], ['--concurrency', C], ['--measured', K]] as const) {
  if (!Number.isInteger(value) || value < 1) {
    out(`${name} takes a whole number ≥ 1`);
    process.exit(2);
  }
}

interface Run {
  readonly count: number;
  readonly wallMs: number;
  readonly durations: readonly number[];
  /** CPU seconds of the worker (with its children), the dev server and PostgreSQL while the run went on. */
  readonly cpuSeconds: Record<string, number>;
  /** How busy the machine's cores were meanwhile (0–1), whoever kept them so. */
  readonly machineBusyShare: number;
  readonly ledgerRoundTrips: number;
}

/**
 * The processes whose CPU a run counts: the worker (this process, with the bench's client, and
 * the git processes and test runs it starts), the dev server and PostgreSQL.
 */
function cpuRoots(s: Bench): Map<string, number> {
  const roots = new Map([
    ['worker', process.pid],
    ['dev server', s.server.pid],
  ]);
  if (s.database.server) roots.set('PostgreSQL', s.database.server.pid);
  return roots;
}

/** `count` intents through the whole pipeline, C at a time; the ladder passes the merge. */
async function pipelines(s: Bench, label: string, queue: string, safety: boolean, count: number): Promise<Run> {
  const agent = `bench-${queue}`;
  await new LadderStore(s.database.pool).setLevel({ scope: `agent:${agent}`, level: 3, pinned: true, by: 'bench', defaults: { level: 0, allowLevelUp: false } });
  const repos = await makeRepos(s, queue, count);
  const worker = await benchWorker(s, queue, { safetyInterceptors: safety });
  const durations: number[] = [];
  let done = 0;
  const started = t();
  const profiler = flags['cpu-profile'] && !queue.startsWith('warm') ? await startCpuProfile() : undefined;
  const cpu = startCpuWindow(cpuRoots(s));
  const roundTrips = s.ledgerRoundTrips();
  await withWorker(worker, () =>
    mapLimit(repos, C, async (repo, i) => {
      const begun = t();
      await runToMerge(s, queue, { id: `${queue}-${i}`, repo, agentName: agent });
      durations.push(t() - begun);
      done += 1;
      progress(`${label}: ${done}/${count} merged, ${secs(t() - started)}`);
    }),
  );
  endProgress();
  const window = cpu.end();
  const run = { count, wallMs: t() - started, durations, cpuSeconds: window.cpuSeconds, machineBusyShare: window.machineBusyShare, ledgerRoundTrips: s.ledgerRoundTrips() - roundTrips };
  if (profiler) {
    await mkdir(flags['cpu-profile']!, { recursive: true });
    await profiler.stopInto(path.join(flags['cpu-profile']!, `${queue}.cpuprofile`));
  }
  return run;
}

/**
 * Safety on and off, N intents each, in four halves in the order on, off, off, on: a load that
 * rises or falls steadily over the run (other work on the machine) weighs on both sides alike,
 * where on-then-off would hand all of it to one side. A warm-up of each goes first.
 */
async function onAndOff(s: Bench): Promise<{ on: Throughput; off: Throughput }> {
  // Untimed, C intents each way first: the first intents of a process load modules (the stub
  // checks' TypeScript compiler among them) and warm the JIT, which would otherwise all be
  // charged to the first timed half, safety on.
  // A smoke run's figures are not read: it skips the warm-up.
  if (!flags.smoke) {
    await pipelines(s, 'warm-up, safety on', 'warm-on', true, C);
    await pipelines(s, 'warm-up, safety off', 'warm-off', false, C);
  }
  const first = Math.ceil(N / 2);
  const second = N - first;
  const on1 = await pipelines(s, 'safety on (1/2)', 'on-1', true, first);
  const off1 = await pipelines(s, 'safety off (1/2)', 'off-1', false, first);
  const off2 = second > 0 ? await pipelines(s, 'safety off (2/2)', 'off-2', false, second) : undefined;
  const on2 = second > 0 ? await pipelines(s, 'safety on (2/2)', 'on-2', true, second) : undefined;
  return { on: throughputOf([on1, ...(on2 ? [on2] : [])]), off: throughputOf([off1, ...(off2 ? [off2] : [])]) };
}

interface Throughput {
  readonly wallMs: number;
  readonly perSecond: number;
  readonly medianMs: number;
  /** Per intent: CPU ms of each counted process (see cpuRoots). */
  readonly cpuMsPerIntent: Record<string, number>;
  readonly cpuMsTotalPerIntent: number;
  readonly ledgerRoundTripsPerIntent: number;
  /**
   * How busy the cores were, over the variant's wall time. Well under 1, the CPU did not hold the
   * intents back, and the CPU ratio does not predict the throughput one.
   */
  readonly machineBusyShare: number;
}

function throughputOf(runs: readonly Run[]): Throughput {
  const wallMs = runs.reduce((sum, r) => sum + r.wallMs, 0);
  const count = runs.reduce((sum, r) => sum + r.count, 0);
  const durations = runs.flatMap((r) => r.durations).sort((a, b) => a - b);
  const cpuMsPerIntent: Record<string, number> = {};
  for (const run of runs) for (const [label, seconds] of Object.entries(run.cpuSeconds)) cpuMsPerIntent[label] = (cpuMsPerIntent[label] ?? 0) + (seconds * 1000) / count;
  const cpuMsTotalPerIntent = Math.round(Object.values(cpuMsPerIntent).reduce((a, b) => a + b, 0));
  for (const label of Object.keys(cpuMsPerIntent)) cpuMsPerIntent[label] = Math.round(cpuMsPerIntent[label]!);
  const ledgerRoundTripsPerIntent = Number((runs.reduce((sum, r) => sum + r.ledgerRoundTrips, 0) / count).toFixed(1));
  const machineBusyShare = Number((runs.reduce((sum, r) => sum + r.machineBusyShare * r.wallMs, 0) / wallMs).toFixed(3));
  return { wallMs, perSecond: count / (wallMs / 1000), medianMs: percentile(durations, 50)!, cpuMsPerIntent, cpuMsTotalPerIntent, ledgerRoundTripsPerIntent, machineBusyShare };
}

/** `worker 812, dev server 301, PostgreSQL 95` of a variant's CPU ms per intent. */
function cpuLine(cpu: Record<string, number>): string {
  return Object.entries(cpu)
    .map(([label, ms]) => `${label} ${ms}`)
    .join(', ');
}

async function bare(s: Bench): Promise<{ wallMs: number; perSecond: number; medianMs: number }> {
  const queue = 'bare';
  const worker = await Worker.create({
    connection: s.native,
    namespace: s.server.namespace,
    taskQueue: queue,
    workflowsPath: require.resolve('./bare/workflow'),
    activities: bareActivities,
  });
  const durations: number[] = [];
  const started = t();
  await withWorker(worker, () =>
    mapLimit(
      Array.from({ length: N }, (_, i) => i),
      C,
      async (i) => {
        const begun = t();
        await s.client.workflow.execute('bareSixStages', { taskQueue: queue, workflowId: `bare-${i}-${Date.now()}` });
        durations.push(t() - begun);
        progress(`bare six no-op activities: ${durations.length}/${N}`);
      },
    ),
  );
  endProgress();
  const wallMs = t() - started;
  return { wallMs, perSecond: N / (wallMs / 1000), medianMs: percentile([...durations].sort((a, b) => a - b), 50)! };
}

/** G intents wait at the merge gate; each is approved; signal → next activity started, from history. */
async function gateLatency(s: Bench): Promise<{ medianMs: number; p99Ms: number; samples: number }> {
  const queue = 'gates';
  const repos = await makeRepos(s, queue, G);
  const worker = await benchWorker(s, queue);
  const latencies: number[] = [];
  await withWorker(worker, () =>
    mapLimit(repos, C, async (repo, i) => {
      const handle = await startIntent(
        s.client,
        { id: `${queue}-${i}`, goal: 'Add slugify', repoPath: repo, paths: ['lib/**'], agent: { kind: 'scripted', name: 'bench-gates', scriptPath: s.demoScript }, limits: { cooldown: '0s' } },
        queue,
      );
      for (;;) {
        if ((await handle.query(stateQuery)).pendingGate?.gate === 'merge') break;
        await sleep(50);
      }
      await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'bench' });
      await handle.result();
      const events = (await handle.fetchHistory()).events ?? [];
      const signalled = events.find((e) => e.workflowExecutionSignaledEventAttributes);
      const scheduledAfter = events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'archiveLineage');
      const startedEvent = events.find((e) => e.activityTaskStartedEventAttributes?.scheduledEventId?.toString() === scheduledAfter?.eventId?.toString());
      const ms = (e: (typeof events)[number] | undefined): number => Number(e!.eventTime!.seconds) * 1000 + Math.round((e!.eventTime!.nanos ?? 0) / 1e6);
      latencies.push(ms(startedEvent) - ms(signalled));
      progress(`gate latency: ${latencies.length}/${G}`);
    }),
  );
  endProgress();
  const sorted = [...latencies].sort((a, b) => a - b);
  return { medianMs: percentile(sorted, 50)!, p99Ms: percentile(sorted, 99)!, samples: sorted.length };
}

interface PerIntent {
  readonly intents: number;
  readonly totalMs: number;
  readonly wardenOwnMs: number;
  readonly testsMs: number;
  readonly agentMs: number;
  readonly gitProcesses: number;
  readonly ledgerRoundTrips: number;
}

/**
 * K intents one at a time, after one to warm the worker up (its launcher, the sandbox probe):
 * per intent, the total, the agent's and the tests' time from the process tally, Warden's own
 * (the rest), the git processes it started and the queries its ledger pool sent. Kept apart from
 * the timed runs so that nothing here touches their figures.
 */
async function perIntent(s: Bench): Promise<PerIntent> {
  const queue = 'measure';
  const agent = `bench-${queue}`;
  await new LadderStore(s.database.pool).setLevel({ scope: `agent:${agent}`, level: 3, pinned: true, by: 'bench', defaults: { level: 0, allowLevelUp: false } });
  const [warmUp, ...repos] = await makeRepos(s, queue, K + 1);
  const worker = await benchWorker(s, queue);
  return withWorker(worker, async () => {
    await runToMerge(s, queue, { id: `${queue}-warm-up`, repo: warmUp!, agentName: agent });
    const tallied = processTally();
    const roundTrips = s.ledgerRoundTrips();
    let totalMs = 0;
    for (const [i, repo] of repos.entries()) {
      const begun = t();
      await runToMerge(s, queue, { id: `${queue}-${i}`, repo, agentName: agent });
      totalMs += t() - begun;
      progress(`one at a time: ${i + 1}/${K} merged`);
    }
    endProgress();
    const spent = tallySince(tallied);
    const each = (n: number): number => Number((n / K).toFixed(1));
    return {
      intents: K,
      totalMs: each(totalMs),
      wardenOwnMs: each(totalMs - spent.childMs.agent - spent.childMs.tests),
      testsMs: each(spent.childMs.tests),
      agentMs: each(spent.childMs.agent),
      gitProcesses: each(spent.launched.git ?? 0),
      ledgerRoundTrips: each(s.ledgerRoundTrips() - roundTrips),
    };
  });
}

async function makeRepos(s: Bench, label: string, count: number): Promise<string[]> {
  const repos: string[] = [];
  for (let i = 0; i < count; i++) {
    repos.push(createSampleRepo(path.join(s.tmp, 'repos', label, `repo-${i}`)));
    if ((i + 1) % 25 === 0 || i + 1 === count) progress(`creating ${count} sample repos for ${label}: ${i + 1}/${count}`);
  }
  endProgress();
  return repos;
}

async function main(): Promise<number> {
  out(`pipeline benchmark: ${N} intents per variant, ${G} gates, concurrency ${C}, ${K} intents one at a time; ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown cpu'}), node ${process.version}`);
  const s = await startBench('pipeline');
  try {
    const { on, off } = await onAndOff(s);
    const floor = await bare(s);
    const gates = await gateLatency(s);
    const one = await perIntent(s);
    const result = {
      intents: N,
      concurrency: C,
      cores: os.cpus().length,
      safetyOn: on,
      safetyOff: off,
      bare: floor,
      throughputOnVsOff: on.perSecond / off.perSecond,
      cpuOffVsOn: off.cpuMsTotalPerIntent / on.cpuMsTotalPerIntent,
      timeOnVsBare: on.medianMs / floor.medianMs,
      gateLatency: gates,
      perIntent: one,
    };
    out('');
    out(`| variant | wall time | intents/s | median per intent |`);
    out(`|---|---|---|---|`);
    out(`| safety on | ${secs(on.wallMs)} | ${on.perSecond.toFixed(2)} | ${on.medianMs.toFixed(0)} ms |`);
    out(`| safety off | ${secs(off.wallMs)} | ${off.perSecond.toFixed(2)} | ${off.medianMs.toFixed(0)} ms |`);
    out(`| bare Temporal, six no-op activities | ${secs(floor.wallMs)} | ${floor.perSecond.toFixed(2)} | ${floor.medianMs.toFixed(0)} ms |`);
    out('');
    out(`throughput, safety on / off: ${result.throughputOnVsOff.toFixed(3)} (target ≥ 0.95)`);
    out(
      `CPU per intent, safety on: ${on.cpuMsTotalPerIntent} ms (${cpuLine(on.cpuMsPerIntent)}); off: ${off.cpuMsTotalPerIntent} ms (${cpuLine(off.cpuMsPerIntent)}); ` +
        `ledger round trips per intent: on ${on.ledgerRoundTripsPerIntent}, off ${off.ledgerRoundTripsPerIntent}`,
    );
    // On a machine whose cores the runs keep busy, throughput goes as the inverse of CPU per intent.
    out(`CPU per intent, safety off / on: ${result.cpuOffVsOn.toFixed(3)} (the throughput ratio this CPU predicts where the cores are the limit; target ≥ 0.95)`);
    out(`cores busy: ${pct(on.machineBusyShare)} with safety on, ${pct(off.machineBusyShare)} off (everything on the machine counts; well under 100 % would mean the CPU did not hold the intents back)`);
    out(`median time per intent, safety on / bare: ${result.timeOnVsBare.toFixed(1)}× (target ≤ 1.5×; the pipeline does real git work and runs the repo's tests twice, the bare one nothing)`);
    out(`gate latency (approve signal → next activity started): median ${gates.medianMs} ms, p99 ${gates.p99Ms} ms over ${gates.samples} gates`);
    out(
      `per intent (concurrency 1, ${one.intents} intents): total ${one.totalMs.toFixed(0)} ms, Warden's own ${one.wardenOwnMs.toFixed(0)} ms (target ≤ 500), ` +
        `tests ${one.testsMs.toFixed(0)} ms, agent ${one.agentMs.toFixed(0)} ms; git processes ${one.gitProcesses} (target ≤ 30); ledger round trips ${one.ledgerRoundTrips}`,
    );
    await writeResult('pipeline', result, {
      safetyOnOff: Number(result.throughputOnVsOff.toFixed(3)),
      cpuMsPerIntent: { safetyOn: on.cpuMsTotalPerIntent, safetyOff: off.cpuMsTotalPerIntent },
      cpuOffOverOn: Number(result.cpuOffVsOn.toFixed(3)),
      machineBusyShare: { safetyOn: on.machineBusyShare, safetyOff: off.machineBusyShare },
      ledgerRoundTripsPerIntentAtConcurrency: { safetyOn: on.ledgerRoundTripsPerIntent, safetyOff: off.ledgerRoundTripsPerIntent },
      perSecond: { safetyOn: Number(on.perSecond.toFixed(3)), safetyOff: Number(off.perSecond.toFixed(3)), bare: Number(floor.perSecond.toFixed(3)) },
      gateMedianMs: gates.medianMs,
      gateP99Ms: gates.p99Ms,
      totalMsPerIntent: one.totalMs,
      wardenOwnMsPerIntent: one.wardenOwnMs,
      testsMsPerIntent: one.testsMs,
      agentMsPerIntent: one.agentMs,
      gitProcessesPerIntent: one.gitProcesses,
      ledgerRoundTripsPerIntent: one.ledgerRoundTrips,
    });
    return 0;
  } finally {
    await s.close();
  }
}

runBenchmark('pipeline', main);
