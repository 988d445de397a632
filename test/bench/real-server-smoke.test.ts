/**
 * The benchmarks that run on the real Temporal server, at their smoke size (see smoke.test.ts):
 * `chaos`, and `bench:cluster` with its real-server columns. The server is built from source into
 * the Warden home (13 minutes on a busy two-core machine): this file first waits for the build
 * .ci/run started (or builds it), and fails if the build does.
 *
 * @runs-last: it waits for the Temporal server build .ci/run starts in the background (test/setup/sequencer.js).
 */
import { benchScripts, REAL_SERVER_BENCHES } from '../../bench/smoke';
import { ensureTemporalServer } from '../../src/runtime/temporal-server-install';
import { smokeTests } from '../helpers/bench-smokes';

/** A hang guard for the build, not a bound on how long it may take. */
const BUILD_HANG_GUARD_MS = 45 * 60_000;

beforeAll(async () => {
  await ensureTemporalServer({ log: (message) => process.stderr.write(`[temporal-server] ${message}\n`) });
}, BUILD_HANG_GUARD_MS);

describe('the benchmarks on the real Temporal server, at their smoke size', () => {
  test('both are benchmark scripts', () => {
    expect(benchScripts().map((b) => b.name)).toEqual(expect.arrayContaining([...REAL_SERVER_BENCHES]));
  });

  smokeTests(benchScripts().filter((b) => REAL_SERVER_BENCHES.has(b.name)));
});
