import { createHash, randomUUID } from 'node:crypto';
import type pg from 'pg';

/*
 * The ledger's hash chain. Every safety event, gate decision and cost row carries its position in
 * ONE global chain, the hash of the row before it and its own hash over both and its content
 * (migration 010: a trigger writes them in the insert's own transaction, so no write path can
 * leave a row out). One chain rather than one per day or per intent: a deleted intent cannot
 * vanish whole, events of no intent (a global stop, a breaker) are covered the same way, and an
 * anchor is a single head hash. The price is that chained inserts take positions one at a time
 * (a row lock on ledger_chain_head held to commit); bench/ledger-chain.ts measures it.
 *
 * This module recomputes and checks the chain, in the database or in an export, with no
 * database functions in the check itself: an export verifies offline the same way.
 */

/** The tables the chain covers. */
export const CHAINED_TABLES = ['safety_events', 'gate_decisions', 'cost_events'] as const;
export type ChainedTable = (typeof CHAINED_TABLES)[number];

/** What the first row links to. */
export const GENESIS_HASH = '0'.repeat(64);

/** One row's place in the chain. `content` is the hashed text (see warden_chain_content); `digest` its sha256. */
export interface ChainLink {
  readonly pos: number;
  readonly table: string;
  readonly id: string;
  /** The row's own time (an event's timestamp, a decision's decided_at), ISO. */
  readonly at: string;
  readonly intentId?: string;
  readonly prev: string;
  readonly hash: string;
  readonly digest: string;
  /** The content, when known and unchanged (an export leaves it out for other intents' rows, and marks redacted ones). */
  readonly content?: string;
}

/** Positions retention cut, and the chain hash at the last of them (what the next row links to). */
export interface CutRange {
  readonly first: number;
  readonly last: number;
  readonly lastHash: string;
}

/** A chain head recorded outside the database: in the history of an anchor workflow. */
export interface Anchor {
  readonly pos: number;
  readonly hash: string;
  readonly at: string;
  readonly workflowId: string;
  readonly runId: string;
}

/** Where the chain breaks first: the row (or position) and what differs. */
export interface ChainBreak {
  readonly pos: number;
  readonly table?: string;
  readonly id?: string;
  readonly at?: string;
  readonly problem: string;
}

export interface ChainVerdict {
  readonly whole: boolean;
  /** Rows checked. */
  readonly rows: number;
  readonly firstPos?: number;
  readonly lastPos?: number;
  readonly headHash?: string;
  readonly anchorsChecked: number;
  /** The first broken link, in chain order. */
  readonly broken?: ChainBreak;
  /** Rows in a chained table with no place in the chain (inserted with the chain's trigger off). */
  readonly unchained: readonly ChainBreak[];
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** A link's hash, as warden_chain_link computes it. */
export function linkHash(prev: string, pos: number, table: string, digest: string): string {
  return sha256Hex(`${prev}:${pos}:${table}:${digest}`);
}

/**
 * Walks `links` (any order; sorted here by position) from `start` and names the first link that
 * does not hold: a missing position retention did not account for (deleted), a previous hash
 * that is not the chain's (reordered, or a row before it replaced), content that does not hash to
 * its digest or a hash that is not its link's (edited). Then each anchor must find its hash at
 * its position; `head`, where given, is where the chain says it ends.
 */
export function verifyLinks(
  links: readonly ChainLink[],
  opts: { start?: { pos: number; hash: string }; cuts?: readonly CutRange[]; anchors?: readonly Anchor[]; head?: { pos: number; hash: string }; unchained?: readonly ChainBreak[] } = {},
): ChainVerdict {
  const sorted = [...links].sort((a, b) => a.pos - b.pos);
  const cuts = [...(opts.cuts ?? [])].sort((a, b) => a.first - b.first);
  const start = opts.start ?? { pos: 0, hash: GENESIS_HASH };
  const hashAt = new Map<number, string>([[start.pos, start.hash]]);
  for (const cut of cuts) hashAt.set(cut.last, cut.lastHash);
  let expected = start;
  let broken: ChainBreak | undefined;
  const at = (link: ChainLink, problem: string): ChainBreak => ({ pos: link.pos, table: link.table, id: link.id, at: link.at, problem });
  for (const link of sorted) {
    if (link.pos <= expected.pos) {
      broken = at(link, `position ${link.pos} comes twice (after ${expected.pos}): a row was inserted or copied into the chain`);
      break;
    }
    if (link.pos > expected.pos + 1) {
      const cut = cuts.find((c) => c.first <= expected.pos + 1 && c.last === link.pos - 1);
      if (!cut) {
        const missing = link.pos - 1 === expected.pos + 1 ? `position ${expected.pos + 1} is` : `positions ${expected.pos + 1}-${link.pos - 1} are`;
        broken = at(link, `${missing} missing before this row and no retention checkpoint accounts for it: deleted`);
        break;
      }
      expected = { pos: cut.last, hash: cut.lastHash };
    }
    if (link.prev !== expected.hash) {
      broken = at(link, `links to previous hash ${short(link.prev)}, but the chain's hash at position ${expected.pos} is ${short(expected.hash)}: rows were reordered, or the one before was replaced`);
      break;
    }
    if (link.content !== undefined && sha256Hex(link.content) !== link.digest) {
      broken = at(link, `its content does not hash to its recorded digest ${short(link.digest)}: edited`);
      break;
    }
    if (linkHash(link.prev, link.pos, link.table, link.digest) !== link.hash) {
      broken = at(link, `its hash ${short(link.hash)} is not the hash of its content and link (${short(linkHash(link.prev, link.pos, link.table, link.digest))}): edited`);
      break;
    }
    hashAt.set(link.pos, link.hash);
    expected = { pos: link.pos, hash: link.hash };
  }
  const checkedUpTo = broken ? broken.pos - 1 : expected.pos;
  if (!broken && opts.head && (opts.head.pos !== expected.pos || opts.head.hash !== expected.hash)) {
    broken = { pos: opts.head.pos, problem: `the chain's head says position ${opts.head.pos} (${short(opts.head.hash)}) but the last row is position ${expected.pos} (${short(expected.hash)}): rows at the end were deleted` };
  }
  let anchorsChecked = 0;
  for (const anchor of [...(opts.anchors ?? [])].sort((a, b) => a.pos - b.pos)) {
    if (anchor.pos < start.pos || anchor.pos > checkedUpTo) {
      // Past the end of a whole chain: rows the anchor saw are gone.
      if (!broken && anchor.pos > expected.pos) {
        broken = { pos: anchor.pos, at: anchor.at, problem: `anchor ${anchor.workflowId} (${anchor.at}) saw the chain at position ${anchor.pos}, but it ends at ${expected.pos}: rows at the end were deleted` };
      }
      continue;
    }
    const hash = hashAt.get(anchor.pos);
    if (hash === undefined) continue; // inside a cut range: its rows are gone by retention
    anchorsChecked += 1;
    if (hash !== anchor.hash && (!broken || anchor.pos < broken.pos)) {
      const link = sorted.find((l) => l.pos === anchor.pos);
      broken = {
        pos: anchor.pos,
        ...(link && { table: link.table, id: link.id, at: link.at }),
        problem: `anchor ${anchor.workflowId} (${anchor.at}) recorded hash ${short(anchor.hash)} at position ${anchor.pos}, the ledger has ${short(hash)}: the chain was rewritten up to here`,
      };
    }
  }
  const unchained = opts.unchained ?? [];
  const last = sorted.length > 0 ? sorted[sorted.length - 1] : undefined;
  return {
    whole: !broken && unchained.length === 0,
    rows: sorted.length,
    ...(sorted[0] && { firstPos: sorted[0].pos }),
    ...(last && { lastPos: last.pos, headHash: last.hash }),
    anchorsChecked,
    ...(broken && { broken }),
    unchained,
  };
}

function short(hash: string): string {
  return hash.slice(0, 12);
}

interface ChainRow {
  tbl: string;
  id: string;
  pos: string | null;
  prev: string | null;
  hash: string | null;
  at: Date;
  intent_id: string | null;
  content: string;
}

/** The chained rows from `since` on (every one without), as links; rows outside the chain apart. */
export async function readChain(db: pg.Pool | pg.PoolClient, opts: { since?: Date } = {}): Promise<{ links: ChainLink[]; unchained: ChainBreak[] }> {
  const { rows } = await db.query<ChainRow>(
    `SELECT * FROM (
       SELECT 'safety_events' AS tbl, id::text, chain_pos::text AS pos, chain_prev AS prev, chain_hash AS hash, "timestamp" AS at, intent_id,
              warden_chain_content(t) AS content FROM safety_events t
       UNION ALL
       SELECT 'gate_decisions', id::text, chain_pos::text, chain_prev, chain_hash, decided_at, intent_id, warden_chain_content(t) FROM gate_decisions t
       UNION ALL
       SELECT 'cost_events', id::text, chain_pos::text, chain_prev, chain_hash, "timestamp", intent_id, warden_chain_content(t) FROM cost_events t
     ) AS chained
     WHERE $1::timestamptz IS NULL OR pos IS NULL
        OR pos::bigint >= (SELECT min(x.chain_pos) FROM (SELECT chain_pos FROM safety_events WHERE "timestamp" >= $1
                                                        UNION ALL SELECT chain_pos FROM gate_decisions WHERE decided_at >= $1
                                                        UNION ALL SELECT chain_pos FROM cost_events WHERE "timestamp" >= $1) AS x)
     ORDER BY pos::bigint NULLS LAST`,
    [opts.since ?? null],
  );
  const links: ChainLink[] = [];
  const unchained: ChainBreak[] = [];
  for (const row of rows) {
    const at = row.at.toISOString();
    if (row.pos === null || row.prev === null || row.hash === null) {
      unchained.push({ pos: NaN, table: row.tbl, id: row.id, at, problem: 'this row has no place in the chain: inserted past it' });
      continue;
    }
    links.push({
      pos: Number(row.pos),
      table: row.tbl,
      id: row.id,
      at,
      ...(row.intent_id !== null && { intentId: row.intent_id }),
      prev: row.prev,
      hash: row.hash,
      digest: sha256Hex(row.content),
      content: row.content,
    });
  }
  return { links, unchained };
}

/** The chain's head as the database keeps it. */
export async function chainHead(db: pg.Pool | pg.PoolClient): Promise<{ pos: number; hash: string }> {
  const { rows } = await db.query<{ pos: string; hash: string }>(`SELECT pos::text, hash FROM ledger_chain_head`);
  const row = rows[0];
  return row ? { pos: Number(row.pos), hash: row.hash } : { pos: 0, hash: GENESIS_HASH };
}

/** Every position retention has cut, as the latest checkpoint records it. */
export async function chainCuts(db: pg.Pool | pg.PoolClient): Promise<CutRange[]> {
  const { rows } = await db.query<{ ranges: Array<[number, number, string]> | null }>(
    `SELECT metadata->'ranges' AS ranges FROM safety_events WHERE event_type = 'LEDGER_CHECKPOINT' ORDER BY chain_pos DESC NULLS LAST LIMIT 1`,
  );
  return (rows[0]?.ranges ?? []).map(([first, last, lastHash]) => ({ first, last, lastHash }));
}

/** Checks the chain in the database from `since` (all of it without), against `anchors`. */
export async function verifyStoredChain(db: pg.Pool | pg.PoolClient, opts: { since?: Date; anchors?: readonly Anchor[] } = {}): Promise<ChainVerdict> {
  // One after another: `db` may be a single client (a transaction).
  const { links, unchained } = await readChain(db, opts);
  const cuts = await chainCuts(db);
  const head = await chainHead(db);
  const first = opts.since ? links[0] : undefined;
  const start = first ? { pos: first.pos - 1, hash: first.prev } : undefined;
  return verifyLinks(links, { ...(start && { start }), cuts, head, anchors: opts.anchors ?? [], unchained });
}

/**
 * Retention's part: before rows older than `cutoff` are deleted (in the same transaction),
 * records what of the chain they are as a LEDGER_CHECKPOINT safety event, itself in the chain:
 * how many rows, the sha256 of their hashes in order, and every range of positions cut so far
 * (this cut's merged with the previous checkpoint's) with the hash at its end, which the row
 * after it links to. Stamped `now`, retention's own clock, so this cut never takes it. Nothing
 * is recorded when nothing is cut.
 */
export async function recordRetentionCheckpoint(client: pg.PoolClient, cutoff: Date, now: Date): Promise<number> {
  const { rows } = await client.query<{ pos: string; hash: string }>(
    `SELECT chain_pos::text AS pos, chain_hash AS hash FROM (
       SELECT chain_pos, chain_hash FROM safety_events WHERE "timestamp" < $1
       UNION ALL SELECT chain_pos, chain_hash FROM gate_decisions WHERE decided_at < $1
       UNION ALL SELECT chain_pos, chain_hash FROM cost_events WHERE "timestamp" < $1
     ) AS cut WHERE chain_pos IS NOT NULL ORDER BY chain_pos`,
    [cutoff],
  );
  if (rows.length === 0) return 0;
  const cut = rows.map((r) => ({ pos: Number(r.pos), hash: r.hash }));
  const ranges = mergeCuts(await chainCuts(client), cut);
  const reason = `retention cut ${cut.length} row(s) from the ledger's hash chain (positions ${cut[0]!.pos}-${cut[cut.length - 1]!.pos})`;
  await client.query(
    `INSERT INTO safety_events (id, "timestamp", event_type, reason, metadata, severity) VALUES ($1, $2, 'LEDGER_CHECKPOINT', $3, $4, 'info')`,
    [
      randomUUID(),
      now,
      reason,
      JSON.stringify({
        cutRows: cut.length,
        cutFirstPos: cut[0]!.pos,
        cutLastPos: cut[cut.length - 1]!.pos,
        cutDigest: sha256Hex(cut.map((c) => c.hash).join('\n')),
        ranges: ranges.map((r) => [r.first, r.last, r.lastHash]),
      }),
    ],
  );
  return cut.length;
}

/** Earlier cut ranges and newly cut positions, merged into runs of consecutive positions. */
export function mergeCuts(previous: readonly CutRange[], cut: ReadonlyArray<{ pos: number; hash: string }>): CutRange[] {
  const ranges: CutRange[] = [...previous, ...cut.map((c) => ({ first: c.pos, last: c.pos, lastHash: c.hash }))].sort((a, b) => a.first - b.first);
  const merged: CutRange[] = [];
  for (const range of ranges) {
    const last = merged[merged.length - 1];
    if (last && range.first <= last.last + 1) {
      // The run ends where the later of the two ends, with that one's hash.
      if (range.last > last.last) merged[merged.length - 1] = { first: last.first, last: range.last, lastHash: range.lastHash };
    } else merged.push(range);
  }
  return merged;
}
