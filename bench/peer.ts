/**
 * Warden's orchestration core against a peer, side by side in one run on one machine: the same
 * six-stage pipeline (triage → lld → spec → impl → review → human gate → merge) with stages that
 * do nothing,
 *
 * - on Warden: `intentWorkflow` on a real Temporal dev server, with the stage guard, the gate
 *   keeper, the agent-safety interceptor and the PostgreSQL ledger all real and every stage
 *   activity answered at once (bench/core/noop-activities.ts);
 * - on LangGraph-JS with its PostgreSQL checkpointer (bench/peer/langgraph-pipeline.ts), on the
 *   same embedded PostgreSQL, with its default durability (async) and with sync;
 * - and, as the floor of any pipeline on Temporal, a bare workflow of six no-op activities, and
 *   the same with a gate (a signal awaited before merge), whose resume is the floor of a gate's;
 *
 * at each concurrency given: pipelines per second (the gate answered as soon as it is open: for
 * Warden, once the review package is on the pending gate), and gate-resume latency, from the
 * approve call to the merge stage's first activity starting (Warden's rebase onto the base branch).
 *
 *   npm run bench:peer -- [--pipelines 200] [--concurrency 1,8] [--warmup 20] [--smoke]
 *
 * `--smoke`: 3 pipelines per level, no warm-up; checks that the benchmark runs, not its figures.
 *
 * LangGraph is a dependency of this benchmark only: bench/peer/package.json, installed into
 * bench/peer/node_modules on the first run. Results: bench/results/peer.json.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Context } from '@temporalio/activity';
import { Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { startIntent } from '../src/client/intents';
import { LadderStore } from '../src/ledger/ladder-store';
import { workflowIdForIntent } from '../src/shared/ids';
import { decideSignal, stateQuery } from '../src/shared/messages';
import * as bareActivities from './bare/activities';
import { bareApproveSignal, bareAtGateQuery } from './bare/workflow';
import { intentShape, type IntentShape } from './core/intent-shape';
import { noopStageActivities } from './core/noop-activities';
import { endProgress, mapLimit, out, percentile, progress, runBenchmark, secs, sleep, t } from './console';
import { benchWorker, startBench, withWorker, writeResult, type Bench } from './harness';
import type { CreatePeerPipeline } from './peer-types';

const { values: flags } = parseArgs({
  options: {
    pipelines: { type: 'string' },
    concurrency: { type: 'string', default: '1,8' },
    warmup: { type: 'string' },
    smoke: { type: 'boolean', default: false },
  },
});
const N = Number(flags.pipelines ?? (flags.smoke ? 3 : 200));
const WARMUP = Number(flags.warmup ?? (flags.smoke ? 0 : 20));
const LEVELS = flags.concurrency.split(',').map(Number);
if (!Number.isInteger(N) || N < 1 || !Number.isInteger(WARMUP) || WARMUP < 0 || LEVELS.some((c) => !Number.isInteger(c) || c < 1)) {
  out('--pipelines takes a whole number ≥ 1, --warmup one ≥ 0, --concurrency a comma-separated list of them (e.g. 1,8)');
  process.exit(2);
}

const PEER_DIR = path.join(__dirname, 'peer');

interface Run {
  readonly system: string;
  readonly concurrency: number;
  readonly pipelines: number;
  readonly wallMs: number;
  readonly perSecond: number;
  readonly gate: { readonly medianMs: number; readonly p99Ms: number };
}

/** One pipeline: run to the gate, approve, and say how long the approve took to reach merge. */
type Pipeline = (index: number) => Promise<number>;

async function measure(system: string, concurrency: number, pipeline: Pipeline, first: number): Promise<Run> {
  const latencies: number[] = [];
  const started = t();
  await mapLimit(
    Array.from({ length: N }, (_, i) => first + i),
    concurrency,
    async (index) => {
      latencies.push(await pipeline(index));
      if (latencies.length % 10 === 0 || latencies.length === N) progress(`${system}, concurrency ${concurrency}: ${latencies.length}/${N} merged, ${secs(t() - started)}`);
    },
  );
  endProgress();
  const wallMs = t() - started;
  const sorted = [...latencies].sort((a, b) => a - b);
  return { system, concurrency, pipelines: N, wallMs, perSecond: N / (wallMs / 1000), gate: { medianMs: percentile(sorted, 50)!, p99Ms: percentile(sorted, 99)! } };
}

/** Resolves once `key` has been signalled through `settle`; either may come first. */
class Rendezvous<T> {
  private readonly waiting = new Map<string, { promise: Promise<T>; resolve: (value: T) => void }>();
  private entry(key: string) {
    let found = this.waiting.get(key);
    if (!found) {
      let resolve!: (value: T) => void;
      const promise = new Promise<T>((r) => (resolve = r));
      found = { promise, resolve };
      this.waiting.set(key, found);
    }
    return found;
  }
  wait(key: string): Promise<T> {
    return this.entry(key).promise.finally(() => this.waiting.delete(key));
  }
  settle(key: string, value: T): void {
    this.entry(key).resolve(value);
  }
}

async function wardenIntentShape(s: Bench, workflowId: string): Promise<IntentShape> {
  return intentShape((await s.client.workflow.getHandle(workflowId).fetchHistory()).events ?? []);
}

async function wardenRuns(s: Bench): Promise<{ runs: Run[]; shape: IntentShape; eagerStarts: number }> {
  const atGate = new Rendezvous<void>();
  const mergeAt = new Rendezvous<number>();
  const worker = await benchWorker(s, 'core', {
    wrapActivities: (real) =>
      noopStageActivities(real, {
        reviewPackageBuilt: (intentId) => atGate.settle(intentId, undefined),
        mergeStarted: (intentId) => mergeAt.settle(intentId, t()),
      }),
  });
  // Pinned at L0: every merge waits for a person however many runs succeed (the ladder would climb).
  await new LadderStore(s.database.pool).setLevel({ scope: 'agent:bench-core', level: 0, pinned: true, by: 'bench', defaults: { level: 0, allowLevelUp: false } });
  const repoPath = path.join(s.tmp, 'no-repo'); // never opened: no stage touches it
  // Through the worker's own connection, eagerly (startIntent's `eager`).
  const starter = new Client({ connection: s.native, namespace: s.server.namespace });
  let eagerStarts = 0;
  const pipeline: Pipeline = async (index) => {
    const id = `core-${index}`;
    const handle = await startIntent(starter, { id, goal: 'No-op pipeline', repoPath, paths: ['lib/**'], agent: { kind: 'scripted', name: 'bench-core', scriptPath: s.demoScript }, limits: { cooldown: '0s' } }, 'core', { eager: true });
    if (handle.eagerlyStarted) eagerStarts += 1;
    // Approve once the gate is open as a person finds it: its review package shown, the workflow
    // waiting (LangGraph's is open once the graph has returned at its interrupt).
    await atGate.wait(id);
    while (!(await handle.query(stateQuery)).pendingGate?.package) await sleep(1);
    const merged = mergeAt.wait(id);
    const asked = t();
    await handle.signal(decideSignal, { gate: 'merge', decision: 'approve', by: 'bench' });
    const latency = (await merged) - asked;
    const outcome = await handle.result();
    if (outcome.status !== 'merged') throw new Error(`${id} ended ${outcome.status}`);
    return latency;
  };
  const runs = await withWorker(worker, () => runLevels('Warden core (intentWorkflow, safety on, no-op stages)', pipeline));
  return { runs, shape: await wardenIntentShape(s, workflowIdForIntent(`core-${WARMUP}`)), eagerStarts };
}

async function peerRuns(s: Bench, createPeerPipeline: CreatePeerPipeline, durability: 'async' | 'sync'): Promise<Run[]> {
  const mergeAt = new Rendezvous<number>();
  const peer = await createPeerPipeline({ connectionString: s.database.pool.options.connectionString }, durability, (threadId, stage) => {
    if (stage === 'merge') mergeAt.settle(threadId, t());
  });
  const pipeline: Pipeline = async (index) => {
    const thread = `peer-${durability}-${index}`;
    await peer.runToGate(thread);
    const merged = mergeAt.wait(thread);
    const asked = t();
    const done = await peer.decide(thread, 'approve');
    if (done.at(-1) !== 'merge') throw new Error(`${thread} ended after ${done.join(', ')}`);
    return (await merged) - asked;
  };
  try {
    return await runLevels(`LangGraph-JS + PostgresSaver (durability ${durability})`, pipeline);
  } finally {
    await peer.close();
  }
}

/** The floor of any pipeline on Temporal: a bare workflow of six no-op activities (no gate, no ledger). */
async function bareRuns(s: Bench): Promise<Run[]> {
  const worker = await Worker.create({ connection: s.native, namespace: s.server.namespace, taskQueue: 'bare', workflowsPath: require.resolve('./bare/workflow'), activities: bareActivities });
  const pipeline: Pipeline = async (index) => {
    await s.client.workflow.execute('bareSixStages', { taskQueue: 'bare', workflowId: `bare-${index}` });
    return Number.NaN;
  };
  return withWorker(worker, () => runLevels('bare Temporal workflow, six no-op activities, no gate', pipeline));
}

/**
 * Temporal's own floor for the gate: the bare six no-op activities with a signal awaited before
 * merge, approved once the workflow says it waits (as Warden's is once its gate is open), the
 * latency from the signal call to the merge activity's code starting, as for Warden.
 */
async function bareGateRuns(s: Bench): Promise<Run[]> {
  const atGate = new Rendezvous<void>();
  const mergeAt = new Rendezvous<number>();
  const activities: typeof bareActivities = {
    ...bareActivities,
    noop: async (stage) => {
      const workflowId = Context.current().info.workflowExecution?.workflowId ?? '';
      if (stage === 'review') atGate.settle(workflowId, undefined);
      if (stage === 'merge') mergeAt.settle(workflowId, t());
      return stage;
    },
  };
  const worker = await Worker.create({ connection: s.native, namespace: s.server.namespace, taskQueue: 'bare-gate', workflowsPath: require.resolve('./bare/workflow'), activities });
  const pipeline: Pipeline = async (index) => {
    const id = `bare-gate-${index}`;
    const handle = await s.client.workflow.start('bareSixStagesWithGate', { taskQueue: 'bare-gate', workflowId: id });
    await atGate.wait(id);
    while (!(await handle.query(bareAtGateQuery))) await sleep(1);
    const merged = mergeAt.wait(id);
    const asked = t();
    await handle.signal(bareApproveSignal);
    const latency = (await merged) - asked;
    await handle.result();
    return latency;
  };
  return withWorker(worker, () => runLevels('bare Temporal workflow, six no-op activities and a gate', pipeline));
}

/** A few pipelines to warm up (not counted), then N at each concurrency level. */
async function runLevels(system: string, pipeline: Pipeline): Promise<Run[]> {
  let next = 0;
  if (WARMUP > 0) {
    await mapLimit(Array.from({ length: WARMUP }, (_, i) => i), 4, async (i) => void (await pipeline(i)));
    next = WARMUP;
  }
  const runs: Run[] = [];
  for (const c of LEVELS) {
    runs.push(await measure(system, c, pipeline, next));
    next += N;
  }
  return runs;
}

/** LangGraph lives in bench/peer/node_modules: installed there on first use, never in Warden's own tree. */
function loadPeer(): CreatePeerPipeline {
  if (!existsSync(path.join(PEER_DIR, 'node_modules', '@langchain', 'langgraph-checkpoint-postgres'))) {
    out('installing the peer (bench/peer/package.json) into bench/peer/node_modules…');
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: PEER_DIR, stdio: 'inherit' });
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (require(path.join(PEER_DIR, 'langgraph-pipeline')) as { createPeerPipeline: CreatePeerPipeline }).createPeerPipeline;
}

async function main(): Promise<number> {
  out(`orchestration benchmark, Warden core vs LangGraph-JS: ${N} pipelines per concurrency level (${LEVELS.join(', ')}), ${WARMUP} warm-up; ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown cpu'}), node ${process.version}`);
  const createPeerPipeline = loadPeer();
  const s = await startBench('peer');
  try {
    const { runs: warden, shape, eagerStarts } = await wardenRuns(s);
    const peer = await peerRuns(s, createPeerPipeline, 'async');
    const peerSync = await peerRuns(s, createPeerPipeline, 'sync');
    const floor = await bareRuns(s);
    const gatedFloor = await bareGateRuns(s);
    const all = [...warden, ...peer, ...peerSync, ...floor, ...gatedFloor];
    out('');
    out('| system | concurrency | pipelines/s | gate resume median | gate resume p99 |');
    out('|---|---|---|---|---|');
    const ms = (value: number): string => (Number.isNaN(value) ? '–' : `${value.toFixed(1)} ms`);
    for (const r of [...all].sort((a, b) => a.concurrency - b.concurrency)) {
      out(`| ${r.system} | ${r.concurrency} | ${r.perSecond.toFixed(1)} | ${ms(r.gate.medianMs)} | ${ms(r.gate.p99Ms)} |`);
    }
    out('');
    const ratios = LEVELS.map((c) => {
      const w = warden.find((r) => r.concurrency === c)!;
      const p = peer.find((r) => r.concurrency === c)!;
      const b = floor.find((r) => r.concurrency === c)!;
      const g = gatedFloor.find((r) => r.concurrency === c)!;
      return {
        concurrency: c,
        throughput: w.perSecond / p.perSecond,
        gateMedian: w.gate.medianMs / p.gate.medianMs,
        overBare: w.perSecond / b.perSecond,
        overBareGated: w.perSecond / g.perSecond,
        gateOverBare: w.gate.medianMs / g.gate.medianMs,
      };
    });
    for (const r of ratios) {
      out(`concurrency ${r.concurrency}: throughput Warden / peer (its default durability) ${r.throughput.toFixed(2)}× (target ≥ 1.0), median gate resume Warden / peer ${r.gateMedian.toFixed(2)}× (target ≤ 1.0)`);
      out(`concurrency ${r.concurrency}: throughput Warden / bare Temporal workflow ${r.overBare.toFixed(2)}× (target ≥ 1.0); / the bare workflow with a gate ${r.overBareGated.toFixed(2)}×`);
      out(`concurrency ${r.concurrency}: median gate resume Warden / the bare workflow's gate ${r.gateOverBare.toFixed(2)}×`);
    }
    out(`Warden intents started eagerly (first workflow task in the start's answer): ${eagerStarts} of ${WARMUP + N * LEVELS.length}`);
    out(`one Warden intent: ${shape.workflowTasks} workflow tasks, ${shape.historyEvents} history events`);
    out(`  its events by type: ${shape.eventsByType.map(([type, n]) => `${type} ${n}`).join(', ')}`);
    shape.tasks.forEach((task, i) => out(`  workflow task ${i + 1}: ${task}`));
    const perLevel = (runs: Run[]) => Object.fromEntries(runs.map((r) => [`c${r.concurrency}`, Number(r.perSecond.toFixed(3))]));
    const first = warden[0]!;
    await writeResult('peer', { pipelines: N, warmup: WARMUP, cores: os.cpus().length, runs: all, ratios, shape, eagerStarts }, {
      warden: perLevel(warden),
      bare: perLevel(floor),
      overBare: Object.fromEntries(ratios.map((r) => [`c${r.concurrency}`, Number(r.overBare.toFixed(3))])),
      bareGated: perLevel(gatedFloor),
      overBareGated: Object.fromEntries(ratios.map((r) => [`c${r.concurrency}`, Number(r.overBareGated.toFixed(3))])),
      bareGateMedianMs: Number(gatedFloor[0]!.gate.medianMs.toFixed(1)),
      bareGateP99Ms: Number(gatedFloor[0]!.gate.p99Ms.toFixed(1)),
      langgraph: perLevel(peer),
      langgraphSync: perLevel(peerSync),
      gateMedianMs: Number(first.gate.medianMs.toFixed(1)),
      gateP99Ms: Number(first.gate.p99Ms.toFixed(1)),
      workflowTasksPerIntent: shape.workflowTasks,
      historyEventsPerIntent: shape.historyEvents,
    });
    return 0;
  } finally {
    await s.close();
  }
}

runBenchmark('orchestration', main);
