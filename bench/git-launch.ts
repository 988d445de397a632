/**
 * What a git call costs the worker, started from the worker itself against through the launcher
 * (src/activities/launcher.ts), while the worker holds M MB of memory (a worker with a full
 * workflow cache; jest's workers in the test suite). Both ways run side by side in one process,
 * alternating in rounds, so the machine's load hits both alike.
 *
 *   npx tsx bench/git-launch.ts [--calls 200] [--memory-mb 700] [--smoke]
 *   npm run bench:git-launch
 *
 * Prints the wall time per call and the worker's CPU per call for each way, their ratio, and a
 * JSON line; results in bench/results/git-launch.json.
 */
import { execFile } from 'node:child_process';
import { parseArgs } from 'node:util';
import { launch, stopLauncher } from '../src/activities/launcher';
import { out, percentile, runBenchmark, sized } from './console';
import { writeResult } from './harness';

const { values: flags } = parseArgs({ options: { calls: { type: 'string' }, 'memory-mb': { type: 'string' }, smoke: { type: 'boolean', default: false } } });
const CALLS = sized(flags.calls, flags.smoke, 200, 10);
const MEMORY_MB = sized(flags['memory-mb'], flags.smoke, 700, 50);
if (!Number.isInteger(CALLS) || CALLS < 10 || !Number.isInteger(MEMORY_MB) || MEMORY_MB < 0) {
  out('--calls takes a whole number ≥ 10, --memory-mb one ≥ 0');
  process.exit(2);
}

const OPTIONS = { cwd: process.cwd(), env: process.env, maxBuffer: 1024 * 1024 };

function direct(): Promise<void> {
  return new Promise((resolve, reject) => execFile('git', ['--version'], OPTIONS, (error) => (error ? reject(error) : resolve())));
}

async function throughLauncher(): Promise<void> {
  await launch('git', ['--version'], OPTIONS);
}

interface Way {
  readonly name: string;
  readonly call: () => Promise<void>;
  readonly wallMs: number[];
  cpuUs: number;
}

async function main(): Promise<number> {
  // Memory the worker holds and touches, as a cache would: every page is really there.
  const ballast = Array.from({ length: MEMORY_MB }, () => Buffer.alloc(1024 * 1024, 1));
  const ways: Way[] = [
    { name: 'from the worker', call: direct, wallMs: [], cpuUs: 0 },
    { name: 'through the launcher', call: throughLauncher, wallMs: [], cpuUs: 0 },
  ];
  await throughLauncher(); // start the launcher outside the measurement
  const rssMb = Math.round(process.memoryUsage().rss / 1e6);
  out(`git --version × ${CALLS} each way, from a process of ${rssMb} MB (${ballast.length} MB of it ballast)`);
  const rounds = 10;
  for (let round = 0; round < rounds; round++) {
    for (const way of ways) {
      for (let i = 0; i < CALLS / rounds; i++) {
        const cpu = process.cpuUsage();
        const started = performance.now();
        await way.call();
        way.wallMs.push(performance.now() - started);
        const used = process.cpuUsage(cpu);
        way.cpuUs += used.user + used.system;
      }
    }
  }
  stopLauncher();
  const summary = ways.map((way) => {
    const sorted = [...way.wallMs].sort((a, b) => a - b);
    return { way: way.name, p50Ms: percentile(sorted, 50)!, p99Ms: percentile(sorted, 99)!, workerCpuMsPerCall: way.cpuUs / 1000 / way.wallMs.length };
  });
  for (const s of summary) out(`${s.way.padEnd(22)} p50 ${s.p50Ms.toFixed(2)} ms  p99 ${s.p99Ms.toFixed(2)} ms  worker CPU ${s.workerCpuMsPerCall.toFixed(2)} ms/call`);
  const [here, launched] = summary as [(typeof summary)[0], (typeof summary)[0]];
  const ratio = { p50: here.p50Ms / launched.p50Ms, workerCpu: here.workerCpuMsPerCall / launched.workerCpuMsPerCall };
  out(`from the worker / through the launcher: p50 ${ratio.p50.toFixed(1)}×, worker CPU ${ratio.workerCpu.toFixed(1)}×`);
  const result = { benchmark: 'git-launch', calls: CALLS, rssMb, ways: summary, ratio };
  out(JSON.stringify(result));
  await writeResult('git-launch', result);
  return 0;
}

runBenchmark('git-launch', main);
