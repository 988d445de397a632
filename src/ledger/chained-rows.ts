import { createHash } from 'node:crypto';
import { fromMicros, toMicros } from '../shared/money';

/*
 * The rows the ledger's hash chains cover, and each row's content hash. The hash is taken in
 * Node over a canonical form of the row's values as PostgreSQL gives them back, so that the chain
 * writer (before the insert) and verify (from the stored row) compute the same bytes:
 *   - timestamps as UTC ISO text with microseconds (a JS Date holds milliseconds; PostgreSQL
 *     keeps microseconds, and verify reads them all, so an edit of one microsecond shows);
 *   - integers and numerics as their decimal text (USD with its column's six decimals);
 *   - jsonb as the JSON value it parses back to, with keys sorted (jsonb reorders keys and
 *     rewrites numbers' spelling, never their value);
 *   - text as well-formed Unicode (a lone surrogate reaches PostgreSQL as U+FFFD);
 *   - the table's name, every content column by name, NULL as null.
 * The database's own bookkeeping columns (seq, recorded_at) are outside the content.
 */

export const CHAINED_TABLES = ['safety_events', 'gate_decisions', 'cost_events'] as const;
export type ChainedTable = (typeof CHAINED_TABLES)[number];

type Kind = 'uuid' | 'text' | 'timestamptz' | 'int' | 'bigint' | 'usd' | 'jsonb' | 'boolean';

/** Each chained table's content columns, in insert order, with how each is canonicalised. */
export const CONTENT_COLUMNS: Readonly<Record<ChainedTable, ReadonlyArray<readonly [column: string, kind: Kind]>>> = {
  safety_events: [
    ['id', 'uuid'], ['timestamp', 'timestamptz'], ['event_type', 'text'], ['intent_id', 'text'], ['stage', 'text'], ['agent_id', 'text'],
    ['model_id', 'text'], ['breaker_id', 'text'], ['cost_snapshot', 'jsonb'], ['reason', 'text'], ['suggestion', 'text'], ['metadata', 'jsonb'],
    ['severity', 'text'],
  ],
  gate_decisions: [
    ['id', 'uuid'], ['intent_id', 'text'], ['gate', 'text'], ['decision', 'text'], ['decided_by', 'text'], ['reason', 'text'], ['conditions', 'jsonb'],
    ['requested_at', 'timestamptz'], ['decided_at', 'timestamptz'], ['timed_out', 'boolean'], ['signed', 'boolean'],
  ],
  cost_events: [
    ['id', 'uuid'], ['timestamp', 'timestamptz'], ['intent_id', 'text'], ['stage', 'text'], ['attempt', 'int'], ['agent_id', 'text'], ['model_id', 'text'],
    ['input_tokens', 'bigint'], ['output_tokens', 'bigint'], ['usd', 'usd'], ['reservation_id', 'text'],
  ],
};

/** A value as the writer has it (Date, number, a JSON value) or as verify reads it (text). */
export type ColumnValue = string | number | boolean | Date | null | undefined | object;

/** One row to chain: its table and its content columns' values (a missing one is NULL). */
export interface ChainedRow {
  readonly table: ChainedTable;
  readonly values: Readonly<Record<string, ColumnValue>>;
}

/** The chain a row belongs to: its intent's, or the system chain ('') for rows of no intent. */
export function chainOf(row: ChainedRow): string {
  const intent = row.values.intent_id;
  return typeof intent === 'string' ? intent : '';
}

/** How a chain is named to people. */
export function chainName(chain: string): string {
  return chain === '' ? 'the system chain' : `intent ${chain}'s chain`;
}

/** The SQL that reads a content column back in the form `canonicalValue` takes. */
export function readBackSql(column: string, kind: Kind): string {
  const c = `"${column}"`;
  switch (kind) {
    case 'timestamptz':
      return `to_char(${c} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS ${c}`;
    case 'uuid':
    case 'int':
    case 'bigint':
    case 'usd':
      return `${c}::text AS ${c}`;
    default:
      return c;
  }
}

const SURROGATE = /[\uD800-\uDFFF]/;

function wellFormed(text: string): string {
  return SURROGATE.test(text) ? Buffer.from(text, 'utf8').toString('utf8') : text;
}

function canonicalValue(kind: Kind, value: ColumnValue): unknown {
  if (value === null || value === undefined) return null;
  switch (kind) {
    case 'timestamptz':
      // A Date (the writer's, milliseconds) in the text to_char gives back (microseconds).
      return value instanceof Date ? `${value.toISOString().slice(0, -1)}000Z` : String(value);
    case 'uuid':
      return String(value).toLowerCase();
    case 'int':
    case 'bigint':
    case 'usd':
      return String(value);
    case 'boolean':
      return value;
    case 'jsonb':
      // What a jsonb column parses back to: JSON's values only (undefined dropped, dates as text).
      // JSON's round trip only where the value holds more than JSON's own values (it is most of
      // the hash's time, and a ledger row's metadata is plain JSON nearly always).
      return sortedJson(isPlainJson(value) ? value : (JSON.parse(JSON.stringify(value)) as unknown));
    case 'text':
      return wellFormed(String(value));
  }
}

/** Whether `value` is made of JSON's own values only (what JSON.stringify keeps as it is). */
function isPlainJson(value: unknown): boolean {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (Array.isArray(value)) return value.every(isPlainJson);
  if (typeof value !== 'object' || Object.getPrototypeOf(value) !== Object.prototype) return false;
  for (const key in value) if (!isPlainJson((value as Record<string, unknown>)[key])) return false;
  return true;
}

/** A JSON value with every object's keys sorted and every string well formed. */
function sortedJson(value: unknown): unknown {
  if (typeof value === 'string') return wellFormed(value);
  if (Array.isArray(value)) return value.map(sortedJson);
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) out[wellFormed(key)] = sortedJson((value as Record<string, unknown>)[key]);
    return out;
  }
  return value;
}

/** The row's canonical content: the text its hash is taken over. */
export function canonicalContent(row: ChainedRow): string {
  const content: Record<string, unknown> = { '#table': row.table };
  for (const [column, kind] of CONTENT_COLUMNS[row.table]) content[column] = canonicalValue(kind, row.values[column]);
  // Keys are in a fixed order already ('#table', then the columns'), so plain JSON is canonical.
  return JSON.stringify(content);
}

/** sha256 of the row's canonical content. */
export function contentHash(row: ChainedRow): Buffer {
  return createHash('sha256').update(canonicalContent(row), 'utf8').digest();
}

/** A chain's head after a batch: sha256(previous head || the batch's content hashes in order); the first batch has no previous head. */
export function nextHead(previous: Buffer | undefined, hashes: readonly Buffer[]): Buffer {
  const h = createHash('sha256');
  if (previous) h.update(previous);
  for (const hash of hashes) h.update(hash);
  return h.digest();
}

/** A safety event (as SafetyEventSchema parses it) as a chained row. */
export function safetyEventRow(e: {
  id: string; timestamp: Date; eventType: string; intentId?: string | undefined; stage?: string | undefined; agentId?: string | undefined; modelId?: string | undefined;
  breakerId?: string | undefined; costSnapshot?: object | undefined; reason: string; suggestion?: string | undefined; metadata: object; severity: string;
}): ChainedRow {
  return {
    table: 'safety_events',
    values: {
      id: e.id, timestamp: e.timestamp, event_type: e.eventType, intent_id: e.intentId, stage: e.stage, agent_id: e.agentId, model_id: e.modelId,
      breaker_id: e.breakerId, cost_snapshot: e.costSnapshot, reason: e.reason, suggestion: e.suggestion, metadata: e.metadata, severity: e.severity,
    },
  };
}

/** A gate decision (as GateDecisionRowSchema parses it) as a chained row. */
export function gateDecisionRow(g: {
  id: string; intentId: string; gate: string; decision: string; by: string; reason?: string | undefined; conditions: readonly string[];
  requestedAt: Date; decidedAt: Date; timedOut: boolean; signed?: boolean | undefined;
}): ChainedRow {
  return {
    table: 'gate_decisions',
    values: {
      id: g.id, intent_id: g.intentId, gate: g.gate, decision: g.decision, decided_by: g.by, reason: g.reason, conditions: g.conditions,
      requested_at: g.requestedAt, decided_at: g.decidedAt, timed_out: g.timedOut, signed: g.signed,
    },
  };
}

/** A cost row (USD in its column's six decimals) as a chained row. */
export function costRow(c: {
  id: string; timestamp: Date; intentId: string; stage: string; attempt: number; agentId: string; modelId: string; inputTokens: number; outputTokens: number;
  usd: string; reservationId?: string | undefined;
}): ChainedRow {
  return {
    table: 'cost_events',
    values: {
      id: c.id, timestamp: c.timestamp, intent_id: c.intentId, stage: c.stage, attempt: c.attempt, agent_id: c.agentId, model_id: c.modelId,
      input_tokens: c.inputTokens, output_tokens: c.outputTokens, usd: fromMicros(toMicros(c.usd)), reservation_id: c.reservationId,
    },
  };
}
