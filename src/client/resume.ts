import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import type { Command } from 'commander';
import Long from 'long';
import type { RuntimeConfig } from '../runtime/config';
import { UserError } from '../shared/errors';
import { STAGES, isStage, type Stage } from '../shared/stages';
import { describeOrExplain, intentHandle } from './intents';
import { connectTemporal } from './session';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

/** Where a reset goes: the workflow task that scheduled the first activity of `stage`. */
export interface ResetPoint {
  readonly stage: Stage;
  readonly workflowTaskCompletedEventId: number;
}

/** The stage an activity-scheduled event belongs to, if it is a stage activity. */
function stageOf(event: HistoryEvent): Stage | undefined {
  const attributes = event.activityTaskScheduledEventAttributes;
  const type = attributes?.activityType?.name;
  if (type === 'mergeIntent' || type === 'archiveLineage') return 'merge';
  if (type !== 'runAgentStage') return undefined;
  const payload = attributes?.input?.payloads?.[0];
  if (!payload) return undefined;
  const input = defaultPayloadConverter.fromPayload<{ stage?: string }>(payload);
  return input.stage && isStage(input.stage) ? input.stage : undefined;
}

/**
 * Finds the reset point in an intent's history: just before the first activity of `stage`, or,
 * with no stage, of the last stage that ran (the one that failed). Pure over the events.
 */
export function findResetPoint(events: readonly HistoryEvent[], stage?: string): ResetPoint {
  refuseUnknownStage(stage);
  const scheduled = events
    .map((event) => ({ event, stage: stageOf(event) }))
    .filter((e): e is { event: HistoryEvent; stage: Stage } => e.stage !== undefined);
  const target = stage ?? scheduled.at(-1)?.stage;
  if (!target) throw new UserError('the intent has not started a stage yet: nothing to resume from');
  const first = scheduled.find((e) => e.stage === target);
  if (!first) throw new UserError(`the intent has not reached stage ${target} yet: resume from a stage it ran`);
  return { stage: target, workflowTaskCompletedEventId: Number(first.event.activityTaskScheduledEventAttributes!.workflowTaskCompletedEventId) };
}

export interface ResumeOptions {
  readonly stage?: string;
  readonly reason: string;
  readonly reapplySignals: boolean;
  readonly force: boolean;
}

/**
 * `warden resume`: resets the intent's workflow to the workflow task just before its first
 * activity of the stage, so earlier stages are not run again (their results come from history)
 * and the stage and everything after run anew. Signals after the point are dropped unless
 * asked for, so gate decisions made after it must be made again. Returns the new run id.
 */
export async function resumeIntent(client: Client, namespace: string, intentId: string, options: ResumeOptions): Promise<{ runId: string; stage: Stage }> {
  const handle = intentHandle(client, intentId);
  const description = await describeOrExplain(handle, intentId);
  if (description.status.name === 'RUNNING' && !options.force) {
    throw new UserError(`intent ${intentId} is still running; stop it first, or pass --force to reset it while it runs`);
  }
  const history = await handle.fetchHistory();
  const point = findResetPoint(history.events ?? [], options.stage);
  const { ResetReapplyType, ResetReapplyExcludeType } = temporal.api.enums.v1;
  const response: temporal.api.workflowservice.v1.IResetWorkflowExecutionResponse = await client.workflowService.resetWorkflowExecution({
    namespace,
    workflowExecution: { workflowId: description.workflowId, runId: description.runId },
    reason: options.reason,
    workflowTaskFinishEventId: Long.fromNumber(point.workflowTaskCompletedEventId),
    requestId: randomUUID(),
    resetReapplyType: options.reapplySignals ? ResetReapplyType.RESET_REAPPLY_TYPE_SIGNAL : ResetReapplyType.RESET_REAPPLY_TYPE_NONE,
    resetReapplyExcludeTypes: options.reapplySignals ? [] : [ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL],
  });
  return { runId: response.runId ?? '', stage: point.stage };
}

/** Adds `warden resume ID [--from STAGE]`. */
export function addResumeCommand(program: Command, config: RuntimeConfig, print: (line: string) => void): void {
  program
    .command('resume <id>')
    .description('Run an intent again from a stage (default: the stage that failed); earlier stages are not run again')
    .option('--from <stage>', `stage to run again: ${STAGES.join(', ')}`)
    .option('--reason <text>', 'why (kept with the reset)', 'resumed from the CLI')
    .option('--reapply-signals', 'also re-deliver signals sent after that point (gate decisions included)')
    .option('--force', 'reset even though the intent is still running')
    .action(async (id: string, flags: { from?: string; reason: string; reapplySignals?: boolean; force?: boolean }) => {
      print(await resumeFromCli(config, id, flags));
    });
}

/** Shared by `warden resume` and `warden run --id ID --resume-from STAGE`. */
export async function resumeFromCli(
  config: RuntimeConfig,
  id: string,
  flags: { from?: string; reason?: string; reapplySignals?: boolean; force?: boolean },
): Promise<string> {
  // A bad stage is the user's to fix, whatever state the server is in: say so before connecting.
  refuseUnknownStage(flags.from);
  const target = await connectTemporal(config, () => undefined);
  try {
    const { runId, stage } = await resumeIntent(target.client, target.namespace, id, {
      stage: flags.from,
      reason: flags.reason ?? 'resumed from the CLI',
      reapplySignals: Boolean(flags.reapplySignals),
      force: Boolean(flags.force),
    });
    return `intent ${id} resumes from ${stage} (run ${runId}); a worker must be running (warden worker or warden dev)`;
  } finally {
    await target.close();
  }
}

function refuseUnknownStage(stage: string | undefined): asserts stage is Stage | undefined {
  if (stage !== undefined && !isStage(stage)) throw new UserError(`unknown stage "${stage}": the stages are ${STAGES.join(', ')}`);
}
