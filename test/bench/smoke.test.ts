/**
 * Benchmarks that cannot rot: each `bench:*` / `chaos:*` script in package.json runs at its smoke
 * size and must exit 0 with its figures as a JSON line. The figures themselves are not checked (a
 * smoke size measures nothing); that the benchmark still runs against today's code is.
 */
import { benchScripts, smoke } from '../../bench/smoke';
import { ensureTemporalServer } from '../../src/runtime/temporal-server-install';

/** A hang guard, not a bound on how long a smoke may take: the slowest takes about two minutes. */
const HANG_GUARD_MS = 20 * 60_000;
/**
 * `npm run chaos` runs on the real Temporal server, built from source into the Warden home (13
 * minutes on a busy two-core machine): its smoke first waits for the build .ci/run started (or
 * builds it), outside the smoke's own timeout, and fails if the build does.
 */
const BUILD_HANG_GUARD_MS = 45 * 60_000;
const needsRealServer = (name: string): boolean => name === 'chaos';

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

describe('every benchmark at its smoke size', () => {
  test('the list holds every benchmark script', () => {
    const names = benchScripts().map((b) => b.name);
    expect(names).toEqual(expect.arrayContaining(['bench:peer', 'bench:pipeline', 'bench:kill', 'chaos', 'chaos:local']));
  });

  for (const bench of benchScripts()) {
    test.concurrent(`${bench.name} --smoke runs and prints its figures`, async () => {
      if (needsRealServer(bench.name)) await ensureTemporalServer({ log: (message) => process.stderr.write(`[temporal-server] ${message}\n`) });
      const run = await inTurn(() => smoke(bench, 10 * 60_000));
      if (!run.ok) throw new Error(`${bench.name} (${bench.file} --smoke): ${run.problem}\n${run.output.slice(-6000)}`);
    }, needsRealServer(bench.name) ? BUILD_HANG_GUARD_MS + HANG_GUARD_MS : HANG_GUARD_MS);
  }
});
