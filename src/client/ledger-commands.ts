import type { Command } from 'commander';
import { Option } from 'commander';
import { ScheduleAlreadyRunning, ScheduleOverlapPolicy } from '@temporalio/client';
import { migrate } from '../ledger/migrate';
import type { CostGrouping, DailyReport, TimelineEntry } from '../ledger/types';
import type { RuntimeConfig } from '../runtime/config';
import { parseDuration } from '../shared/duration';
import { UserError } from '../shared/errors';
import { TASK_QUEUE } from '../shared/ids';
import type { maintenanceWorkflow } from '../workflows';
import { findPrompts } from './prompt-files';
import { connectTemporal, openLedger } from './session';

/** Id of the schedule that runs ledger retention and the daily report. */
export const MAINTENANCE_SCHEDULE_ID = 'warden-maintenance';

interface Io {
  readonly print: (line: string) => void;
  readonly printJson: (value: unknown) => void;
}

/** `90d` → 90; a bare number is days too. */
export function parseRetentionDays(text: string): number {
  const days = /^\d+$/.test(text) ? Number(text) : safeDuration(text, '--retention') / 86_400_000;
  if (!Number.isFinite(days) || days < 1) throw new UserError(`--retention must be at least 1 day, not ${text}`);
  return days;
}

/** `2026-11-01` or a duration back from now (`7d`, `12h`). */
export function parseSince(text: string, now: Date = new Date()): Date {
  if (/^\d{4}-\d{2}-\d{2}$/.test(text)) {
    const date = new Date(`${text}T00:00:00Z`);
    if (!Number.isNaN(date.getTime())) return date;
  }
  return new Date(now.getTime() - safeDuration(text, '--since'));
}

function safeDuration(text: string, flag: string): number {
  try {
    return parseDuration(text);
  } catch {
    throw new UserError(`${flag} takes a date (YYYY-MM-DD) or a duration such as 7d, not ${text}`);
  }
}

function checkDate(text: string | undefined): string {
  const date = text ?? new Date().toISOString().slice(0, 10);
  if (!/^\d{4}-\d{2}-\d{2}$/.test(date) || Number.isNaN(new Date(`${date}T00:00:00Z`).getTime())) {
    throw new UserError(`--date takes YYYY-MM-DD, not ${date}`);
  }
  return date;
}

function checkUsd(text: string | undefined, flag: string): string | undefined {
  if (text === undefined) return undefined;
  if (!/^\d{1,8}(\.\d{1,6})?$/.test(text)) throw new UserError(`${flag} takes a USD amount such as 25 or 12.50, not ${text}`);
  return text;
}

/** Adds the ledger's commands: audit, costs, report, db migrate, db cleanup, schedules install. */
export function addLedgerCommands(program: Command, config: RuntimeConfig, io: Io): void {
  const withLedger = async <T>(fn: (ledger: Awaited<ReturnType<typeof openLedger>>['ledger']) => Promise<T>): Promise<T> => {
    const { ledger, database } = await openLedger(config, () => undefined);
    try {
      return await fn(ledger);
    } finally {
      await database.close();
    }
  };

  program
    .command('audit <id>')
    .description("An intent's timeline from the ledger: stages, gates, decisions, safety events and spend, in order")
    .option('--json', 'print JSON')
    .option('--prompts', 'print the exact prompt of every attempt instead (from the intent\'s lineage)')
    .action(async (id: string, flags: { json?: boolean; prompts?: boolean }) => {
      if (flags.prompts) {
        const repoPath = await withLedger((ledger) => ledger.intentRepoPath(id));
        if (!repoPath) throw new UserError(`the ledger has nothing for intent ${id}`);
        const { dir, prompts } = findPrompts(id, repoPath, config);
        if (flags.json) return io.printJson(prompts.map((p) => ({ name: p.name, path: p.path, prompt: p.content })));
        if (prompts.length === 0) throw new UserError(`no prompts of intent ${id} were found (looked in its worktree, ${repoPath}'s docs/lineage and ${config.lineageRoot})`);
        io.print(`prompts of ${id}, from ${dir}:`);
        for (const p of prompts) io.print(`\n===== ${p.name} =====\n${p.content.trimEnd()}`);
        return;
      }
      const timeline = await withLedger((ledger) => ledger.timeline(id));
      if (flags.json) return io.printJson(timeline);
      if (timeline.length === 0) throw new UserError(`the ledger has nothing for intent ${id}`);
      for (const entry of timeline) io.print(formatTimelineEntry(entry));
    });

  program
    .command('costs')
    .description('Spend from the ledger, grouped, with exact totals')
    .option('--since <when>', 'from this date (YYYY-MM-DD) or this long ago (7d)')
    .addOption(new Option('--by <grouping>', 'group by').choices(['intent', 'stage', 'model', 'agent', 'day']).default('intent'))
    .option('--json', 'print JSON')
    .action(async (flags: { since?: string; by: CostGrouping; json?: boolean }) => {
      const since = flags.since ? parseSince(flags.since) : undefined;
      const result = await withLedger((ledger) => ledger.costs({ since, by: flags.by }));
      if (flags.json) return io.printJson(result);
      io.print(`${flags.by.padEnd(40)} ${'usd'.padStart(12)} ${'calls'.padStart(6)} ${'in tok'.padStart(9)} ${'out tok'.padStart(9)}`);
      for (const row of result.rows) {
        io.print(`${row.key.padEnd(40)} ${row.usd.padStart(12)} ${String(row.calls).padStart(6)} ${String(row.inputTokens).padStart(9)} ${String(row.outputTokens).padStart(9)}`);
      }
      io.print(`${'total'.padEnd(40)} ${result.totalUsd.padStart(12)}`);
    });

  program
    .command('report')
    .description('The daily health report: each safety layer, and GREEN / YELLOW / RED with the rule that decided it')
    .option('--date <date>', 'YYYY-MM-DD (default: today, UTC)')
    .option('--budget <usd>', "the day's budget to compare spend with")
    .option('--json', 'print JSON')
    .action(async (flags: { date?: string; budget?: string; json?: boolean }) => {
      const date = checkDate(flags.date);
      const dayBudgetUsd = checkUsd(flags.budget, '--budget');
      const report = await withLedger((ledger) => ledger.dailyReport({ date, dayBudgetUsd }));
      if (flags.json) return io.printJson(report);
      for (const line of formatReport(report)) io.print(line);
    });

  const db = program.command('db').description('The ledger database');
  db.command('migrate')
    .description('Apply pending migrations (workers also do this at start)')
    .option('--json', 'print JSON')
    .action(async (flags: { json?: boolean }) => {
      const { database } = await openLedger(config, () => undefined);
      try {
        const applied = await migrate(database.pool);
        if (flags.json) return io.printJson({ database: database.url, applied });
        io.print(applied.length ? `applied ${applied.join(', ')}` : 'the ledger schema is up to date');
      } finally {
        await database.close();
      }
    });
  db.command('cleanup')
    .description('Delete ledger rows older than the retention period (the only delete path)')
    .requiredOption('--retention <age>', 'keep this much, e.g. 90d')
    .option('--json', 'print JSON')
    .action(async (flags: { retention: string; json?: boolean }) => {
      const days = parseRetentionDays(flags.retention);
      const deleted = await withLedger((ledger) => ledger.cleanup(days));
      if (flags.json) return io.printJson({ retentionDays: days, deleted });
      io.print(`deleted rows older than ${days} days: ${Object.entries(deleted).map(([t, n]) => `${t} ${n}`).join(', ')}`);
    });

  const schedules = program.command('schedules').description('Temporal Schedules Warden relies on');
  schedules
    .command('install')
    .description('Create or update the daily schedule that runs ledger cleanup and the health report')
    .option('--retention <age>', 'ledger retention', '90d')
    .option('--at <HH:MM>', 'time of day (UTC)', '03:00')
    .option('--budget <usd>', "the day's budget the report compares spend with")
    .option('--json', 'print JSON')
    .action(async (flags: { retention: string; at: string; budget?: string; json?: boolean }) => {
      const retentionDays = parseRetentionDays(flags.retention);
      const at = /^(\d{1,2}):(\d{2})$/.exec(flags.at);
      if (!at || Number(at[1]) > 23 || Number(at[2]) > 59) throw new UserError(`--at takes HH:MM (UTC), not ${flags.at}`);
      const dayBudgetUsd = checkUsd(flags.budget, '--budget');
      const target = await connectTemporal(config, () => undefined);
      try {
        const action = {
          type: 'startWorkflow' as const,
          workflowType: 'maintenanceWorkflow' as unknown as typeof maintenanceWorkflow,
          taskQueue: TASK_QUEUE,
          args: [{ retentionDays, dayBudgetUsd }] as [Parameters<typeof maintenanceWorkflow>[0]],
        };
        const spec = { calendars: [{ hour: Number(at[1]), minute: Number(at[2]), comment: 'daily ledger upkeep' }] };
        let created = true;
        try {
          await target.client.schedule.create({ scheduleId: MAINTENANCE_SCHEDULE_ID, spec, action, policies: { overlap: ScheduleOverlapPolicy.SKIP } });
        } catch (error) {
          if (!(error instanceof ScheduleAlreadyRunning)) throw error;
          created = false;
          await target.client.schedule.getHandle(MAINTENANCE_SCHEDULE_ID).update((previous) => ({ ...previous, spec, action }));
        }
        const summary = { scheduleId: MAINTENANCE_SCHEDULE_ID, created, at: flags.at, retentionDays, dayBudgetUsd };
        if (flags.json) return io.printJson(summary);
        io.print(`${created ? 'created' : 'updated'} schedule ${MAINTENANCE_SCHEDULE_ID}: daily at ${flags.at} UTC, retention ${retentionDays} days`);
      } finally {
        await target.close();
      }
    });
}

export function formatTimelineEntry(entry: TimelineEntry): string {
  const stage = entry.stage ? ` [${entry.stage}]` : '';
  const usd = entry.usd !== undefined ? ` $${entry.usd}` : '';
  const severity = entry.severity && entry.severity !== 'info' ? ` (${entry.severity})` : '';
  return `${entry.at.toISOString()} ${entry.kind.padEnd(6)} ${entry.type}${stage}${severity}${usd}: ${entry.summary}`;
}

export function formatReport(report: DailyReport): string[] {
  const { limits, thresholds, history, humanOverride, anomalies } = report.layers;
  const budget = limits.budgetUsd
    ? `$${limits.budgetUsd}, remaining $${limits.remainingUsd} (${limits.remainingPct}%)`
    : 'no daily budget given';
  return [
    `## Safety Net Daily Report - ${report.date}`,
    '',
    '### Layer 1: Cooldowns & Limits',
    `- Total iterations today: ${limits.iterations}`,
    `- API cost today: $${limits.spendUsd}`,
    `- Budget: ${budget}`,
    '',
    '### Layer 2: Threshold Scores',
    `- Actions auto-executed: ${thresholds.autoExecuted}`,
    `- Actions escalated: ${thresholds.escalated}`,
    '',
    '### Layer 3: Version History',
    `- Commits today: ${history.commits}`,
    `- Rollbacks today: ${history.rollbacks}`,
    '',
    '### Layer 4: Human Override',
    `- Emergency stops: ${humanOverride.emergencyStops}`,
    `- Manual interventions: ${humanOverride.manualInterventions}`,
    `- Decision queue items: ${humanOverride.decisionQueue}`,
    '',
    '### Layer 5: Anomaly Detection',
    `- Anomalies detected: ${anomalies.total}`,
    `- Severity breakdown: CRITICAL(${anomalies.bySeverity.critical}) HIGH(${anomalies.bySeverity.high}) MEDIUM(${anomalies.bySeverity.medium}) LOW(${anomalies.bySeverity.low})`,
    `- Patterns observed: ${anomalies.patterns.length ? anomalies.patterns.join(', ') : 'none'}`,
    '',
    `### Overall Health: ${report.health}`,
    `(${report.rule})`,
  ];
}
