import { createHash } from 'node:crypto';
import type pg from 'pg';
import { writeChained } from './chain-writer';
import { CHAINED_TABLES, CONTENT_COLUMNS, canonicalContent, chainName, readBackSql, safetyEventRow, type ChainedTable, type ColumnValue } from './chained-rows';

/*
 * Checking the ledger's hash chains (written by src/ledger/chain-writer.ts): one per intent, and
 * the system chain ('') for rows of no intent. Rows written in one statement are a batch: they
 * have consecutive positions and the same chain_head, sha256(the previous batch's head || their
 * content hashes in order). The walk regroups each chain's rows into batches by position and head,
 * recomputes every head, and names the first row where a chain breaks: a gap in the positions
 * (deleted), a position twice (inserted), a head that is not its batch's (edited, or rows moved).
 * A batch of one row names its row exactly; in a batch of several, the break is the batch's.
 *
 * Each chain's end is held against ledger_chains (rows cut at the end) and against anchors:
 * every hour a LEDGER_ANCHOR row in the system chain lists the head of each chain that moved
 * since the last one, and the anchor workflow's result keeps the system chain's head after it in
 * a Temporal history. So an anchor vouches for the LEDGER_ANCHOR rows before it, and they for
 * every chain's head at their time: a whole intent deleted leaves a listed head with no rows.
 *
 * The walk uses no database function: an export verifies offline the same way.
 */

export { CHAINED_TABLES, type ChainedTable };

/** One row's place in its chain. */
export interface ChainLink {
  readonly chain: string;
  readonly pos: number;
  readonly table: string;
  readonly id: string;
  /** The row's own time (an event's timestamp, a decision's decided_at), ISO. */
  readonly at: string;
  /** Its batch's head, hex. */
  readonly head: string;
  /** sha256 of its canonical content, hex: recomputed from `content` when that is given. */
  readonly digest: string;
  readonly content?: string;
}

/** A chain's length and head (hex; '' before its first batch). */
export interface ChainPoint {
  readonly length: number;
  readonly head: string;
}

/** A head some record says a chain had: an anchor workflow's (the system chain) or a LEDGER_ANCHOR row's. */
export interface ChainMark extends ChainPoint {
  readonly chain: string;
  /** Who says so, for people: the anchor workflow, or the LEDGER_ANCHOR row. */
  readonly by: string;
}

export interface ChainBreak {
  readonly chain: string;
  readonly pos?: number;
  readonly table?: string;
  readonly id?: string;
  readonly at?: string;
  readonly problem: string;
}

export interface ChainVerdict {
  readonly whole: boolean;
  readonly rows: number;
  readonly chains: number;
  /** The first break of each broken chain. */
  readonly broken: readonly ChainBreak[];
  /** Rows with no place in a chain, written after the chains began. */
  readonly unchained: readonly ChainBreak[];
  /** Rows from before the chains began (migration 010): not covered. */
  readonly beforeChains: number;
  readonly marksChecked: number;
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** A batch's head, as the writer's statement computes it. */
export function batchHead(previous: string, digests: readonly string[]): string {
  const h = createHash('sha256');
  if (previous !== '') h.update(Buffer.from(previous, 'hex'));
  for (const digest of digests) h.update(Buffer.from(digest, 'hex'));
  return h.digest('hex');
}

/** Positions retention cut from a chain (whole batches), and the head at the last of them. */
export interface CutRange {
  readonly first: number;
  readonly last: number;
  readonly head: string;
}

/** What the walk of one chain needs besides its rows. */
export interface ChainBounds {
  /** Where the checked rows start (after a --since, or an export's start); default the chain's beginning. */
  readonly start?: ChainPoint;
  /** What retention cut. */
  readonly cuts?: readonly CutRange[];
  /** The chain's head as ledger_chains (or an export's manifest) says. */
  readonly end?: ChainPoint;
}

const short = (hash: string): string => hash.slice(0, 12);

/** Walks one chain; returns its first break and the head at each batch's end. */
export function walkChain(chain: string, links: readonly ChainLink[], bounds: ChainBounds = {}): { broken?: ChainBreak; ends: Map<number, string>; last: ChainPoint } {
  const sorted = [...links].sort((a, b) => a.pos - b.pos);
  let expected: ChainPoint = bounds.start ?? { length: 0, head: '' };
  const ends = new Map<number, string>([[expected.length, expected.head]]);
  const cuts = bounds.cuts ?? [];
  for (const cut of cuts) ends.set(cut.last, cut.head);
  /** A cut that goes on from the chain at `length`: the rows after it link to its last head. */
  const cutFrom = (length: number): CutRange | undefined => cuts.find((c) => c.first <= length + 1 && c.last > length);
  const at = (link: ChainLink, problem: string): ChainBreak => ({ chain, pos: link.pos, table: link.table, id: link.id, at: link.at, problem });
  let broken: ChainBreak | undefined;
  for (let i = 0; i < sorted.length && !broken; ) {
    const first = sorted[i]!;
    const cut = first.pos > expected.length + 1 ? cutFrom(expected.length) : undefined;
    if (cut && cut.last < first.pos) expected = { length: cut.last, head: cut.head };
    if (first.pos <= expected.length) {
      broken = at(first, `position ${first.pos} comes twice (the chain is at ${expected.length}): a row was inserted or copied into it`);
      break;
    }
    if (first.pos > expected.length + 1) {
      const missing = first.pos - 1 === expected.length + 1 ? `position ${expected.length + 1} is` : `positions ${expected.length + 1}-${first.pos - 1} are`;
      broken = at(first, `${missing} missing before this row and no retention checkpoint accounts for it: deleted`);
      break;
    }
    // The batch: the rows from here on with the same head.
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1]!.head === first.head) {
      const next = sorted[j + 1]!;
      if (next.pos !== sorted[j]!.pos + 1) {
        broken = at(next, next.pos <= sorted[j]!.pos ? `position ${next.pos} comes twice: a row was inserted or copied into the chain` : `position ${sorted[j]!.pos + 1} is missing before this row: deleted`);
        break;
      }
      j += 1;
    }
    if (broken) break;
    const batch = sorted.slice(i, j + 1);
    const head = batchHead(expected.head, batch.map((l) => (l.content !== undefined ? sha256Hex(l.content) : l.digest)));
    if (head !== first.head) {
      const edited = batch.find((l) => l.content !== undefined && sha256Hex(l.content) !== l.digest);
      broken =
        batch.length === 1 || edited
          ? at(edited ?? first, `its batch's head ${short(first.head)} is not the hash of the chain before it and its content (${short(head)}): edited, or moved in the chain`)
          : at(first, `the batch at positions ${first.pos}-${batch[batch.length - 1]!.pos} (${batch.length} rows) does not hash to its head ${short(first.head)} (${short(head)}): one of its rows was edited, or they were moved in the chain`);
      break;
    }
    expected = { length: batch[batch.length - 1]!.pos, head };
    ends.set(expected.length, head);
    i = j + 1;
  }
  // Cut at the end: nothing after it.
  const trailing = broken ? undefined : cutFrom(expected.length);
  if (trailing) expected = { length: trailing.last, head: trailing.head };
  if (!broken && bounds.end && (bounds.end.length !== expected.length || bounds.end.head !== expected.head)) {
    broken = {
      chain,
      pos: bounds.end.length,
      problem: `ledger_chains says ${chainName(chain)} has ${bounds.end.length} row(s) ending in ${short(bounds.end.head)}, the rows end at ${expected.length} (${short(expected.head)}): rows at the end were deleted, or the chain rewritten`,
    };
  }
  return { ...(broken && { broken }), ends, last: expected };
}

/**
 * Walks every chain and holds each against its bounds and the marks (anchors); the verdict names
 * each broken chain's first break.
 */
export function verifyLinks(
  links: readonly ChainLink[],
  opts: { bounds?: ReadonlyMap<string, ChainBounds>; marks?: readonly ChainMark[]; unchained?: readonly ChainBreak[]; beforeChains?: number } = {},
): ChainVerdict {
  const byChain = new Map<string, ChainLink[]>();
  for (const link of links) byChain.set(link.chain, [...(byChain.get(link.chain) ?? []), link]);
  for (const chain of opts.bounds?.keys() ?? []) if (!byChain.has(chain)) byChain.set(chain, []);
  for (const mark of opts.marks ?? []) if (!byChain.has(mark.chain)) byChain.set(mark.chain, []);
  const broken: ChainBreak[] = [];
  let marksChecked = 0;
  for (const [chain, chainLinks] of [...byChain].sort(([a], [b]) => a.localeCompare(b))) {
    const bounds = opts.bounds?.get(chain) ?? {};
    const walk = walkChain(chain, chainLinks, bounds);
    const cutAway = (length: number): boolean => (bounds.cuts ?? []).some((c) => c.first <= length && length < c.last);
    let first = walk.broken;
    const checkedTo = first?.pos !== undefined && first.table !== undefined ? first.pos - 1 : walk.last.length;
    for (const mark of (opts.marks ?? []).filter((m) => m.chain === chain).sort((a, b) => a.length - b.length)) {
      if (mark.length <= (bounds.start?.length ?? 0) || cutAway(mark.length)) continue; // before the rows checked, or inside what retention cut
      if (mark.length > walk.last.length) {
        if (!first) first = { chain, pos: mark.length, problem: `${mark.by} saw ${chainName(chain)} at ${mark.length} row(s) (${short(mark.head)}), but it ends at ${walk.last.length}: rows were deleted` };
        continue;
      }
      if (mark.length > checkedTo) continue;
      marksChecked += 1;
      const head = walk.ends.get(mark.length);
      if (head !== mark.head && (!first || first.pos === undefined || mark.length < first.pos)) {
        const link = chainLinks.find((l) => l.pos === mark.length);
        first = {
          chain,
          pos: mark.length,
          ...(link && { table: link.table, id: link.id, at: link.at }),
          problem: `${mark.by} recorded head ${short(mark.head)} at ${mark.length} row(s), the ledger has ${head === undefined ? 'no batch ending there' : short(head)}: the chain was rewritten up to here`,
        };
      }
    }
    if (first) broken.push(first);
  }
  const unchained = opts.unchained ?? [];
  return { whole: broken.length === 0 && unchained.length === 0, rows: links.length, chains: byChain.size, broken, unchained, beforeChains: opts.beforeChains ?? 0, marksChecked };
}

/** Rows as the database keeps them: each chain's links, rows outside every chain apart. */
export async function readChains(db: pg.Pool | pg.PoolClient): Promise<{ links: ChainLink[]; unchained: ChainBreak[]; beforeChains: number }> {
  const links: ChainLink[] = [];
  const unchained: ChainBreak[] = [];
  let beforeChains = 0;
  for (const table of CHAINED_TABLES) {
    const spec = CONTENT_COLUMNS[table];
    const atColumn = table === 'gate_decisions' ? 'decided_at' : 'timestamp';
    const { rows } = await db.query<Record<string, unknown> & { pos: string | null; head: string | null; row_at: Date; before: boolean }>(
      `SELECT ${spec.map(([column, kind]) => readBackSql(column, kind)).join(', ')}, chain_pos::text AS pos, encode(chain_head, 'hex') AS head,
              "${atColumn}" AS row_at, recorded_at < (SELECT started_at FROM ledger_chain_origin) AS before
         FROM ${table}`,
    );
    for (const row of rows) {
      const at = row.row_at.toISOString();
      const id = String(row.id);
      if (row.pos === null || row.head === null) {
        if (row.before) beforeChains += 1;
        else unchained.push({ chain: typeof row.intent_id === 'string' ? row.intent_id : '', table, id, at, problem: 'this row has no place in a chain: inserted past the chain writer' });
        continue;
      }
      const content = canonicalContent({ table, values: row as Record<string, ColumnValue> });
      links.push({ chain: typeof row.intent_id === 'string' ? row.intent_id : '', pos: Number(row.pos), table, id, at, head: row.head, digest: sha256Hex(content), content });
    }
  }
  return { links, unchained, beforeChains };
}

/** Every chain's head and length as ledger_chains keeps them. */
export async function chainEnds(db: pg.Pool | pg.PoolClient): Promise<Map<string, ChainPoint>> {
  const { rows } = await db.query<{ chain: string; length: string; head: string }>(`SELECT chain, length::text, encode(head, 'hex') AS head FROM ledger_chains`);
  return new Map(rows.map((r) => [r.chain, { length: Number(r.length), head: r.head }]));
}

/** What retention has cut of each chain, as the latest checkpoint records it. */
export async function chainCuts(db: pg.Pool | pg.PoolClient): Promise<Map<string, CutRange[]>> {
  const { rows } = await db.query<{ cuts: Record<string, Array<[number, number, string]>> | null }>(
    `SELECT metadata->'cuts' AS cuts FROM safety_events WHERE event_type = 'LEDGER_CHECKPOINT' AND intent_id IS NULL ORDER BY chain_pos DESC NULLS LAST LIMIT 1`,
  );
  return new Map(Object.entries(rows[0]?.cuts ?? {}).map(([chain, ranges]) => [chain, ranges.map(([first, last, head]) => ({ first, last, head }))]));
}

/** Earlier cut ranges and newly cut ones, merged into runs of consecutive positions. */
export function mergeCuts(previous: readonly CutRange[], cut: readonly CutRange[]): CutRange[] {
  const merged: CutRange[] = [];
  for (const range of [...previous, ...cut].sort((a, b) => a.first - b.first)) {
    const last = merged[merged.length - 1];
    if (last && range.first <= last.last + 1) {
      // The run ends where the later of the two ends, with that one's head.
      if (range.last > last.last) merged[merged.length - 1] = { first: last.first, last: range.last, head: range.head };
    } else merged.push(range);
  }
  return merged;
}

/** The heads LEDGER_ANCHOR rows list (each row is itself in the system chain). */
export async function anchoredHeads(db: pg.Pool | pg.PoolClient): Promise<ChainMark[]> {
  const { rows } = await db.query<{ id: string; heads: Record<string, [number, string]> | null }>(
    `SELECT id::text, metadata->'heads' AS heads FROM safety_events WHERE event_type = 'LEDGER_ANCHOR' AND intent_id IS NULL`,
  );
  return rows.flatMap((r) => Object.entries(r.heads ?? {}).map(([chain, [length, head]]) => ({ chain, length, head, by: `LEDGER_ANCHOR row ${r.id}` })));
}

/** Drops each chain's batches before the first that has a row from `since` on; returns where each then starts. */
export function fromDate(links: readonly ChainLink[], since: Date): { links: ChainLink[]; starts: Map<string, ChainPoint> } {
  const byChain = new Map<string, ChainLink[]>();
  for (const link of links) byChain.set(link.chain, [...(byChain.get(link.chain) ?? []), link]);
  const kept: ChainLink[] = [];
  const starts = new Map<string, ChainPoint>();
  for (const [chain, chainLinks] of byChain) {
    const sorted = chainLinks.sort((a, b) => a.pos - b.pos);
    const firstRecent = sorted.find((l) => new Date(l.at) >= since);
    if (!firstRecent) continue;
    // From the start of that row's batch: the rows before it with its head.
    let from = sorted.indexOf(firstRecent);
    while (from > 0 && sorted[from - 1]!.head === firstRecent.head) from -= 1;
    const before = sorted[from - 1];
    starts.set(chain, before ? { length: before.pos, head: before.head } : { length: sorted[from]!.pos - 1, head: '' });
    kept.push(...sorted.slice(from));
  }
  return { links: kept, starts };
}

/** Checks the chains in the database (from `since`, all of them without) against the anchor workflows' marks. */
export async function verifyStoredChain(db: pg.Pool | pg.PoolClient, opts: { since?: Date; anchors?: readonly ChainMark[] } = {}): Promise<ChainVerdict> {
  const { links, bounds, marks, read } = await inSnapshot(db, (client) => chainsToCheck(client, opts));
  return verifyLinks(links, { bounds, marks, unchained: read.unchained, beforeChains: read.beforeChains });
}

/**
 * Runs `fn` in one read-only snapshot of the database (given a pool), so rows and heads are
 * read as of one moment while writers go on; a client is used as it is (a test's transaction).
 */
export async function inSnapshot<T>(db: pg.Pool | pg.PoolClient, fn: (client: pg.PoolClient | pg.Pool) => Promise<T>): Promise<T> {
  if (!('totalCount' in db)) return fn(db);
  const client = await db.connect();
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/** The rows, bounds and marks of every chain to check (from `since`: each chain's batches from that date on). */
export async function chainsToCheck(
  db: pg.Pool | pg.PoolClient,
  opts: { since?: Date; anchors?: readonly ChainMark[]; chain?: string } = {},
): Promise<{ links: ChainLink[]; bounds: Map<string, ChainBounds & { end: ChainPoint }>; marks: ChainMark[]; read: Awaited<ReturnType<typeof readChains>> }> {
  // One after another: `db` may be a single client (a transaction).
  const read = await readChains(db);
  const ends = await chainEnds(db);
  const cuts = await chainCuts(db);
  const marks = [...(await anchoredHeads(db)), ...(opts.anchors ?? [])];
  const chosen = opts.chain === undefined ? read.links : read.links.filter((l) => l.chain === opts.chain);
  const { links, starts } = opts.since ? fromDate(chosen, opts.since) : { links: chosen, starts: new Map<string, ChainPoint>() };
  const bounds = new Map<string, ChainBounds & { end: ChainPoint }>();
  // Every chain the ledger has a head, rows or an anchored head of: one deleted whole has the last only.
  for (const chain of new Set([...ends.keys(), ...links.map((l) => l.chain), ...marks.map((m) => m.chain)])) {
    // With --since, a chain with no recent row is not checked; with a chain named, only it.
    if ((opts.since && !starts.has(chain)) || (opts.chain !== undefined && chain !== opts.chain)) continue;
    const start = starts.get(chain);
    const cut = cuts.get(chain);
    const end = ends.get(chain) ?? { length: 0, head: '' };
    bounds.set(chain, { ...(start && { start }), ...(cut && { cuts: cut }), end });
  }
  return { links, bounds, marks: marks.filter((m) => bounds.has(m.chain)), read };
}

/**
 * The anchor's part in the database: lists the head of every chain that moved since the last
 * anchor in a LEDGER_ANCHOR row of the system chain, and returns the system chain's head after
 * it, which the anchor workflow keeps in its history.
 */
export async function writeAnchorRow(client: pg.PoolClient, id: string, now: Date): Promise<ChainPoint & { chains: number }> {
  // A retried anchor whose row is written already: its listing stands, nothing more is listed.
  if ((await client.query(`SELECT 1 FROM safety_events WHERE id = $1`, [id])).rowCount) return { ...(await chainEnds(client)).get('')!, chains: 0 };
  const { rows } = await client.query<{ chain: string; length: string; head: string }>(
    `UPDATE ledger_chains SET anchored_length = length WHERE anchored_length IS DISTINCT FROM length AND chain <> ''
     RETURNING chain, length::text, encode(head, 'hex') AS head`,
  );
  const heads = Object.fromEntries(rows.sort((a, b) => a.chain.localeCompare(b.chain)).map((r) => [r.chain, [Number(r.length), r.head]]));
  await writeChained(client, [
    safetyEventRow({ id, timestamp: now, eventType: 'LEDGER_ANCHOR', reason: `anchored the heads of ${rows.length} chain(s) that moved since the last anchor`, metadata: { heads }, severity: 'info' }),
  ]);
  const system = (await chainEnds(client)).get('')!;
  return { ...system, chains: rows.length };
}

/**
 * Retention's part: the batches of each chain all of whose rows are older than `cutoff` (a batch
 * with a newer row stays whole), recorded before the rows go (same transaction) in a
 * LEDGER_CHECKPOINT row of the system chain: for every chain, every range of positions cut so far
 * (this cut's merged with the last checkpoint's) and the head at each range's end, which the batch
 * after it links to. Returns the rows to delete, by table.
 */
export async function retentionCut(client: pg.PoolClient, cutoff: Date, now: Date, id: string): Promise<Record<ChainedTable, string[]>> {
  const { rows } = await client.query<{ tbl: ChainedTable; id: string; chain: string; pos: string; head: string; old: boolean }>(
    `SELECT 'safety_events' AS tbl, id::text, coalesce(intent_id, '') AS chain, chain_pos::text AS pos, encode(chain_head, 'hex') AS head, "timestamp" < $1 AS old
       FROM safety_events WHERE chain_pos IS NOT NULL
     UNION ALL SELECT 'gate_decisions', id::text, intent_id, chain_pos::text, encode(chain_head, 'hex'), decided_at < $1 FROM gate_decisions WHERE chain_pos IS NOT NULL
     UNION ALL SELECT 'cost_events', id::text, intent_id, chain_pos::text, encode(chain_head, 'hex'), "timestamp" < $1 FROM cost_events WHERE chain_pos IS NOT NULL`,
    [cutoff],
  );
  const batches = new Map<string, typeof rows>();
  for (const row of rows) batches.set(`${row.chain}\u0000${row.head}`, [...(batches.get(`${row.chain}\u0000${row.head}`) ?? []), row]);
  const doomed: Record<ChainedTable, string[]> = { safety_events: [], gate_decisions: [], cost_events: [] };
  const cutNow = new Map<string, CutRange[]>();
  let cutRows = 0;
  for (const batch of batches.values()) {
    if (!batch.every((r) => r.old)) continue;
    const positions = batch.map((r) => Number(r.pos));
    for (const r of batch) doomed[r.tbl].push(r.id);
    cutRows += batch.length;
    const chain = batch[0]!.chain;
    cutNow.set(chain, [...(cutNow.get(chain) ?? []), { first: Math.min(...positions), last: Math.max(...positions), head: batch[0]!.head }]);
  }
  if (cutRows > 0) {
    const cuts = await chainCuts(client);
    for (const [chain, ranges] of cutNow) cuts.set(chain, mergeCuts(cuts.get(chain) ?? [], ranges));
    const all = Object.fromEntries([...cuts].sort(([a], [b]) => a.localeCompare(b)).map(([chain, ranges]) => [chain, ranges.map((r) => [r.first, r.last, r.head])]));
    await writeChained(client, [
      safetyEventRow({ id, timestamp: now, eventType: 'LEDGER_CHECKPOINT', reason: `retention cut ${cutRows} row(s) from the ledger's hash chains`, metadata: { cutRows, cuts: all }, severity: 'info' }),
    ]);
  }
  return doomed;
}
