/**
 * Benchmarks that cannot rot: each `bench:*` / `chaos:*` script in package.json runs at its smoke
 * size and must exit 0 with its figures as a JSON line. The figures themselves are not checked (a
 * smoke size measures nothing); that the benchmark still runs against today's code is. Those on
 * the real Temporal server run in real-server-smoke.test.ts, once it is built.
 */
import { benchScripts, REAL_SERVER_BENCHES } from '../../bench/smoke';
import { smokeTests } from '../helpers/bench-smokes';

describe('every benchmark at its smoke size', () => {
  test('the list holds every benchmark script', () => {
    const names = benchScripts().map((b) => b.name);
    expect(names).toEqual(expect.arrayContaining(['bench:peer', 'bench:pipeline', 'bench:kill', 'chaos', 'chaos:local', ...REAL_SERVER_BENCHES]));
  });

  smokeTests(benchScripts().filter((b) => !REAL_SERVER_BENCHES.has(b.name)));
});
