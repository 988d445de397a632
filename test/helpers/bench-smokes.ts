import { smoke, type BenchScript } from '../../bench/smoke';

/** A hang guard, not a bound on how long a smoke may take: the slowest takes about two minutes. */
export const SMOKE_HANG_GUARD_MS = 20 * 60_000;

/**
 * Three benchmarks at a time: a smoke mostly waits on its own servers and timers (about a quarter
 * of its time on a CPU), so three side by side take about a third of the time one after another.
 */
const AT_ONCE = 3;
let running = 0;
const waiting: Array<() => void> = [];
async function inTurn<T>(work: () => Promise<T>): Promise<T> {
  if (running >= AT_ONCE) await new Promise<void>((resolve) => waiting.push(resolve));
  running++;
  try {
    return await work();
  } finally {
    running--;
    waiting.shift()?.();
  }
}

/** One concurrent test per benchmark: it runs at its smoke size, exits 0 and prints its figures. */
export function smokeTests(benches: readonly BenchScript[]): void {
  for (const bench of benches) {
    test.concurrent(`${bench.name} --smoke runs and prints its figures`, async () => {
      const run = await inTurn(() => smoke(bench, 10 * 60_000));
      if (!run.ok) throw new Error(`${bench.name} (${bench.file} --smoke): ${run.problem}\n${run.output.slice(-6000)}`);
    }, SMOKE_HANG_GUARD_MS);
  }
}
