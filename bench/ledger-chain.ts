/**
 * What the ledger's hash chains cost its writes (src/ledger/chain-writer.ts): ledger write
 * throughput in rows per second through Warden's own write path, chained and, side by side,
 * unchained. The writes are what workers write: batches of one intent's rows through the
 * `appendToLedger` activity (one to four rows, safety events and now and then a gate decision, as
 * a workflow's flush sends them, redaction included), and cost rows one at a time through
 * `ledger.audit.recordCost`, from several writers at once over 50 intents. The unchained way is the
 * same activity and ledger writing the same batches in the same statement shape without the
 * chain's head (a Ledger built `unchainedForBenchmark`), into the same database. Rounds alternate
 * chained and unchained, each first by turns, so a drift of the machine's load falls on both. The
 * chain's budget: at most 5 % of the throughput. Last, one writer with the two ways alternating
 * write by write (the fairest side by side on a machine whose load drifts), and what hashing the
 * rows in Node takes alone.
 *
 *   npx tsx bench/ledger-chain.ts [--rows 4000] [--writers 8] [--rounds 6] [--smoke]
 *   npm run bench:ledger-chain
 *
 * `--smoke` runs the smallest size (a check that the bench runs, not figures). Against an
 * embedded PostgreSQL on this machine (loopback). Printed: rows per second of each way (the
 * median round), the chain's overhead in %, one writer's too, and a JSON line; results in
 * bench/results/ledger-chain.json.
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { createLedgerActivities, type LedgerRow } from '../src/activities/ledger-activities';
import { contentHash, safetyEventRow } from '../src/ledger/chained-rows';
import { Ledger } from '../src/ledger/ledger';
import { SafetyEventSchema } from '../src/ledger/types';
import { createRedactor } from '../src/shared/redact';
import { mapLimit, out, runBenchmark, sized, t } from './console';
import { startBench, writeResult } from './harness';

const { values: flags } = parseArgs({
  options: {
    rows: { type: 'string' },
    writers: { type: 'string' },
    rounds: { type: 'string' },
    smoke: { type: 'boolean', default: false },
  },
});
const ROWS = sized(flags.rows, flags.smoke, 4000, 150);
const WRITERS = sized(flags.writers, flags.smoke, 8, 4);
const ROUNDS = sized(flags.rounds, flags.smoke, 6, 2);
if (![ROWS, WRITERS, ROUNDS].every((n) => Number.isInteger(n) && n >= 1)) {
  out('--rows, --writers and --rounds take a whole number ≥ 1');
  process.exit(2);
}

type Writer = { readonly ledger: Ledger; readonly append: (batch: { rows: LedgerRow[] }) => Promise<{ inserted: number }> };

function writerFor(ledger: Ledger, reportsDir: string): Writer {
  const activities = createLedgerActivities({ ledger, redact: createRedactor(process.env), logger: pino({ level: 'silent' }), reportsDir });
  return { ledger, append: (batch) => activities.appendToLedger(batch) };
}

/** Write `i`: a cost row in every four, else a workflow's flush of 1-4 rows (a gate decision in some); returns its rows. */
async function write(w: Writer, i: number, round: string): Promise<number> {
  const at = new Date();
  const intentId = `bench-${round}-${i % 50}`;
  if (i % 4 === 3) {
    await w.ledger.audit.recordCost({ id: randomUUID(), timestamp: at, intentId, stage: 'impl', attempt: 1, agentId: 'bench', modelId: 'm', inputTokens: 10, outputTokens: 5, usd: '0.000100' });
    return 1;
  }
  const size = (i % 7) % 4 + 1;
  const rows: LedgerRow[] = Array.from({ length: size }, (_, k) =>
    k === 1 && i % 3 === 0
      ? { gateDecision: { id: randomUUID(), intentId, gate: 'merge', decision: 'approve', by: 'bench', reason: 'ok', conditions: [], requestedAt: at, decidedAt: at, timedOut: false } }
      : { safetyEvent: { id: randomUUID(), timestamp: at, eventType: 'STAGE_COMPLETED', severity: 'info', reason: `stage done ${i}.${k}`, intentId, metadata: { i, k, runId: 'r', historyLength: i } } },
  );
  await w.append({ rows });
  return size;
}

/** Rows per second writing about `rows` rows from `writers` writers at once. */
async function round(w: Writer, rows: number, writers: number, name: string): Promise<number> {
  const started = t();
  let written = 0;
  // Writes, not rows, are what the writers take turns at: about 2 rows a write.
  await mapLimit(Array.from({ length: Math.ceil(rows / 2) }, (_, i) => i), writers, async (i) => {
    written += await write(w, i, name);
  });
  return written / ((t() - started) / 1000);
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

async function main(): Promise<number> {
  const b = await startBench('ledger-chain');
  try {
    const chained = writerFor(b.ledger, b.tmp);
    const unchained = writerFor(new Ledger(b.database.pool, { unchainedForBenchmark: true }), b.tmp);
    let rounds = 0;
    /** Alternating rounds, chained first and unchained first by turns; the median round of each. */
    const sideBySide = async (writers: number): Promise<{ chained: number; unchained: number; overheadPct: number }> => {
      await round(chained, Math.ceil(ROWS / 10), writers, `warm-${writers}`);
      await round(unchained, Math.ceil(ROWS / 10), writers, `warm-${writers}`);
      const figures = { chained: [] as number[], unchained: [] as number[] };
      for (let r = 0; r < ROUNDS; r++) {
        for (const way of r % 2 === 0 ? (['chained', 'unchained'] as const) : (['unchained', 'chained'] as const)) {
          // Intents of their own each round: a chain is new at its first write, as an intent's is.
          figures[way].push(await round(way === 'chained' ? chained : unchained, ROWS, writers, `${rounds++}`));
        }
      }
      const c = median(figures.chained);
      const u = median(figures.unchained);
      return { chained: Math.round(c), unchained: Math.round(u), overheadPct: Math.round((1 - c / u) * 1000) / 10 };
    };
    /**
     * One writer, the two ways alternating write by write (each write's batch alike): a drift
     * of the machine's load within a round falls on both alike. Also what hashing the rows in
     * Node takes alone, per row.
     */
    const interleaved = async (): Promise<{ chained: number; unchained: number; overheadPct: number; hashUsPerRow: number }> => {
      const spent = { chained: 0, unchained: 0 };
      let rows = 0;
      for (let i = 0; i < ROWS / 2; i++) {
        for (const way of i % 2 === 0 ? (['chained', 'unchained'] as const) : (['unchained', 'chained'] as const)) {
          const started = t();
          const written = await write(way === 'chained' ? chained : unchained, i, 'interleaved');
          spent[way] += t() - started;
          if (way === 'chained') rows += written;
        }
      }
      const hashed = Array.from({ length: 2000 }, (_, i) => safetyEventRow(SafetyEventSchema.parse({ id: randomUUID(), timestamp: new Date(), eventType: 'STAGE_COMPLETED', severity: 'info', reason: `stage done ${i}`, intentId: 'bench', metadata: { i, runId: 'r', historyLength: i } })));
      for (const row of hashed) contentHash(row); // warm: the figure is the hashing, not the compiler
      const hashStarted = t();
      for (const row of hashed) contentHash(row);
      const hashUsPerRow = Math.round(((t() - hashStarted) * 1000) / hashed.length * 10) / 10;
      return { chained: Math.round(rows / (spent.chained / 1000)), unchained: Math.round(rows / (spent.unchained / 1000)), overheadPct: Math.round((spent.chained / spent.unchained - 1) * 1000) / 10, hashUsPerRow };
    };
    const single = await sideBySide(1);
    const concurrent = await sideBySide(WRITERS);
    const alternating = await interleaved();
    out(`${WRITERS} writers: ${concurrent.chained} rows/s chained, ${concurrent.unchained} rows/s unchained: the chain costs ${concurrent.overheadPct} %`);
    out(`1 writer:  ${single.chained} rows/s chained, ${single.unchained} rows/s unchained: the chain costs ${single.overheadPct} %`);
    out(`1 writer, write by write: ${alternating.chained} rows/s chained, ${alternating.unchained} rows/s unchained: the chain costs ${alternating.overheadPct} % (hashing in Node: ${alternating.hashUsPerRow} µs a row)`);
    const withinBudget = concurrent.overheadPct <= 5 && single.overheadPct <= 5 && alternating.overheadPct <= 5;
    out(withinBudget ? 'within the 5 % budget' : 'OVER the 5 % budget');
    const summary = { rows: ROWS, writers: WRITERS, rounds: ROUNDS, concurrent, single, interleaved: alternating, withinBudget };
    out(JSON.stringify(summary));
    // A smoke run's figures are no figures: the last real ones stay.
    if (!flags.smoke) await writeResult('ledger-chain', { ...summary, at: new Date().toISOString(), node: process.version });
    return 0;
  } finally {
    await b.close();
  }
}

runBenchmark('ledger-chain', main);
