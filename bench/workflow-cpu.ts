/**
 * What the SDK's promise stack traces cost Warden's workflow code: the recorded intent histories
 * (test/fixtures/histories/intent-*.json: merged, rejected, cancelled, rewound, a gate timed out)
 * replayed against today's workflow code, with the workflow threads' promise hook (as a worker
 * with `worker.workflowStackTraces` runs) and without it (the default,
 * src/workers/workflow-stack-traces.ts), in alternating rounds in one process. A replay runs every
 * workflow task of the history in a workflow thread as a worker does (not in the main thread, the
 * SDK's default for replays), with no server: the CPU it takes is the workflow side's own.
 *
 *   npx tsx bench/workflow-cpu.ts [--reps 20] [--rounds 3] [--smoke]
 *   npm run bench:workflow-cpu
 *
 * Printed per round: histories replayed, wall time and the process's CPU time (all threads), then
 * the medians and the ratio with / without. Results: bench/results/workflow-cpu.json.
 */
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { Worker, type ReplayWorkerOptions } from '@temporalio/worker';
import { workflowIdForIntent } from '../src/shared/ids';
import { WORKFLOW_INTERCEPTOR_MODULES } from '../src/workers/warden-worker';
import { bundleWorkflowsApart } from '../src/workers/workflow-bundle';
import { withoutWorkflowStackTraces } from '../src/workers/workflow-stack-traces';
import { out, percentile, runBenchmark, sized, t } from './console';
import { REPO_ROOT, writeResult } from './harness';

const { values: flags } = parseArgs({ options: { reps: { type: 'string' }, rounds: { type: 'string' }, smoke: { type: 'boolean', default: false } } });
const REPS = sized(flags.reps, flags.smoke, 20, 1);
const ROUNDS = sized(flags.rounds, flags.smoke, 3, 1);
if (!Number.isInteger(REPS) || REPS < 1 || !Number.isInteger(ROUNDS) || ROUNDS < 1) {
  out('--reps and --rounds take whole numbers ≥ 1');
  process.exit(2);
}
const FIXTURES = path.join(REPO_ROOT, 'test', 'fixtures', 'histories');

interface Round {
  readonly stackTraces: boolean;
  readonly histories: number;
  readonly wallMs: number;
  readonly cpuMs: number;
}

/** The recorded intent histories, each with the workflow id its run had (the workflow reads it). */
function intentHistories() {
  return readdirSync(FIXTURES)
    .filter((file) => file.startsWith('intent-') && file.endsWith('.json'))
    .map((file) => {
      const json = JSON.parse(readFileSync(path.join(FIXTURES, file), 'utf8')) as { events: Array<{ workflowExecutionStartedEventAttributes?: { input: { payloads: Array<{ data: string }> } } }> };
      const data = json.events[0]!.workflowExecutionStartedEventAttributes!.input.payloads[0]!.data;
      const { id } = JSON.parse(Buffer.from(data, 'base64').toString('utf8')) as { id: string };
      return { file, workflowId: workflowIdForIntent(id), history: historyFromJSON(json) };
    });
}

async function replayRound(bundle: { readonly code: string }, histories: ReturnType<typeof intentHistories>, stackTraces: boolean): Promise<Round> {
  const inputs = Array.from({ length: REPS }, () => histories.map(({ workflowId, history }) => ({ workflowId, history }))).flat();
  const cpu = process.cpuUsage();
  const started = t();
  let replayed = 0;
  // The SDK replays in the main thread unless told otherwise (its replay options' type leaves
  // debugMode out, but the replay worker takes it); a worker runs workflows in threads.
  const options = { workflowBundle: bundle, debugMode: false } as ReplayWorkerOptions;
  const replayAll = async () => {
    for await (const result of Worker.runReplayHistories(options, inputs)) {
      if (result.error) throw new Error(`${result.workflowId} did not replay: ${result.error.message}`);
      replayed += 1;
    }
  };
  if (stackTraces) await replayAll();
  else await withoutWorkflowStackTraces(replayAll);
  const wallMs = t() - started;
  const used = process.cpuUsage(cpu);
  return { stackTraces, histories: replayed, wallMs, cpuMs: (used.user + used.system) / 1000 };
}

async function main(): Promise<number> {
  const histories = intentHistories();
  out(`workflow CPU with and without promise stack traces: ${histories.length} intent histories × ${REPS} per round, ${ROUNDS} round(s) each, alternating; ${os.cpus().length} cores, node ${process.version}`);
  const bundle = await bundleWorkflowsApart(WORKFLOW_INTERCEPTOR_MODULES);
  const rounds: Round[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    for (const stackTraces of [true, false]) {
      const round = await replayRound(bundle, histories, stackTraces);
      rounds.push(round);
      out(`round ${i + 1}, stack traces ${stackTraces ? 'on ' : 'off'}: ${round.histories} histories in ${Math.round(round.wallMs)} ms, ${Math.round(round.cpuMs)} ms of CPU`);
    }
  }
  const median = (on: boolean, key: 'wallMs' | 'cpuMs') => percentile([...rounds.filter((r) => r.stackTraces === on).map((r) => r[key])].sort((a, b) => a - b), 50)!;
  const figures = {
    histories: rounds[0]!.histories,
    rounds: ROUNDS,
    withCpuMs: Math.round(median(true, 'cpuMs')),
    withoutCpuMs: Math.round(median(false, 'cpuMs')),
    cpuWithOverWithout: Number((median(true, 'cpuMs') / median(false, 'cpuMs')).toFixed(2)),
    wallWithOverWithout: Number((median(true, 'wallMs') / median(false, 'wallMs')).toFixed(2)),
  };
  out(`median CPU: ${figures.withCpuMs} ms with the promise hook, ${figures.withoutCpuMs} ms without: ${figures.cpuWithOverWithout}× (wall ${figures.wallWithOverWithout}×)`);
  await writeResult('workflow-cpu', { cores: os.cpus().length, node: process.version, rounds }, figures);
  return 0;
}

runBenchmark('workflow-cpu', main);
