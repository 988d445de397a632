import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import { writeAnchorRow } from '../ledger/chain';
import { ledgerIdentity } from '../ledger/ledger-identity';
import { inTransaction } from '../ledger/transaction';
import { deterministicUuid } from '../ledger/event-id';
import { formatReport } from '../ledger/report-text';
import { ExchangeStore, RECORDING_DEFAULTS } from '../ledger/exchange-store';
import { parseDuration } from '../shared/duration';
import { LadderStore, type LadderDefaults, type LadderState } from '../ledger/ladder-store';
import type { Ledger } from '../ledger/ledger';
import type { LadderRun } from '../shared/ladder';
import type { DailyReport, GateDecisionInput, SafetyEventInput } from '../ledger/types';
import type { Severity } from '../shared/safety-events';
import { redactDeep, type Redactor } from '../shared/redact';
import { activityLogger } from './log-context';

/** What an anchor run records in its history: the system chain's head after its LEDGER_ANCHOR row. */
export interface LedgerAnchor {
  readonly length: number;
  /** hex */
  readonly head: string;
  /** How many intents' chains the row lists (those that moved since the last anchor). */
  readonly chains: number;
  /** When, by the worker's clock (ISO). */
  readonly at: string;
  /** Which ledger it anchors (see ledgerIdentity): verify skips anchors of another ledger on the same server. */
  readonly ledger?: string;
}

/** One row the workflow wants written: a safety event or a gate decision. */
export type LedgerRow = { readonly safetyEvent: SafetyEventInput } | { readonly gateDecision: GateDecisionInput };

/**
 * Rows the workflow wants written together, in the order it recorded them: the ledger numbers
 * rows as they arrive (their `seq`), and `warden audit` lists them in that order. Ids are made in
 * the workflow, so retries are no-ops.
 */
export interface LedgerBatch {
  readonly rows: readonly LedgerRow[];
}

export interface LedgerActivityDeps {
  readonly ledger: Ledger;
  readonly redact: Redactor;
  /** Where agent profiles start on the automation ladder and whether they may climb (config `automation`). */
  readonly automation?: LadderDefaults;
  readonly logger: Logger;
  /** The day budget this worker enforces (`worker.dayBudgetUsd`, 0 = no limit): the report's default. */
  readonly dayBudgetUsd?: string;
  /** How long recorded model exchanges are kept (`worker.recording.keep`; default RECORDING_DEFAULTS'). */
  readonly recordingKeep?: string;
  /** Where the scheduled daily reports are written (`<Warden home>/reports`). */
  readonly reportsDir: string;
}

/**
 * Writes rows the workflow recorded, redacted, in one statement: the batch joins its intent's hash
 * chain whole, or not at all. Idempotent by row id. Returns how many rows were new.
 */
export async function writeLedgerBatch(deps: Pick<LedgerActivityDeps, 'ledger' | 'redact'>, batch: LedgerBatch): Promise<number> {
  const rows = batch.rows.map((row) => ('gateDecision' in row ? { gateDecision: redactDeep(row.gateDecision, deps.redact) } : { safetyEvent: redactDeep(row.safetyEvent, deps.redact) }));
  return deps.ledger.audit.recordBatch(rows);
}

/** How loud a daily report is in the ledger: RED is a high-severity safety event. */
const REPORT_SEVERITY: Record<DailyReport['health'], Severity> = { GREEN: 'info', YELLOW: 'medium', RED: 'high' };

/** Before a profile's first run: Manual, allowed to climb (the default profile's setting). */
export const DEFAULT_LADDER: LadderDefaults = { level: 0, allowLevelUp: true };

export function createLedgerActivities(deps: LedgerActivityDeps) {
  const ladder = new LadderStore(deps.ledger.pool);
  const defaults = deps.automation ?? DEFAULT_LADDER;
  return {
    /** The agent profile's ladder level and metrics, read once per intent (the workflow records it). */
    async readLadder({ scope }: { readonly scope: string }): Promise<LadderState> {
      return ladder.state(scope, defaults);
    },

    /**
     * Counts a finished intent on its profile's ladder, after writing the intent's last rows
     * (`ledgerBatch`, its ending) so the two take one call. The id is made from the workflow run,
     * so a retried activity counts it once (and the rows' ids write them once). Returns the level
     * before and after.
     */
    async recordLadderRun(input: {
      readonly scope: string;
      readonly intentId: string;
      readonly runId: string;
      readonly run: LadderRun;
      readonly ledgerBatch?: LedgerBatch;
    }): Promise<{ readonly before: number; readonly after: number }> {
      if (input.ledgerBatch && input.ledgerBatch.rows.length > 0) await writeLedgerBatch(deps, input.ledgerBatch);
      const { before, after } = await ladder.recordRun({ id: deterministicUuid('ladder-run', input.intentId, input.runId), scope: input.scope, intentId: input.intentId, run: input.run, defaults });
      return { before: before.level, after: after.level };
    },

    /**
     * Appends a batch to the ledger. Idempotent by row id (a retry after a partial write inserts
     * only what is missing); while PostgreSQL is unreachable it fails and Temporal retries it.
     * Returns how many rows were new.
     */
    async appendToLedger(batch: LedgerBatch): Promise<{ readonly inserted: number }> {
      return { inserted: await writeLedgerBatch(deps, batch) };
    },

    /**
     * An anchor: lists the head of every hash chain that moved since the last one in a
     * LEDGER_ANCHOR row of the system chain, and returns the system chain's head after it, for the
     * anchor workflow's history. The row's id comes from the run, so a retry lists nothing twice.
     */
    async anchorLedger(): Promise<LedgerAnchor> {
      const { workflowExecution: run, activityId } = Context.current().info;
      const id = deterministicUuid('ledger-anchor', run?.workflowId ?? activityId, run?.runId ?? '');
      const now = new Date();
      const head = await inTransaction(deps.ledger.pool, (client) => writeAnchorRow(client, id, now));
      return { length: head.length, head: head.head, chains: head.chains, at: now.toISOString(), ledger: await ledgerIdentity(deps.ledger.pool) };
    },

    /**
     * Retention cleanup: the only path that deletes ledger rows; recorded model exchanges go with
     * it after their own `recordingKeep` (on even when recording is off: what was recorded expires).
     */
    async cleanupLedger({ retentionDays }: { readonly retentionDays: number }): Promise<Record<string, number>> {
      const deleted = await deps.ledger.retention.cleanup(retentionDays);
      const keepMs = parseDuration(deps.recordingKeep ?? RECORDING_DEFAULTS.keep);
      return { ...deleted, ...(await new ExchangeStore(deps.ledger.pool).cleanup(new Date(Date.now() - keepMs))) };
    },

    /** The daily health report for `date` (YYYY-MM-DD), against the given day budget or else this worker's. */
    async buildDailyReport(input: { readonly date: string; readonly dayBudgetUsd?: string }): Promise<DailyReport> {
      return deps.ledger.queries.dailyReport({ date: input.date, dayBudgetUsd: input.dayBudgetUsd ?? deps.dayBudgetUsd });
    },

    /**
     * Leaves a scheduled report where people find it: `<reportsDir>/<date>.md` (and `.json`), one
     * JSON log line (error level when RED), and a DAILY_HEALTH_REPORT safety event whose severity
     * follows the health (RED → high). The event's id is made from the workflow run, so a retry
     * records it once.
     */
    async publishDailyReport({ report }: { readonly report: DailyReport }): Promise<{ readonly path: string; readonly recorded: boolean }> {
      const file = path.join(deps.reportsDir, `${report.date}.md`);
      await mkdir(deps.reportsDir, { recursive: true });
      await writeAtomically(file, `${formatReport(report).join('\n')}\n`);
      await writeAtomically(file.replace(/\.md$/, '.json'), `${JSON.stringify(report, null, 2)}\n`);
      const log = activityLogger(deps.logger);
      const message = `daily health report for ${report.date}: ${report.health} (${file})`;
      if (report.health === 'RED') log.error({ dailyReport: report }, message);
      else if (report.health === 'YELLOW') log.warn({ dailyReport: report }, message);
      else log.info({ dailyReport: report }, message);
      const run = Context.current().info.workflowExecution;
      const recorded = await deps.ledger.audit.recordSafetyEvent({
        id: deterministicUuid('daily-report', report.date, run?.workflowId ?? null, run?.runId ?? null),
        timestamp: new Date(),
        eventType: 'DAILY_HEALTH_REPORT',
        severity: REPORT_SEVERITY[report.health],
        reason: `daily health report for ${report.date}: ${report.rule.slice(report.rule.lastIndexOf(`${report.health}:`))}`,
        ...(report.health !== 'GREEN' && { suggestion: `read it with \`warden report --date ${report.date}\` or in ${file}, and look into each cause it names` }),
        metadata: { date: report.date, health: report.health, path: file, report },
      });
      return { path: file, recorded };
    },
  };
}

/** Writes `file` whole or not at all: a reader never sees half a report. */
async function writeAtomically(file: string, content: string): Promise<void> {
  const partial = `${file}.${process.pid}.partial`;
  await writeFile(partial, content);
  await rename(partial, file);
}
