import { createHash } from 'node:crypto';
import type pg from 'pg';
import { chainOf, CONTENT_COLUMNS, contentHash, type ChainedRow, type ChainedTable } from './chained-rows';

/*
 * The one place chained rows (safety events, gate decisions, cost rows) are inserted. A batch of
 * one chain is ONE statement: a CTE moves the chain's head in ledger_chains and inserts the rows
 * with their positions and the new head, so the chain costs no extra round trip, and the head's
 * row lock is held only by writers of the same intent, to their commit. The content hashes are
 * taken in Node (src/ledger/chained-rows.ts); PostgreSQL only chains them, with its built-in
 * sha256(bytea).
 *
 * Retries: ids are deterministic, so a retried batch names rows that may be there already. The
 * head moves only if none of the batch's ids exist (its WHERE NOT EXISTS); a retry of a batch
 * that was written inserts nothing and leaves the head. A retry racing its first write past that
 * check hits the ids' unique index, which fails the whole statement, head included, and it is run
 * again; a batch only part of which exists (rows queued after a write that did commit) is
 * written again without the rows that exist.
 */

const UNIQUE_VIOLATION = '23505';

const SQL_TYPE: Record<string, string> = {
  uuid: 'uuid', text: 'text', timestamptz: 'timestamptz', int: 'int', bigint: 'bigint', usd: 'numeric', jsonb: 'jsonb', boolean: 'boolean',
};

/** A statement's text and its parameters. */
interface Statement {
  readonly name: string;
  readonly text: string;
  readonly values: unknown[];
}

function columnParam(kind: string, value: unknown): unknown {
  if (value === undefined || value === null) return null;
  if (kind === 'timestamptz') return (value as Date).toISOString();
  if (kind === 'jsonb') return JSON.stringify(value);
  return value;
}

/** The rows of `table` in the batch: one array per column, and each row's place in the batch (1-based). */
function columnsOf(table: ChainedTable, batch: readonly ChainedRow[]): { ords: number[]; columns: unknown[][]; ids: string[] } {
  const spec = CONTENT_COLUMNS[table];
  const ords: number[] = [];
  const columns: unknown[][] = spec.map(() => []);
  const ids: string[] = [];
  batch.forEach((row, i) => {
    if (row.table !== table) return;
    ords.push(i + 1);
    spec.forEach(([column, kind], c) => columns[c]!.push(columnParam(kind, row.values[column])));
    ids.push(String(row.values.id));
  });
  return { ords, columns, ids };
}

/**
 * The statement that writes `batch` (rows of one chain). `chained: false` writes the same rows in
 * the same statement shape without the chain: the benchmark's side-by-side baseline only.
 */
function statement(batch: readonly ChainedRow[], chained: boolean): Statement {
  const tables = [...new Set(batch.map((r) => r.table))].sort();
  const values: unknown[] = [];
  const param = (value: unknown): string => {
    values.push(value);
    return `$${values.length}`;
  };
  const ctes: string[] = [];
  const counts: string[] = [];
  let head: { hashes: string; count: string } | undefined;
  let shape = 'plain';
  if (chained) {
    const chain = param(chainOf(batch[0]!));
    const hashes = param(Buffer.concat(batch.map(contentHash)));
    const count = param(batch.length);
    // The batch's first row stands for it: a batch is written whole or not at all, and a retry
    // puts the rows it repeats first. One id, not an array: PostgreSQL then plans the statement
    // once per connection (an array's unknown length keeps it re-planning every write).
    const first = batch[0]!;
    const firstId = param(String(first.values.id));
    const reservation = first.table === 'cost_events' && typeof first.values.reservation_id === 'string' ? param(first.values.reservation_id) : undefined;
    shape = `chained:${first.table}${reservation ? '+reservation' : ''}`;
    const exists = `NOT EXISTS (SELECT 1 FROM ${first.table} WHERE id = ${firstId}::uuid${reservation ? ` OR reservation_id = ${reservation}::text` : ''})`;
    ctes.push(
      `head AS (INSERT INTO ledger_chains AS c (chain, head, length) VALUES (${chain}, sha256(${hashes}::bytea), ${count}::bigint)
         ON CONFLICT (chain) DO UPDATE SET head = sha256(c.head || ${hashes}::bytea), length = c.length + ${count}::bigint
         WHERE ${exists}
         RETURNING head, length)`,
    );
    head = { hashes, count };
  }
  tables.forEach((table, t) => {
    const spec = CONTENT_COLUMNS[table];
    const { ords, columns } = columnsOf(table, batch);
    const ord = param(ords);
    const arrays = spec.map(([, kind], c) => `${param(columns[c])}::${kind === 'jsonb' ? 'text' : SQL_TYPE[kind]}[]`);
    const names = spec.map(([column]) => `"${column}"`);
    const selected = spec.map(([column, kind]) => (kind === 'jsonb' ? `v."${column}"::jsonb` : `v."${column}"`));
    const into = `INSERT INTO ${table} (${names.join(', ')}${head ? ', chain_pos, chain_head' : ''})`;
    const from = `unnest(${ord}::int[], ${arrays.join(', ')}) AS v(ord, ${names.join(', ')})`;
    ctes.push(
      head
        ? `w${t} AS (${into} SELECT ${selected.join(', ')}, head.length - ${head.count}::bigint + v.ord, head.head FROM head, ${from} ORDER BY v.ord RETURNING 1)`
        : `w${t} AS (${into} SELECT ${selected.join(', ')} FROM ${from} ORDER BY v.ord ON CONFLICT DO NOTHING RETURNING 1)`,
    );
    counts.push(`(SELECT count(*) FROM w${t})`);
  });
  const text = `WITH ${ctes.join(',\n')} SELECT (${counts.join(' + ')})::int AS inserted`;
  // Named by its shape, so PostgreSQL plans each shape once per connection; by a hash of it,
  // since PostgreSQL cuts a statement's name at 63 bytes (two shapes could then share one).
  return { name: `ledger-write-${createHash('sha256').update(`${shape}:${tables.join(',')}`).digest('hex').slice(0, 16)}`, text, values };
}

/** The rows of `batch` whose id (a cost row's: or reservation) is in the ledger already. */
async function existing(db: pg.Pool | pg.PoolClient, batch: readonly ChainedRow[]): Promise<Set<ChainedRow>> {
  const found = new Set<ChainedRow>();
  for (const table of new Set(batch.map((r) => r.table))) {
    const rows = batch.filter((r) => r.table === table);
    const { rows: there } = await db.query<{ id: string; reservation_id: string | null }>(
      `SELECT id::text, ${table === 'cost_events' ? 'reservation_id' : 'NULL::text AS reservation_id'} FROM ${table}
        WHERE id = ANY($1::uuid[])${table === 'cost_events' ? ' OR reservation_id = ANY($2::text[])' : ''}`,
      table === 'cost_events' ? [rows.map((r) => String(r.values.id)), rows.map((r) => r.values.reservation_id ?? null)] : [rows.map((r) => String(r.values.id))],
    );
    const ids = new Set(there.map((r) => r.id));
    const reservations = new Set(there.map((r) => r.reservation_id).filter((r) => r !== null));
    for (const row of rows) {
      if (ids.has(String(row.values.id).toLowerCase()) || (typeof row.values.reservation_id === 'string' && reservations.has(row.values.reservation_id))) found.add(row);
    }
  }
  return found;
}

/** Writes one chain's batch; returns the rows it inserted (none when they were all there). */
async function writeChain(db: pg.Pool | pg.PoolClient, batch: readonly ChainedRow[], chained: boolean): Promise<ChainedRow[]> {
  let rows = batch;
  for (let attempt = 1; attempt <= 3; attempt++) {
    let inserted: number;
    try {
      inserted = (await db.query<{ inserted: number }>(statement(rows, chained))).rows[0]!.inserted;
    } catch (error) {
      // A row of the batch is there already, past the first (or a retry raced its first write):
      // the statement undid itself, head included. Write the rows that are not there (outside a
      // transaction: inside one, the error has aborted it, and its caller retries it whole).
      if ((error as { code?: string }).code !== UNIQUE_VIOLATION || !chained || isTransaction(db)) throw error;
      inserted = 0;
    }
    if (inserted === rows.length) return [...rows];
    // The plain statement (the benchmark's) skips rows one by one and does not say which.
    if (!chained) return rows.slice(0, inserted);
    // The head did not move: some of the rows are there. Write the others, if any.
    const there = await existing(db, rows);
    rows = rows.filter((r) => !there.has(r));
    if (rows.length === 0) return [];
  }
  throw new Error(`the ledger's chain writer could not write a batch of ${batch.length} row(s) of ${chainOf(batch[0]!) || 'no intent'} in 3 attempts`);
}

/** A client in a transaction cannot run a failed statement again (the transaction is aborted). */
function isTransaction(db: pg.Pool | pg.PoolClient): boolean {
  return !('totalCount' in db);
}

/**
 * Writes `rows` (in their order) to the ledger, chained: each chain's rows in one statement.
 * Returns the rows actually inserted (a retry's rows that are there already are not).
 */
export async function writeChained(db: pg.Pool | pg.PoolClient, rows: readonly ChainedRow[], opts: { chained?: boolean } = {}): Promise<ChainedRow[]> {
  const byChain = new Map<string, ChainedRow[]>();
  for (const row of rows) {
    const chain = chainOf(row);
    byChain.set(chain, [...(byChain.get(chain) ?? []), row]);
  }
  const inserted: ChainedRow[] = [];
  for (const batch of byChain.values()) inserted.push(...(await writeChain(db, batch, opts.chained ?? true)));
  return inserted;
}
