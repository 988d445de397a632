import type { TestRunResult } from '../activities';
import { checkCompleteness, type TestOutcome } from '../safety/limits';
import { parseDuration } from '../shared/duration';
import type { AgentStage } from '../shared/stages';
import { haltFailure, timeLimitHalt } from './halts';
import type { IntentRun } from './run-context';
import { withTimeLimit } from './time-limits';

/**
 * The limits the workflow enforces itself, beside the stage guard's checks before each dispatch:
 * working time per stage and for the whole intent (workflow timers that stop while a person is
 * asked), the completeness gate's cap, and the test results the two-strike rule judges.
 */

/** Runs a stage's whole work (every attempt, retry and test run) under its time limit, `limits.stageTimeLimits`. */
export function withinStageLimit<T>(run: IntentRun, stage: AgentStage, body: () => Promise<T>): Promise<T> {
  const limitMs = parseDuration(run.intent.limits.stageTimeLimits[stage]);
  return withTimeLimit(run.clock, limitMs, () => timeLimitHalt(`stage ${stage}`, limitMs, `limits.stageTimeLimits.${stage}`), body);
}

/**
 * Runs the whole pipeline under the intent's total time limit, `limits.totalTimeout`: when it
 * runs out, the pipeline is cancelled and the intent halts with TIME_LIMIT_EXCEEDED, whatever the
 * pipeline was doing (waiting at a gate does not count, so a rejection there was not the cause).
 */
export function withinTotalLimit<T>(run: IntentRun, body: () => Promise<T>): Promise<T> {
  const totalMs = parseDuration(run.intent.limits.totalTimeout);
  return withTimeLimit(run.clock, totalMs, () => timeLimitHalt('the intent', totalMs, 'limits.totalTimeout'), body);
}

/** A test run as the two-strike rule judges it; counts the runner did not print stay unknown. */
export function testOutcome(tests: TestRunResult): TestOutcome {
  return { passed: tests.passedCount, failed: tests.failedCount, failingTests: tests.failingTests, green: tests.passed };
}

/** Halts the intent (MAX_ITERATIONS_EXCEEDED) once the completeness gate has refused `refusals` times, its cap. */
export function enforceCompletenessCap(refusals: number, cap: number): void {
  const completeness = checkCompleteness(refusals, cap);
  if (completeness.verdict === 'trip') throw haltFailure('MAX_ITERATIONS_EXCEEDED', completeness);
}
