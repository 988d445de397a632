import type { DailyReport } from './types';

/**
 * The daily report as Markdown, a section per safety layer. `today` (YYYY-MM-DD, UTC) says
 * whether the report is about today: its lines then say "today", otherwise "that day".
 */
export function formatReport(report: DailyReport, today: string = new Date().toISOString().slice(0, 10)): string[] {
  const { limits, thresholds, history, humanOverride, anomalies } = report.layers;
  const when = report.date === today ? 'today' : 'that day';
  const budget = limits.unlimited
    ? 'unlimited (a day budget of 0 sets no limit)'
    : limits.budgetUsd !== undefined
      ? `$${limits.remainingUsd} (${limits.remainingPct}%) of $${limits.budgetUsd}`
      : 'no day budget given';
  const confidence =
    thresholds.averageConfidencePct === null
      ? 'n/a (no triage assessment)'
      : `${thresholds.averageConfidencePct.toFixed(1)}% (${thresholds.assessments} triage assessment${thresholds.assessments === 1 ? '' : 's'})`;
  const { snapshots } = history;
  const snapshotLine =
    snapshots.status === 'MISSING'
      ? `MISSING (no lineage kept for ${snapshots.missing.join(', ')})`
      : snapshots.ended === 0
        ? 'OK (no intent ended)'
        : `OK (lineage kept for ${snapshots.kept} of ${snapshots.ended} intents that ended${snapshots.kept < snapshots.ended ? '; the others ended before any stage finished' : ''})`;
  return [
    `## Safety Net Daily Report - ${report.date}`,
    '',
    '### Layer 1: Cooldowns & Limits',
    `- Total iterations ${when}: ${limits.iterations}`,
    `- API cost ${when}: $${limits.spendUsd}`,
    `- Budget remaining: ${budget}`,
    '',
    '### Layer 2: Threshold Scores',
    `- Actions auto-executed: ${thresholds.autoExecuted}`,
    `- Actions escalated: ${thresholds.escalated} (gate timeouts: ${thresholds.timedOut})`,
    `- Average confidence: ${confidence}`,
    '',
    '### Layer 3: Version History',
    `- Commits ${when}: ${history.commits}`,
    `- Rollbacks ${when}: ${history.rollbacks}`,
    `- State snapshots: ${snapshotLine}`,
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
