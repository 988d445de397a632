/**
 * What the cascade detector costs on large and adversarial answers, against ordinary text of the
 * same size: every agent answer goes through it, and a pattern that backtracks would turn a
 * repetitive answer into minutes of a worker's CPU. Each adversarial input and a same-sized slice
 * of ordinary prose are timed side by side, alternating in rounds so the machine's load hits both
 * alike; a detector that stays linear keeps the ratios near 1.
 *
 *   npx tsx bench/cascade-detector.ts [--rounds 5] [--smoke]
 *   npm run bench:cascade-detector
 *
 * `--smoke` runs one round on inputs a tenth the size (a check that the bench runs, not figures).
 * Printed: the best time per input each way, their ratio, and a JSON line; results in
 * bench/results/cascade-detector.json.
 */
import { parseArgs } from 'node:util';
import { detectCascade } from '../src/safety/cascade-detector';
import { out, runBenchmark } from './console';
import { writeResult } from './harness';

const { values: flags } = parseArgs({ options: { rounds: { type: 'string', default: '5' }, smoke: { type: 'boolean', default: false } } });
const ROUNDS = flags.smoke ? 1 : Number(flags.rounds);
const SCALE = flags.smoke ? 0.1 : 1;
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) {
  out('--rounds takes a whole number ≥ 1');
  process.exit(2);
}

const CONTEXT = { goal: 'Fix the parser', paths: ['src/parser/'] };
const times = (unit: string, n: number): string => unit.repeat(Math.max(1, Math.round(n * SCALE)));
/** The inputs test/safety/cascade-detector.test.ts feeds it, by name. */
const ADVERSARIAL: Record<string, string> = {
  'I noticed …': times('I noticed ', 20_000),
  'Should I continue with …': times('Should I continue with ', 10_000),
  'numbered list': times('1. x\n', 40_000),
  spaces: times(' ', 200_000),
  'also …': times('also ', 40_000),
  'nested paths': times('src/a/', 20_000),
};
const PROSE =
  'The parser now reads nested arrays without recursion, so deeply nested input no longer overflows the stack. ' +
  'Tests cover empty arrays, arrays of arrays and a thousand levels of nesting; all of them pass. ';

/** The same length of ordinary prose. */
const ordinaryLike = (text: string): string => PROSE.repeat(Math.ceil(text.length / PROSE.length)).slice(0, text.length);

function timeOnce(text: string): number {
  const started = performance.now();
  detectCascade(text, CONTEXT);
  return performance.now() - started;
}

async function main(): Promise<number> {
  detectCascade(PROSE, CONTEXT); // the learned model trains on first use: outside the measurement
  const rows: Array<{ input: string; chars: number; adversarialMs: number; ordinaryMs: number; ratio: number }> = [];
  for (const [name, text] of Object.entries(ADVERSARIAL)) {
    const ordinary = ordinaryLike(text);
    let adversarialMs = Infinity;
    let ordinaryMs = Infinity;
    for (let round = 0; round < ROUNDS; round++) {
      adversarialMs = Math.min(adversarialMs, timeOnce(text));
      ordinaryMs = Math.min(ordinaryMs, timeOnce(ordinary));
    }
    const round1 = (ms: number): number => Math.round(ms * 10) / 10;
    rows.push({ input: name, chars: text.length, adversarialMs: round1(adversarialMs), ordinaryMs: round1(ordinaryMs), ratio: round1(adversarialMs / Math.max(ordinaryMs, 0.1)) });
  }
  out(`best of ${ROUNDS} round(s) per input (ms)`);
  out(`${'input'.padEnd(28)}${'chars'.padStart(9)}${'adversarial'.padStart(13)}${'ordinary'.padStart(10)}${'ratio'.padStart(8)}`);
  for (const r of rows) out(`${r.input.padEnd(28)}${String(r.chars).padStart(9)}${r.adversarialMs.toFixed(1).padStart(13)}${r.ordinaryMs.toFixed(1).padStart(10)}${`${r.ratio}×`.padStart(8)}`);
  const worst = Math.max(...rows.map((r) => r.ratio));
  out(`worst ratio: ${worst}×`);
  const summary = { bench: 'cascade-detector', ...(flags.smoke ? { smoke: true } : {}), rounds: ROUNDS, inputs: rows, ratios: { worstAdversarialOverOrdinary: worst } };
  out(JSON.stringify(summary));
  // A smoke run's figures are no figures: the last real ones stay.
  if (!flags.smoke) await writeResult('cascade-detector', { ...summary, at: new Date().toISOString(), node: process.version });
  return 0;
}

runBenchmark('cascade-detector', main);
