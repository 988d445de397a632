import type { Command } from 'commander';
import { Option } from 'commander';
import type { Client, ScheduleOptionsStartWorkflowAction, ScheduleSpec } from '@temporalio/client';
import type { Workflow } from '@temporalio/common';
import type { WardenConfig } from '../config/schema';
import type { CostGrouping, TimelineEntry } from '../ledger/types';
import type { RuntimeConfig } from '../runtime/config';
import { sumUsd } from '../shared/money';
import { parseDuration } from '../shared/duration';
import { UserError } from '../shared/errors';
import { lineageRefFor, TASK_QUEUE } from '../shared/ids';
import type { maintenanceWorkflow } from '../workflows';
import type { TimelineWithHistory } from './history-timeline';
import type * as ClientModule from '@temporalio/client';
import type * as BudgetStoreModule from '../ledger/budget-store';
import type * as MigrateModule from '../ledger/migrate';
import type * as ExchangeStoreModule from '../ledger/exchange-store';
import type * as NotificationOutboxModule from '../ledger/notification-outbox';
import type * as BreakerHistoryModule from '../ledger/breaker-history';
import type * as GateStatisticsModule from '../ledger/gate-statistics';
import type * as ReportTextModule from '../ledger/report-text';
import type * as StatisticsTextModule from '../ledger/statistics-text';
import type * as TemporalModule from '../runtime/temporal';
import type * as SweepScheduleModule from '../workers/sweep-schedule';
import type * as HistoryTimelineModule from './history-timeline';
import type * as PromptFilesModule from './prompt-files';
import type * as SessionModule from './session';
import type * as OpenLedgerModule from './open-ledger';

/* eslint-disable @typescript-eslint/no-require-imports -- loaded when a command runs (see cli.ts) */
const temporalClient = () => require('@temporalio/client') as typeof ClientModule;
const budgetStore = () => require('../ledger/budget-store') as typeof BudgetStoreModule;
const migrateModule = () => require('../ledger/migrate') as typeof MigrateModule;
const exchangeStore = () => require('../ledger/exchange-store') as typeof ExchangeStoreModule;
const notificationOutbox = () => require('../ledger/notification-outbox') as typeof NotificationOutboxModule;
const breakerHistoryModule = () => require('../ledger/breaker-history') as typeof BreakerHistoryModule;
const gateStatisticsModule = () => require('../ledger/gate-statistics') as typeof GateStatisticsModule;
const reportText = () => require('../ledger/report-text') as typeof ReportTextModule;
const statisticsText = () => require('../ledger/statistics-text') as typeof StatisticsTextModule;
const temporal = () => require('../runtime/temporal') as typeof TemporalModule;
const sweepSchedule = () => require('../workers/sweep-schedule') as typeof SweepScheduleModule;
const historyTimeline = () => require('./history-timeline') as typeof HistoryTimelineModule;
const promptFiles = () => require('./prompt-files') as typeof PromptFilesModule;
const session = () => require('./session') as typeof SessionModule;
const openLedgerModule = () => require('./open-ledger') as typeof OpenLedgerModule;
/* eslint-enable @typescript-eslint/no-require-imports */

/** Id of the schedule that runs ledger retention and the daily report. */
export const MAINTENANCE_SCHEDULE_ID = 'warden-maintenance';

interface Io {
  readonly print: (line: string) => void;
  readonly printJson: (value: unknown) => void;
}

/** The longest retention `--retention` takes: a hundred years. */
export const MAX_RETENTION_DAYS = 36_500;

/** `90d` → 90; a bare number is days too; any duration of at least a day (`2160h`) is taken. */
export function parseRetentionDays(text: string): number {
  let days: number;
  try {
    days = /^\d+$/.test(text.trim()) ? Number(text) : parseDuration(text) / 86_400_000;
  } catch {
    throw new UserError(`--retention takes how long to keep rows, such as 90d (a bare number counts days), not ${text}`);
  }
  if (!Number.isFinite(days) || days < 1 || days > MAX_RETENTION_DAYS) {
    throw new UserError(`--retention must be between 1 day and ${MAX_RETENTION_DAYS} days (100 years), not ${text}`);
  }
  return days;
}

/**
 * A calendar day written YYYY-MM-DD, or undefined if `text` is not one. Impossible days
 * (`2025-02-30`) are refused rather than rolled over into the next month.
 */
export function calendarDay(text: string): string | undefined {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(text)) return undefined;
  const date = new Date(`${text}T00:00:00Z`);
  return !Number.isNaN(date.getTime()) && date.toISOString().slice(0, 10) === text ? text : undefined;
}

/** `2026-11-01` (from its start, UTC) or a duration back from now (`7d`, `12h`). */
export function parseSince(text: string, now: Date = new Date()): Date {
  const since = (): never => {
    throw new UserError(`--since takes a date (YYYY-MM-DD) or a duration such as 7d, not ${text}`);
  };
  if (/^\d{4}-\d{2}-\d{2}$/.test(text)) {
    const day = calendarDay(text) ?? since();
    return new Date(`${day}T00:00:00Z`);
  }
  try {
    return new Date(now.getTime() - parseDuration(text));
  } catch {
    return since();
  }
}

/**
 * The end of a period: `2026-11-01` takes in that whole day (UTC), a duration ends that long ago.
 * Exclusive, like every period end the ledger's queries take.
 */
export function parseUntil(text: string, now: Date = new Date()): Date {
  if (/^\d{4}-\d{2}-\d{2}$/.test(text)) {
    const day = calendarDay(text);
    if (!day) throw new UserError(`--until takes a date (YYYY-MM-DD) or a duration such as 7d, not ${text}`);
    return new Date(Date.parse(`${day}T00:00:00Z`) + 86_400_000);
  }
  try {
    return new Date(now.getTime() - parseDuration(text));
  } catch {
    throw new UserError(`--until takes a date (YYYY-MM-DD) or a duration such as 7d, not ${text}`);
  }
}

function checkDate(text: string | undefined): string {
  if (text === undefined) return new Date().toISOString().slice(0, 10);
  const day = calendarDay(text);
  if (!day) throw new UserError(`--date takes a calendar day as YYYY-MM-DD, not ${text}`);
  return day;
}

function checkUsd(text: string | undefined, flag: string): string | undefined {
  if (text === undefined) return undefined;
  if (!/^\d{1,8}(\.\d{1,6})?$/.test(text)) throw new UserError(`${flag} takes a USD amount such as 25 or 12.50 (0 = no limit), not ${text}`);
  return text;
}

/** Creates the schedule, or updates its spec and action when it exists; true when created. */
async function upsertSchedule(client: Client, scheduleId: string, spec: ScheduleSpec, action: ScheduleOptionsStartWorkflowAction<Workflow>): Promise<boolean> {
  try {
    await client.schedule.create({ scheduleId, spec, action, policies: { overlap: temporalClient().ScheduleOverlapPolicy.SKIP } });
    return true;
  } catch (error) {
    if (!(error instanceof temporalClient().ScheduleAlreadyRunning)) throw error;
    await client.schedule.getHandle(scheduleId).update((previous) => ({ ...previous, spec, action }));
    return false;
  }
}

/** Adds the ledger's commands: audit, costs, report, db migrateModule().migrate, db cleanup, schedules install. */
export function addLedgerCommands(program: Command, config: RuntimeConfig, io: Io, settings: () => WardenConfig): void {
  const withLedger = async <T>(fn: (ledger: Awaited<ReturnType<typeof SessionModule.openLedger>>['ledger']) => Promise<T>): Promise<T> => {
    const { ledger, database } = await session().openLedger(config, () => undefined);
    try {
      return await fn(ledger);
    } finally {
      await database.close();
    }
  };

  program
    .command('audit [id]')
    .description("An intent's timeline from the ledger: stage starts and ends, test results, gates, decisions, safety events and spend, in order")
    .option('--activities', "also each activity attempt the worker ran (start, end, duration, outcome, spend)")
    .option('--json', 'print JSON')
    .option('--prompts', 'print the exact prompt of every attempt instead (from the intent\'s lineage)')
    .option('--books', "check the books instead: each intent's spend in the budget tables against cost_events, to the cent (every intent when no id is given; exit 1 if any differ)")
    .option('--with-history', "each row beside the workflow history event it ties to (run, event id), activity runs included; needs the Temporal server")
    .action(async (id: string | undefined, flags: { activities?: boolean; json?: boolean; prompts?: boolean; books?: boolean; withHistory?: boolean }) => {
      if (flags.books) return auditBooks(id, flags.json === true);
      if (id === undefined) throw new UserError('give the intent id to audit, or --books to check the books of every intent');
      if (flags.withHistory) return auditWithHistory(id, flags.json === true);
      if (flags.prompts) {
        const repoPath = await withLedger((ledger) => ledger.queries.intentRepoPath(id));
        if (!repoPath) throw new UserError(`the ledger has nothing for intent ${id}`);
        const { dir, prompts } = await promptFiles().findPrompts(id, repoPath, config);
        if (flags.json) return io.printJson(prompts.map((p) => ({ name: p.name, path: p.path, prompt: p.content })));
        if (prompts.length === 0) throw new UserError(`no prompts of intent ${id} were found (looked in its worktree, ${repoPath}'s docs/lineage and ${lineageRefFor(id)}, and ${config.lineageRoot})`);
        io.print(`prompts of ${id}, from ${dir}:`);
        for (const p of prompts) io.print(`\n===== ${p.name} =====\n${p.content.trimEnd()}`);
        return;
      }
      const [timeline, record] = await withLedger((ledger) => Promise.all([ledger.queries.timeline(id, { activities: flags.activities }), ledger.queries.intentRecord(id)]));
      if (timeline.length === 0) throw new UserError(`the ledger has nothing for intent ${id}`);
      if (flags.json) return io.printJson(timeline);
      for (const entry of timeline) io.print(formatTimelineEntry(entry));
      io.print(formatSpendTotal(timeline));
      if (record.ending?.lineagePath) io.print(`lineage: ${record.ending.lineagePath}`);
    });

  /** The intent's rows beside the history events they tie to: the history first, then the row. */
  async function auditWithHistory(intentId: string, json: boolean): Promise<void> {
    const target = await temporal().connectTemporalIfRunning(config);
    if (!target) throw new UserError("the Temporal server is not running: start it with `warden dev` (or set TEMPORAL_ADDRESS); --with-history reads the intent's workflow history from it", 1);
    try {
      const entries = await withLedger((ledger) => historyTimeline().timelineWithHistory(target.client, ledger.pool, intentId));
      if (entries.length === 0) throw new UserError(`the ledger has nothing for intent ${intentId}`);
      if (json) return io.printJson(entries);
      for (const entry of entries) io.print(formatHistoryTie(entry));
      const untied = entries.filter((entry) => !entry.history).length;
      io.print(`${entries.length - untied} of ${entries.length} rows tied to the workflow history${untied ? `; ${untied} not (see docs/operations.md, "The ledger beside the workflow history")` : ''}`);
    } finally {
      await target.close();
    }
  }

  /** Budget tables against cost_events, per intent: a difference is a call counted in one and not the other. */
  async function auditBooks(intentId: string | undefined, json: boolean): Promise<void> {
    const books = await withLedger((ledger) => ledger.budget.books(intentId === undefined ? {} : { intentId }));
    const differing = books.filter((b) => b.budgetUsd !== b.costEventsUsd);
    const differenceCents = budgetStore().booksDifferenceCents(differing);
    if (json) io.printJson({ balanced: differing.length === 0, differenceCents, intents: books });
    else {
      // One line per intent that differs (or the one asked about); then the verdict.
      for (const b of intentId === undefined ? differing : books) {
        const open = b.openReservations > 0 ? `; ${b.openReservations} reservation(s) still open` : '';
        io.print(`${b.intentId}: budget tables $${b.budgetUsd}, cost_events $${b.costEventsUsd}${b.budgetUsd === b.costEventsUsd ? ' (balanced)' : ' DIFFER'}${open}`);
      }
      const open = books.reduce((sum, b) => sum + b.openReservations, 0);
      const stillOpen = open > 0 ? `; ${open} reservation(s) still open (calls in flight, or of attempts not yet known to be over)` : '';
      io.print(
        (differing.length === 0 ? `the books balance across ${books.length} intent(s)` : `the books differ for ${differing.length} intent(s), by ${differenceCents} cent(s) in all`) + stillOpen,
      );
    }
    if (differing.length > 0) process.exitCode = 1;
  }

  program
    .command('costs')
    .description('Spend from the ledger, grouped, with exact totals')
    .option('--since <when>', 'from this date (YYYY-MM-DD) or this long ago (7d)')
    .addOption(new Option('--by <grouping>', 'group by').choices(['intent', 'stage', 'model', 'agent', 'day']).default('intent'))
    .option('--json', 'print JSON')
    .action(async (flags: { since?: string; by: CostGrouping; json?: boolean }) => {
      const since = flags.since ? parseSince(flags.since) : undefined;
      const result = await withLedger((ledger) => ledger.queries.costs({ since, by: flags.by }));
      if (flags.json) return io.printJson(result);
      io.print(`${flags.by.padEnd(40)} ${'usd'.padStart(12)} ${'calls'.padStart(6)} ${'in tok'.padStart(9)} ${'out tok'.padStart(9)}`);
      for (const row of result.rows) {
        io.print(`${row.key.padEnd(40)} ${row.usd.padStart(12)} ${String(row.calls).padStart(6)} ${String(row.inputTokens).padStart(9)} ${String(row.outputTokens).padStart(9)}`);
      }
      io.print(`${'total'.padEnd(40)} ${result.totalUsd.padStart(12)}`);
    });

  program
    .command('notifications')
    .description('Notifications that were not delivered after their last attempt (dead letters), newest first')
    .option('--intent <id>', 'only those of this intent')
    .option('--json', 'print JSON')
    .action(async (flags: { intent?: string; json?: boolean }) => {
      const letters = await withLedger((ledger) => new (notificationOutbox().NotificationOutbox)(ledger.pool).deadLetters(flags.intent));
      if (flags.json) return io.printJson(letters);
      if (letters.length === 0) return io.print(`every notification${flags.intent ? ` of ${flags.intent}` : ''} was delivered (or is still being tried)`);
      for (const l of letters) io.print(`${l.at}  ${l.kind.padEnd(18)} ${l.intentId ?? '-'}  to ${l.channel} after ${l.attempts} attempt(s): ${l.error}`);
    });

  program
    .command('report')
    .description('The daily health report: each safety layer, and GREEN / YELLOW / RED with the rule that decided it; or, with --gates / --breakers, gate statistics and breaker history over a period')
    .option('--date <date>', 'YYYY-MM-DD (default: today, UTC)')
    .option('--budget <usd>', "the day's budget to compare spend with (default: the config's worker.dayBudgetUsd; 0 = no limit)")
    .option('--gates', 'gate statistics instead: opened, decided, timed out, escalated; approval, rejection and request-changes rates; time to decision (median, p90); per gate kind, approver and day')
    .option('--breakers', 'breaker history instead: every circuit state change per endpoint with its reason, and rate-limit refusals per agent and model')
    .option('--since <when>', 'with --gates / --breakers: from this date (YYYY-MM-DD) or this long ago (7d); default: the oldest row')
    .option('--until <when>', 'with --gates / --breakers: up to the end of this date (YYYY-MM-DD) or until this long ago (1d); default: now')
    .option('--json', 'print JSON')
    .action(async (flags: { date?: string; budget?: string; gates?: boolean; breakers?: boolean; since?: string; until?: string; json?: boolean }) => {
      if (flags.gates || flags.breakers) {
        if (flags.date !== undefined || flags.budget !== undefined) throw new UserError('--date and --budget are for the daily report; give --since / --until with --gates or --breakers');
        const period = { ...(flags.since !== undefined && { since: parseSince(flags.since) }), ...(flags.until !== undefined && { until: parseUntil(flags.until) }) };
        if (period.since && period.until && period.since >= period.until) throw new UserError(`--since (${period.since.toISOString()}) must come before --until (${period.until.toISOString()})`);
        const [gates, breakers] = await withLedger((ledger) =>
          Promise.all([flags.gates ? gateStatisticsModule().gateStatistics(ledger.pool, period) : undefined, flags.breakers ? breakerHistoryModule().breakerHistory(ledger.pool, period) : undefined]),
        );
        if (flags.json) return io.printJson({ ...(gates && { gates }), ...(breakers && { breakers }) });
        const lines = [...(gates ? statisticsText().formatGateStatistics(gates) : []), ...(gates && breakers ? [''] : []), ...(breakers ? statisticsText().formatBreakerHistory(breakers) : [])];
        for (const line of lines) io.print(line);
        return;
      }
      if (flags.since !== undefined || flags.until !== undefined) throw new UserError('--since and --until go with --gates or --breakers; the daily report takes --date');
      const date = checkDate(flags.date);
      // The same budget the worker enforces, unless asked about another.
      const dayBudgetUsd = checkUsd(flags.budget, '--budget') ?? settings().worker.dayBudgetUsd;
      const report = await withLedger((ledger) => ledger.queries.dailyReport({ date, dayBudgetUsd }));
      if (flags.json) return io.printJson(report);
      for (const line of reportText().formatReport(report)) io.print(line);
    });

  const db = program.command('db').description('The ledger database');
  db.command('migrate')
    .description('Apply pending migrations (workers also do this at start)')
    .option('--json', 'print JSON')
    .action(async (flags: { json?: boolean }) => {
      // Opened without migrating, so that what this command applies is what it reports.
      const database = await openLedgerModule().joinDatabase(config, { migrate: false });
      try {
        const applied = await migrateModule().migrate(database.pool);
        if (flags.json) return io.printJson({ database: database.url, applied });
        io.print(applied.length ? `applied ${applied.join(', ')}` : 'the ledger schema is up to date');
      } finally {
        await database.close();
      }
    });
  db.command('cleanup')
    .description('Delete ledger rows older than the retention period (the only delete path)')
    .requiredOption('--retention <age>', 'keep this much, e.g. 90d (a bare number counts days)')
    .option('--json', 'print JSON')
    .action(async (flags: { retention: string; json?: boolean }) => {
      const days = parseRetentionDays(flags.retention);
      // Recorded model exchanges go after their own retention (worker.recording.keep).
      const keep = settings().worker.recording?.keep ?? exchangeStore().RECORDING_DEFAULTS.keep;
      const [deleted, recordings] = await withLedger((ledger) => Promise.all([ledger.retention.cleanup(days), new (exchangeStore().ExchangeStore)(ledger.pool).cleanup(new Date(Date.now() - parseDuration(keep)))]));
      if (flags.json) return io.printJson({ retentionDays: days, deleted, recordingKeep: keep, recordingsDeleted: recordings });
      io.print(`deleted rows older than ${days} days: ${Object.entries(deleted).map(([t, n]) => `${t} ${n}`).join(', ')}`);
      io.print(`deleted recorded model exchanges older than ${keep}: ${Object.entries(recordings).map(([t, n]) => `${t} ${n}`).join(', ')}`);
    });

  const schedules = program.command('schedules').description('Temporal Schedules Warden relies on');
  schedules
    .command('install')
    .description('Create or update the daily schedule that runs ledger cleanup and the health report, and the one that sweeps up after intents that ended without their cleanup (every 30 s; every worker installs that one as it starts)')
    .option('--retention <age>', 'ledger retention', '90d')
    .option('--at <HH:MM>', 'time of day (UTC)', '03:00')
    .option('--budget <usd>', "the day's budget the report compares spend with (default: worker.dayBudgetUsd of the worker that runs it; 0 = no limit)")
    .option('--json', 'print JSON')
    .action(async (flags: { retention: string; at: string; budget?: string; json?: boolean }) => {
      const retentionDays = parseRetentionDays(flags.retention);
      const at = /^(\d{1,2}):(\d{2})$/.exec(flags.at);
      if (!at || Number(at[1]) > 23 || Number(at[2]) > 59) throw new UserError(`--at takes HH:MM (UTC), not ${flags.at}`);
      const dayBudgetUsd = checkUsd(flags.budget, '--budget');
      const target = await session().connectTemporal(config, () => undefined);
      try {
        const action = {
          type: 'startWorkflow' as const,
          workflowType: 'maintenanceWorkflow' as unknown as typeof maintenanceWorkflow,
          taskQueue: TASK_QUEUE,
          args: [{ retentionDays, ...(dayBudgetUsd !== undefined && { dayBudgetUsd }) }] as [Parameters<typeof maintenanceWorkflow>[0]],
        };
        const spec = { calendars: [{ hour: Number(at[1]), minute: Number(at[2]), comment: 'daily ledger upkeep' }] };
        const created = await upsertSchedule(target.client, MAINTENANCE_SCHEDULE_ID, spec, action);
        // Every worker installs this one too; here it is put right if someone changed it.
        const sweep = await sweepSchedule().keepSweepSchedule(target.client, TASK_QUEUE);
        const summary = {
          scheduleId: MAINTENANCE_SCHEDULE_ID,
          created,
          at: flags.at,
          retentionDays,
          dayBudgetUsd: dayBudgetUsd ?? 'worker.dayBudgetUsd',
          sweep: { scheduleId: sweepSchedule().SWEEP_SCHEDULE_ID, created: sweep === 'created', every: `${sweepSchedule().SWEEP_EVERY_MS / 1000}s` },
        };
        if (flags.json) return io.printJson(summary);
        io.print(
          `${created ? 'created' : 'updated'} schedule ${MAINTENANCE_SCHEDULE_ID}: daily at ${flags.at} UTC, retention ${retentionDays} days, ` +
            `report budget ${dayBudgetUsd !== undefined ? `$${dayBudgetUsd}` : "the worker's worker.dayBudgetUsd"}; ` +
            "each report goes to the worker's log, to reports/<date>.md under its Warden home, and to the ledger (DAILY_HEALTH_REPORT)",
        );
        io.print(
          `${sweep === 'created' ? 'created' : sweep === 'updated' ? 'updated' : 'kept'} schedule ${sweepSchedule().SWEEP_SCHEDULE_ID}: every ${sweepSchedule().SWEEP_EVERY_MS / 1000} s, records intents that were terminated (INTENT_TERMINATED) and cleans the worktrees of those and of timed-out ones (INTENT_SWEPT); every worker installs it too`,
        );
      } finally {
        await target.close();
      }
    });
}

/**
 * `run 1a2b3c4d #37 ActivityTaskScheduled  | 2026-… safety STAGE_STARTED [impl]: …`, or a dash
 * where the row is not tied; `on <build id>` after the event where a versioned worker ran it.
 */
export function formatHistoryTie(entry: TimelineWithHistory): string {
  const version = entry.history?.buildId ? ` on ${entry.history.buildId}` : '';
  const history = entry.history ? `run ${entry.history.runId.slice(0, 8)} #${entry.history.eventId} ${entry.history.eventType}${version}` : '-';
  const stage = entry.stage ? ` [${entry.stage}]` : '';
  return `${history.padEnd(44)} | ${entry.at.toISOString()} ${entry.kind.padEnd(8)} ${entry.type}${stage}: ${entry.summary}`;
}

export function formatTimelineEntry(entry: TimelineEntry): string {
  const stage = entry.stage ? ` [${entry.stage}]` : '';
  const usd = entry.usd !== undefined ? ` $${entry.usd}` : '';
  const severity = entry.severity && entry.severity !== 'info' ? ` (${entry.severity})` : '';
  return `${entry.at.toISOString()} ${entry.kind.padEnd(8)} ${entry.type}${stage}${severity}${usd}: ${entry.summary}`;
}

/** The closing line of `warden audit`: what the intent's agent calls cost, exactly. */
export function formatSpendTotal(timeline: readonly TimelineEntry[]): string {
  const costs = timeline.filter((entry) => entry.kind === 'cost');
  return `total spend: $${sumUsd(costs.map((entry) => entry.usd ?? '0'))} over ${costs.length} agent call${costs.length === 1 ? '' : 's'}`;
}
