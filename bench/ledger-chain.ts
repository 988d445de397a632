/**
 * What the ledger's hash chain costs its writes (src/ledger/chain.ts, migration 010): ledger
 * write throughput with the chain's triggers on and, side by side, off. Each round writes the
 * same mix as workers do (safety events, gate decisions and cost rows, one row per transaction
 * through the Ledger class) from several writers at once, and the rounds alternate chained and
 * unchained, so that a drift of the machine's load falls on both. The chain's budget: at most 5 %
 * of the throughput.
 *
 *   npx tsx bench/ledger-chain.ts [--rows 3000] [--writers 8] [--rounds 6] [--variant NAME] [--smoke]
 *   npm run bench:ledger-chain
 *
 * `--variant per-intent-head` or `--variant hash-only` first replaces the chain's trigger in the
 * bench's throwaway database with bench/ledger-chain-variants/NAME.sql, to see where the chain's
 * time goes: in a shared head's lock, in a head row's update, or in the hashing itself.
 *
 * `--smoke` runs the smallest size (a check that the bench runs, not figures). Against an
 * embedded PostgreSQL on this machine (loopback). Printed: rows per second of each way (the
 * median round), the chain's overhead in %, one writer's too, and a JSON line; results in
 * bench/results/ledger-chain.json.
 */
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Ledger } from '../src/ledger/ledger';
import { mapLimit, out, runBenchmark, sized, t } from './console';
import { startBench, writeResult } from './harness';

const { values: flags } = parseArgs({
  options: {
    rows: { type: 'string' },
    writers: { type: 'string' },
    rounds: { type: 'string' },
    variant: { type: 'string' },
    smoke: { type: 'boolean', default: false },
  },
});
const ROWS = sized(flags.rows, flags.smoke, 3000, 150);
const WRITERS = sized(flags.writers, flags.smoke, 8, 4);
const ROUNDS = sized(flags.rounds, flags.smoke, 6, 2);
if (![ROWS, WRITERS, ROUNDS].every((n) => Number.isInteger(n) && n >= 1)) {
  out('--rows, --writers and --rounds take a whole number ≥ 1');
  process.exit(2);
}

const VARIANTS = ['per-intent-head', 'hash-only'];
if (flags.variant !== undefined && !VARIANTS.includes(flags.variant)) {
  out(`--variant takes one of ${VARIANTS.join(', ')}`);
  process.exit(2);
}

const TRIGGERS = ['safety_events_chain', 'gate_decisions_chain', 'cost_events_chain'];
const TABLES = ['safety_events', 'gate_decisions', 'cost_events'];

/** One row of the mix: two safety events, a gate decision and a cost row in every four. */
function write(ledger: Ledger, i: number): Promise<boolean> {
  const at = new Date();
  const intentId = `bench-${i % 50}`;
  switch (i % 4) {
    case 0:
    case 1:
      return ledger.recordSafetyEvent({ id: randomUUID(), timestamp: at, eventType: 'STAGE_COMPLETED', severity: 'info', reason: `stage done ${i}`, intentId, metadata: { i } });
    case 2:
      return ledger.recordGateDecision({ id: randomUUID(), intentId, gate: 'merge', decision: 'approve', by: 'bench', reason: 'ok', conditions: [], requestedAt: at, decidedAt: at, timedOut: false });
    default:
      return ledger.recordCost({ id: randomUUID(), timestamp: at, intentId, stage: 'impl', attempt: 1, agentId: 'bench', modelId: 'm', inputTokens: 10, outputTokens: 5, usd: '0.000100' });
  }
}

/** Rows per second writing `rows` rows from `writers` writers at once. */
async function round(ledger: Ledger, rows: number, writers: number): Promise<number> {
  const started = t();
  await mapLimit(Array.from({ length: rows }, (_, i) => i), writers, async (i) => {
    await write(ledger, i);
  });
  return rows / ((t() - started) / 1000);
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

async function main(): Promise<number> {
  const b = await startBench('ledger-chain');
  try {
    if (flags.variant) await b.database.pool.query(await readFile(path.join(__dirname, 'ledger-chain-variants', `${flags.variant}.sql`), 'utf8'));
    const setChain = async (on: boolean): Promise<void> => {
      for (const [i, table] of TABLES.entries()) await b.database.pool.query(`ALTER TABLE ${table} ${on ? 'ENABLE' : 'DISABLE'} TRIGGER ${TRIGGERS[i]}`);
    };
    /** Alternating rounds, chained first and unchained first by turns; the median round of each. */
    const sideBySide = async (writers: number): Promise<{ chained: number; unchained: number; overheadPct: number }> => {
      await round(b.ledger, Math.ceil(ROWS / 10), writers); // warm-up
      const chained: number[] = [];
      const unchained: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        for (const on of r % 2 === 0 ? [true, false] : [false, true]) {
          await setChain(on);
          (on ? chained : unchained).push(await round(b.ledger, ROWS, writers));
        }
      }
      await setChain(true);
      const c = median(chained);
      const u = median(unchained);
      return { chained: Math.round(c), unchained: Math.round(u), overheadPct: Math.round((1 - c / u) * 1000) / 10 };
    };
    const concurrent = await sideBySide(WRITERS);
    const single = await sideBySide(1);
    out(`${WRITERS} writers: ${concurrent.chained} rows/s chained, ${concurrent.unchained} rows/s unchained: the chain costs ${concurrent.overheadPct} %`);
    out(`1 writer:  ${single.chained} rows/s chained, ${single.unchained} rows/s unchained: the chain costs ${single.overheadPct} %`);
    const withinBudget = concurrent.overheadPct <= 5 && single.overheadPct <= 5;
    out(withinBudget ? 'within the 5 % budget' : 'OVER the 5 % budget');
    const summary = { ...(flags.variant && { variant: flags.variant }), rows: ROWS, writers: WRITERS, rounds: ROUNDS, concurrent, single, withinBudget };
    out(JSON.stringify(summary));
    // A smoke run's figures are no figures, a variant's are not the chain's: the last real ones stay.
    if (!flags.smoke && !flags.variant) await writeResult('ledger-chain', { ...summary, at: new Date().toISOString(), node: process.version });
    return 0;
  } finally {
    await b.close();
  }
}

runBenchmark('ledger-chain', main);
