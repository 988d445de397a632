import type { Stage } from '../shared/stages';
import { attemptCount, attemptEventType, describeAttempt, type AttemptReport } from '../shared/sandbox-attempts';
import type { IntentRun } from './run-context';

/** Attempts listed one by one at the gate; the rest are counted (the ledger has every row). */
const LISTED = 20;

/**
 * What a run of agent-written code was seen trying (an agent attempt, or the repo's tests after
 * one): one ledger row each, kept on the run for the merge gate (a person's from now on), the
 * review package and the ladder (see ladderRun).
 */
export function recordAttempts(run: IntentRun, stage: Stage, who: string, report: AttemptReport | undefined): void {
  const count = attemptCount(report);
  if (!report || count === 0) return;
  for (const attempt of report.attempts) {
    const line = `${who}: ${describeAttempt(attempt)}`;
    run.ledger.event(attemptEventType(attempt), 'high', line, {
      stage,
      suggestion: 'Look at what the agent was after before approving: its merge gate waits for a person, and its ladder level drops when the intent ends.',
      metadata: { who, ...attempt },
    });
    if (run.attemptsSeen.length < LISTED) run.attemptsSeen.push(line);
  }
  if (report.more > 0) {
    run.ledger.event('ESCAPE_ATTEMPTED', 'high', `${who}: ${report.more} more attempt(s) beyond those listed`, { stage, metadata: { who, more: report.more } });
  }
  run.attemptCount += count;
}
