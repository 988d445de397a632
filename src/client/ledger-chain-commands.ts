import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { Option } from 'commander';
import type { ChainBreak, ChainVerdict } from '../ledger/chain';
import type { ExportFormat } from '../ledger/chain-export';
import type { RuntimeConfig } from '../runtime/config';
import { UserError } from '../shared/errors';
import type { HistoryDisagreement } from './ledger-evidence';
import { parseSince } from './ledger-commands';
import type * as ChainModule from '../ledger/chain';
import type * as ChainedRowsModule from '../ledger/chained-rows';
import type * as LedgerIdentityModule from '../ledger/ledger-identity';
import type * as ChainExportModule from '../ledger/chain-export';
import type * as RedactModule from '../shared/redact';
import type * as LedgerEvidenceModule from './ledger-evidence';
import type * as SessionModule from './session';

/* eslint-disable @typescript-eslint/no-require-imports -- loaded when a command runs (see cli.ts) */
const chain = () => require('../ledger/chain') as typeof ChainModule;
const chainedRows = () => require('../ledger/chained-rows') as typeof ChainedRowsModule;
const ledgerIdentityModule = () => require('../ledger/ledger-identity') as typeof LedgerIdentityModule;
const chainExport = () => require('../ledger/chain-export') as typeof ChainExportModule;
const redact = () => require('../shared/redact') as typeof RedactModule;
const ledgerEvidence = () => require('./ledger-evidence') as typeof LedgerEvidenceModule;
const session = () => require('./session') as typeof SessionModule;
/* eslint-enable @typescript-eslint/no-require-imports */

interface Io {
  readonly print: (line: string) => void;
  readonly printJson: (value: unknown) => void;
}

/** `warden ledger verify` and `warden ledger export`: the ledger's hash chain as evidence (see src/ledger/chain.ts). */
export function addLedgerChainCommands(program: Command, config: RuntimeConfig, io: Io): void {
  const ledgerCommand = program.command('ledger').description("The ledger as evidence: check its hash chain, export it for an auditor");

  ledgerCommand
    .command('verify')
    .description("Walk the ledger's hash chain and its anchors and name the first broken link, and hold gate decisions, merges and rejections against the workflow histories (exit 1 if anything differs); with --file, check an export offline")
    .option('--since <when>', 'from this date (YYYY-MM-DD) or this long ago (7d); default: the whole chain')
    .option('--file <export>', 'check this export (its directory or its manifest.json) instead, without the database')
    .option('--json', 'print JSON')
    .action(async (flags: { since?: string; file?: string; json?: boolean }) => {
      if (flags.file !== undefined) return verifyFile(flags.file, flags.json === true);
      const since = flags.since ? parseSince(flags.since) : undefined;
      const { ledger, database } = await session().openLedger(config, () => undefined);
      try {
        const target = await session().connectTemporal(config, () => undefined);
        try {
          const anchors = await ledgerEvidence().readAnchors(target.client, await ledgerIdentityModule().ledgerIdentity(ledger.pool), since);
          const verdict = await chain().verifyStoredChain(ledger.pool, { ...(since && { since }), anchors });
          const histories = await ledgerEvidence().ledgerAgainstHistories(target.client, ledger.pool, since);
          const whole = verdict.whole && histories.disagreements.length === 0;
          if (flags.json) io.printJson({ ...verdict, whole, anchors: anchors.length, historyChecked: histories.checked, disagreements: histories.disagreements });
          else {
            for (const line of chainLines(verdict)) io.print(line);
            for (const line of historyLines(histories.checked, histories.disagreements)) io.print(line);
          }
          if (!whole) process.exitCode = 1;
        } finally {
          await target.close();
        }
      } finally {
        await database.close();
      }
    });

  ledgerCommand
    .command('export')
    .description("Write every chained ledger row from a date on with its hash, the chain's anchors and a manifest, for `warden ledger verify --file` (secrets redacted)")
    .requiredOption('--since <when>', 'from this date (YYYY-MM-DD) or this long ago (7d)')
    .option('--intent <id>', "only this intent's chain")
    .addOption(new Option('--format <format>', 'the events file').choices(['jsonl', 'csv']).default('jsonl'))
    .option('--out <dir>', 'the directory to write (created; must be empty or new)', 'ledger-export')
    .option('--json', 'print JSON')
    .action(async (flags: { since: string; intent?: string; format: ExportFormat; out: string; json?: boolean }) => {
      const since = parseSince(flags.since);
      const out = path.resolve(flags.out);
      await refuseNonEmpty(out);
      const { ledger, database } = await session().openLedger(config, () => undefined);
      try {
        const target = await session().connectTemporal(config, () => undefined);
        try {
          const anchors = await ledgerEvidence().readAnchors(target.client, await ledgerIdentityModule().ledgerIdentity(ledger.pool));
          const { links, bounds, marks } = await chain().inSnapshot(ledger.pool, (db) => chain().chainsToCheck(db, { since, anchors, ...(flags.intent !== undefined && { chain: flags.intent }) }));
          const rows = chainExport().exportRows(links, { redact: redact().createRedactor(process.env) });
          const chains = new Map([...bounds].map(([chain, b]) => [chain, { start: b.start ?? { length: 0, head: '' }, end: b.end, ...(b.cuts && { cuts: b.cuts }) }]));
          // The heads anchors recorded within what is exported.
          const exportedMarks = marks.filter((m) => m.length > (chains.get(m.chain)?.start.length ?? Infinity));
          const eventsText = chainExport().formatRows(rows, flags.format);
          const anchorsText = `${JSON.stringify(exportedMarks, null, 2)}\n`;
          const manifest = chainExport().buildManifest({ rows, since, ...(flags.intent !== undefined && { intent: flags.intent }), format: flags.format, eventsText, anchorsText, chains });
          await mkdir(out, { recursive: true });
          await writeFile(path.join(out, manifest.eventsFile), eventsText);
          await writeFile(path.join(out, chainExport().ANCHORS_FILE), anchorsText);
          await writeFile(path.join(out, chainExport().MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
          const summary = { dir: out, rows: rows.length, chains: chains.size, anchoredHeads: exportedMarks.length, redacted: rows.filter((r) => r.redacted).length, manifest };
          if (flags.json) return io.printJson(summary);
          io.print(
            `wrote ${rows.length} row(s) of ${chains.size} chain(s), ${exportedMarks.length} anchored head(s) and the manifest to ${out}; ` +
              `${summary.redacted} row(s) had secrets redacted; check it with \`warden ledger verify --file ${flags.out}\``,
          );
        } finally {
          await target.close();
        }
      } finally {
        await database.close();
      }
    });

  async function verifyFile(file: string, json: boolean): Promise<void> {
    const dir = (await stat(file).catch(() => undefined))?.isDirectory() ? file : path.dirname(file);
    const read = async (name: string): Promise<string> => {
      try {
        return await readFile(path.join(dir, name), 'utf8');
      } catch {
        throw new UserError(`${path.join(dir, name)} cannot be read: --file takes an export's directory or its ${chainExport().MANIFEST_FILE}`);
      }
    };
    let manifest;
    try {
      manifest = chainExport().parseManifest(await read(chainExport().MANIFEST_FILE));
    } catch (error) {
      if (error instanceof UserError) throw error;
      throw new UserError(`${path.join(dir, chainExport().MANIFEST_FILE)} is not a ledger export's manifest`);
    }
    const verdict = chainExport().verifyExport({ manifest, eventsText: await read(manifest.eventsFile), anchorsText: await read(chainExport().ANCHORS_FILE) });
    if (json) io.printJson(verdict);
    else {
      for (const problem of verdict.fileProblems) io.print(problem);
      for (const line of chainLines(verdict)) io.print(line);
      if (verdict.contentUnchecked > 0) io.print(`${verdict.contentUnchecked} row(s) had secrets redacted: checked by their digest only`);
    }
    if (!verdict.whole) process.exitCode = 1;
  }
}

function where(b: ChainBreak): string {
  const place = b.pos !== undefined ? `position ${b.pos} of ${chainedRows().chainName(b.chain)}` : chainedRows().chainName(b.chain);
  return b.table ? `${b.table} row ${b.id} (${place}${b.at ? `, ${b.at}` : ''})` : place;
}

/** The chains' verdict in lines: each chain's first break and rows outside the chains, or that they are whole. */
export function chainLines(verdict: ChainVerdict): string[] {
  const lines: string[] = [];
  for (const b of verdict.broken) lines.push(`a chain is broken at ${where(b)}: ${b.problem}`);
  for (const row of verdict.unchained) lines.push(`${row.table} row ${row.id} (${row.at}): ${row.problem}`);
  if (verdict.broken.length === 0 && verdict.unchained.length === 0) {
    lines.push(`the chains are whole: ${verdict.rows} row(s) in ${verdict.chains} chain(s), ${verdict.marksChecked} anchored head(s) agree`);
  }
  if (verdict.beforeChains > 0) lines.push(`${verdict.beforeChains} row(s) from before the chains began (migration 010) are not covered`);
  return lines;
}

function historyLines(checked: number, disagreements: readonly HistoryDisagreement[]): string[] {
  if (disagreements.length === 0) return [`${checked} gate decision(s) and ending(s) agree with the workflow histories`];
  return disagreements.map((d) => `intent ${d.intentId}, ${d.table} row ${d.id}: ${d.problem}`);
}

async function refuseNonEmpty(dir: string): Promise<void> {
  const entries = await readdir(dir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [];
    throw new UserError(`--out ${dir} cannot be used: ${error.message}`);
  });
  if (entries.length > 0) throw new UserError(`--out ${dir} is not empty: give a new or empty directory`);
}
