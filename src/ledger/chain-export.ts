import { z } from 'zod';
import { sha256Hex, verifyLinks, type Anchor, type ChainLink, type ChainVerdict, type CutRange } from './chain';

/*
 * A ledger export an auditor can take away: every chained row from a start on, each with its
 * place in the chain and its hash, the anchors, and a manifest with the files' sha256. It checks
 * offline (`warden ledger verify --file`) with the same walk as the database's chain. Rows of
 * other intents than the one asked for stay in the chain as links without content, so the
 * chain still verifies without showing them; a row whose content had a secret redacted keeps
 * its digest, which then cannot be checked against the redacted text (it is marked so).
 */

export const EXPORT_FORMATS = ['jsonl', 'csv'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

export const MANIFEST_FILE = 'manifest.json';
export const ANCHORS_FILE = 'anchors.json';

/** One exported row. */
export interface ExportedRow {
  readonly pos: number;
  readonly table: string;
  readonly id: string;
  readonly at: string;
  readonly intentId: string;
  readonly prev: string;
  readonly hash: string;
  readonly digest: string;
  /** Content left out: a row of another intent than the export's. */
  readonly elided: boolean;
  /** Content with secrets redacted: it no longer hashes to the digest. */
  readonly redacted: boolean;
  readonly content: string;
}

const ManifestSchema = z.object({
  format: z.literal('warden-ledger-export'),
  version: z.literal(1),
  createdAt: z.string(),
  since: z.string(),
  intent: z.string().nullable(),
  eventsFile: z.string(),
  eventsFormat: z.enum(EXPORT_FORMATS),
  eventsSha256: z.string(),
  anchorsSha256: z.string(),
  rows: z.number().int(),
  start: z.object({ pos: z.number().int(), hash: z.string() }),
  head: z.object({ pos: z.number().int(), hash: z.string() }),
  cuts: z.array(z.object({ first: z.number().int(), last: z.number().int(), lastHash: z.string() })),
});
export type ExportManifest = z.infer<typeof ManifestSchema>;

const COLUMNS = ['pos', 'table', 'id', 'at', 'intentId', 'prev', 'hash', 'digest', 'elided', 'redacted', 'content'] as const;

/** The rows as exported: other intents' content left out, secrets redacted. */
export function exportRows(links: readonly ChainLink[], opts: { intent?: string; redact: (text: string) => string }): ExportedRow[] {
  return links.map((link) => {
    const elided = opts.intent !== undefined && link.intentId !== opts.intent;
    const content = elided ? '' : opts.redact(link.content ?? '');
    return {
      pos: link.pos,
      table: link.table,
      id: link.id,
      at: link.at,
      intentId: link.intentId ?? '',
      prev: link.prev,
      hash: link.hash,
      digest: link.digest,
      elided,
      redacted: !elided && content !== link.content,
      content,
    };
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
    pos: z.number().int(),
    table: z.string(),
    id: z.string(),
    at: z.string(),
    intentId: z.string(),
    prev: z.string(),
    hash: z.string(),
    digest: z.string(),
    elided: z.boolean(),
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
      return RowSchema.parse({ ...value, pos: /^\d+$/.test(value.pos!) ? Number(value.pos) : NaN, elided: value.elided === 'true', redacted: value.redacted === 'true' });
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
  readonly cuts: readonly CutRange[];
  readonly now?: Date;
}): ExportManifest {
  const first = input.rows[0];
  const last = input.rows[input.rows.length - 1];
  return {
    format: 'warden-ledger-export',
    version: 1,
    createdAt: (input.now ?? new Date()).toISOString(),
    since: input.since.toISOString(),
    intent: input.intent ?? null,
    eventsFile: `events.${input.format}`,
    eventsFormat: input.format,
    eventsSha256: sha256Hex(input.eventsText),
    anchorsSha256: sha256Hex(input.anchorsText),
    rows: input.rows.length,
    start: first ? { pos: first.pos - 1, hash: first.prev } : { pos: 0, hash: '' },
    head: last ? { pos: last.pos, hash: last.hash } : { pos: 0, hash: '' },
    cuts: [...input.cuts],
  };
}

export function parseManifest(text: string): ExportManifest {
  return ManifestSchema.parse(JSON.parse(text));
}

/** The verdict on an export, and what of its files does not match its manifest. */
export interface ExportVerdict extends ChainVerdict {
  readonly fileProblems: readonly string[];
  /** Rows whose content could not be checked against their digest (redacted, or of other intents). */
  readonly contentUnchecked: number;
}

/** Checks an export's files against its manifest, and its rows as a chain from the manifest's start to its head, against its anchors. */
export function verifyExport(files: { manifest: ExportManifest; eventsText: string; anchorsText: string }): ExportVerdict {
  const { manifest } = files;
  const fileProblems: string[] = [];
  if (sha256Hex(files.eventsText) !== manifest.eventsSha256) fileProblems.push(`${manifest.eventsFile} does not have the sha256 the manifest records: it was changed after the export`);
  if (sha256Hex(files.anchorsText) !== manifest.anchorsSha256) fileProblems.push(`${ANCHORS_FILE} does not have the sha256 the manifest records: it was changed after the export`);
  let rows: ExportedRow[] = [];
  let anchors: Anchor[] = [];
  try {
    rows = parseRows(files.eventsText, manifest.eventsFormat);
  } catch (error) {
    fileProblems.push(error instanceof Error ? error.message : String(error));
  }
  try {
    anchors = z.array(z.object({ pos: z.number(), hash: z.string(), at: z.string(), workflowId: z.string(), runId: z.string() })).parse(JSON.parse(files.anchorsText));
  } catch {
    fileProblems.push(`${ANCHORS_FILE} is not a list of anchors`);
  }
  if (rows.length !== manifest.rows) fileProblems.push(`the manifest says ${manifest.rows} row(s), ${manifest.eventsFile} has ${rows.length}`);
  const links: ChainLink[] = rows.map((row) => ({
    pos: row.pos,
    table: row.table,
    id: row.id,
    at: row.at,
    prev: row.prev,
    hash: row.hash,
    digest: row.digest,
    ...(!row.elided && !row.redacted && { content: row.content }),
  }));
  const verdict = verifyLinks(links, {
    start: manifest.start,
    cuts: manifest.cuts,
    anchors: anchors.filter((a) => a.pos > manifest.start.pos),
    ...(rows.length > 0 && { head: manifest.head }),
  });
  return {
    ...verdict,
    whole: verdict.whole && fileProblems.length === 0,
    fileProblems,
    contentUnchecked: rows.filter((row) => row.elided || row.redacted).length,
  };
}
