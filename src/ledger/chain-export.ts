import { z } from 'zod';
import { sha256Hex, verifyLinks, type ChainBounds, type ChainLink, type ChainMark, type ChainPoint, type ChainVerdict, type CutRange } from './chain';

/*
 * A ledger export an auditor can take away: every chained row from a start on (of one intent's
 * chain, with --intent), each with its place in its chain, its batch's head and its content
 * hash; the heads anchors recorded for those chains; and a manifest with each chain's start and
 * end and the files' sha256. It checks offline (`warden ledger verify --file`) with the same walk
 * as the database's chains. A row whose content had a secret redacted keeps its digest, which
 * then cannot be checked against the redacted text (it is marked so; its batch's head still is).
 */

export const EXPORT_FORMATS = ['jsonl', 'csv'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

export const MANIFEST_FILE = 'manifest.json';
export const ANCHORS_FILE = 'anchors.json';

/** One exported row. */
export interface ExportedRow {
  /** The chain: the intent, or '' for the system chain. */
  readonly chain: string;
  readonly pos: number;
  readonly table: string;
  readonly id: string;
  readonly at: string;
  /** Its batch's head. */
  readonly head: string;
  readonly digest: string;
  /** Content with secrets redacted: it no longer hashes to the digest. */
  readonly redacted: boolean;
  readonly content: string;
}

const PointSchema = z.object({ length: z.number().int(), head: z.string() });

const ManifestSchema = z.object({
  format: z.literal('warden-ledger-export'),
  version: z.literal(2),
  createdAt: z.string(),
  since: z.string(),
  intent: z.string().nullable(),
  eventsFile: z.string(),
  eventsFormat: z.enum(EXPORT_FORMATS),
  eventsSha256: z.string(),
  anchorsSha256: z.string(),
  rows: z.number().int(),
  chains: z.record(
    z.string(),
    z.object({ start: PointSchema, end: PointSchema, cuts: z.array(z.object({ first: z.number().int(), last: z.number().int(), head: z.string() })).optional() }),
  ),
});
export type ExportManifest = z.infer<typeof ManifestSchema>;

const COLUMNS = ['chain', 'pos', 'table', 'id', 'at', 'head', 'digest', 'redacted', 'content'] as const;

/** The rows as exported, secrets redacted. */
export function exportRows(links: readonly ChainLink[], opts: { redact: (text: string) => string }): ExportedRow[] {
  return links.map((link) => {
    const content = opts.redact(link.content ?? '');
    return { chain: link.chain, pos: link.pos, table: link.table, id: link.id, at: link.at, head: link.head, digest: link.digest, redacted: content !== link.content, content };
  });
}

/** The events file's text in `format`. */
export function formatRows(rows: readonly ExportedRow[], format: ExportFormat): string {
  if (format === 'jsonl') return rows.map((row) => `${JSON.stringify(row)}\n`).join('');
  const cell = (value: string | number | boolean): string => {
    const text = String(value);
    return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
  };
  return [COLUMNS.join(','), ...rows.map((row) => COLUMNS.map((c) => cell(row[c])).join(','))].map((line) => `${line}\r\n`).join('');
}

/** Reads an events file back; throws on a line that is not a row. */
export function parseRows(text: string, format: ExportFormat): ExportedRow[] {
  const RowSchema = z.object({
    chain: z.string(),
    pos: z.number().int(),
    table: z.string(),
    id: z.string(),
    at: z.string(),
    head: z.string(),
    digest: z.string(),
    redacted: z.boolean(),
    content: z.string(),
  });
  if (format === 'jsonl') {
    return text.split('\n').filter((line) => line !== '').map((line, i) => {
      try {
        return RowSchema.parse(JSON.parse(line));
      } catch (error) {
        throw new Error(`line ${i + 1} of the events file is not an exported row: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`);
      }
    });
  }
  const [header, ...records] = parseCsv(text);
  if (header?.join(',') !== COLUMNS.join(',')) throw new Error(`the events file's header is not ${COLUMNS.join(',')}`);
  return records.map((record, i) => {
    const value = Object.fromEntries(COLUMNS.map((c, j) => [c, record[j] ?? '']));
    try {
      return RowSchema.parse({ ...value, pos: /^\d+$/.test(value.pos!) ? Number(value.pos) : NaN, redacted: value.redacted === 'true' });
    } catch (error) {
      throw new Error(`record ${i + 1} of the events file is not an exported row: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`);
    }
  });
}

/** RFC 4180 records: quoted fields may hold commas, quotes (doubled) and line breaks. */
function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i += 1) {
    const ch = text[i]!;
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        field += '"';
        i += 1;
      } else if (ch === '"') quoted = false;
      else field += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ',') {
      record.push(field);
      field = '';
    } else if (ch === '\n' || (ch === '\r' && text[i + 1] === '\n')) {
      if (ch === '\r') i += 1;
      record.push(field);
      records.push(record);
      record = [];
      field = '';
    } else field += ch;
  }
  if (field !== '' || record.length > 0) records.push([...record, field]);
  return records;
}

/** The manifest of an export of `rows`, whose files have these texts. */
export function buildManifest(input: {
  readonly rows: readonly ExportedRow[];
  readonly since: Date;
  readonly intent?: string;
  readonly format: ExportFormat;
  readonly eventsText: string;
  readonly anchorsText: string;
  readonly chains: ReadonlyMap<string, { start: ChainPoint; end: ChainPoint; cuts?: readonly CutRange[] }>;
  readonly now?: Date;
}): ExportManifest {
  return {
    format: 'warden-ledger-export',
    version: 2,
    createdAt: (input.now ?? new Date()).toISOString(),
    since: input.since.toISOString(),
    intent: input.intent ?? null,
    eventsFile: `events.${input.format}`,
    eventsFormat: input.format,
    eventsSha256: sha256Hex(input.eventsText),
    anchorsSha256: sha256Hex(input.anchorsText),
    rows: input.rows.length,
    chains: Object.fromEntries(
      [...input.chains].sort(([a], [b]) => a.localeCompare(b)).map(([chain, b]) => [chain, { start: b.start, end: b.end, ...(b.cuts && { cuts: [...b.cuts] }) }]),
    ),
  };
}

export function parseManifest(text: string): ExportManifest {
  return ManifestSchema.parse(JSON.parse(text));
}

/** The verdict on an export, and what of its files does not match its manifest. */
export interface ExportVerdict extends ChainVerdict {
  readonly fileProblems: readonly string[];
  /** Rows whose content could not be checked against their digest (redacted). */
  readonly contentUnchecked: number;
}

/** Checks an export's files against its manifest, and its rows as a chain from the manifest's start to its head, against its anchors. */
export function verifyExport(files: { manifest: ExportManifest; eventsText: string; anchorsText: string }): ExportVerdict {
  const { manifest } = files;
  const fileProblems: string[] = [];
  if (sha256Hex(files.eventsText) !== manifest.eventsSha256) fileProblems.push(`${manifest.eventsFile} does not have the sha256 the manifest records: it was changed after the export`);
  if (sha256Hex(files.anchorsText) !== manifest.anchorsSha256) fileProblems.push(`${ANCHORS_FILE} does not have the sha256 the manifest records: it was changed after the export`);
  let rows: ExportedRow[] = [];
  let anchors: ChainMark[] = [];
  try {
    rows = parseRows(files.eventsText, manifest.eventsFormat);
  } catch (error) {
    fileProblems.push(error instanceof Error ? error.message : String(error));
  }
  try {
    anchors = z.array(z.object({ chain: z.string(), length: z.number().int(), head: z.string(), by: z.string() })).parse(JSON.parse(files.anchorsText));
  } catch {
    fileProblems.push(`${ANCHORS_FILE} is not a list of anchored heads`);
  }
  if (rows.length !== manifest.rows) fileProblems.push(`the manifest says ${manifest.rows} row(s), ${manifest.eventsFile} has ${rows.length}`);
  const links: ChainLink[] = rows.map((row) => ({
    chain: row.chain,
    pos: row.pos,
    table: row.table,
    id: row.id,
    at: row.at,
    head: row.head,
    digest: row.digest,
    ...(!row.redacted && { content: row.content }),
  }));
  const bounds = new Map<string, ChainBounds>(Object.entries(manifest.chains).map(([chain, b]) => [chain, { start: b.start, end: b.end, ...(b.cuts && { cuts: b.cuts }) }]));
  const verdict = verifyLinks(links, { bounds, marks: anchors });
  return {
    ...verdict,
    whole: verdict.whole && fileProblems.length === 0,
    fileProblems,
    contentUnchecked: rows.filter((row) => row.redacted).length,
  };
}
