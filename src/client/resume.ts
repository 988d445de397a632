import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import type { Client } from '@temporalio/client';
import type { Command } from 'commander';
import type LongModule from 'long';
import type { AuditStore } from '../ledger/audit-store';
import type { RuntimeConfig } from '../runtime/config';
import { branchForIntent, resumeRefFor } from '../shared/ids';
import { UserError } from '../shared/errors';
import { STAGES, isStage, type Stage } from '../shared/stages';
import type * as CommonModule from '@temporalio/common';
import type * as ProtoModule from '@temporalio/proto';
import type * as GitModule from '../activities/git';
import type * as ResumeRefModule from '../activities/resume-ref';
import type * as EventIdModule from '../ledger/event-id';
import type * as IntentsModule from './intents';
import type * as OpenLedgerModule from './open-ledger';
import type * as SessionModule from './session';

/* eslint-disable @typescript-eslint/no-require-imports -- loaded when a command runs (see cli.ts) */
const common = () => require('@temporalio/common') as typeof CommonModule;
const proto = () => require('@temporalio/proto') as typeof ProtoModule;
const git = () => require('../activities/git') as typeof GitModule;
const resumeRef = () => require('../activities/resume-ref') as typeof ResumeRefModule;
const eventId = () => require('../ledger/event-id') as typeof EventIdModule;
const intents = () => require('./intents') as typeof IntentsModule;
const openLedgerModule = () => require('./open-ledger') as typeof OpenLedgerModule;
const session = () => require('./session') as typeof SessionModule;
const long = () => require('long') as typeof LongModule;
/* eslint-enable @typescript-eslint/no-require-imports */

type HistoryEvent = ProtoModule.temporal.api.history.v1.IHistoryEvent;

/** Where a reset goes: the workflow task that scheduled the first activity of `stage`. */
export interface ResetPoint {
  readonly stage: Stage;
  readonly workflowTaskCompletedEventId: number;
  /** The intent's repository and the commit the stage started from, as that activity's input says (none for merge). */
  readonly repoPath?: string;
  readonly startCommit?: string;
}

/** What a reset undoes: the stage activities and the signals (gate decisions) after its point. */
export interface ResetUndoes {
  /** The stage of each stage activity after the point, in order (an attempt each). */
  readonly stages: readonly Stage[];
  /** Signals after the point, by name, with the gate decisions' gate and decision. */
  readonly signals: readonly string[];
}

/** The stage an activity-scheduled event belongs to, if it is a stage activity. */
function stageOf(event: HistoryEvent): Stage | undefined {
  const attributes = event.activityTaskScheduledEventAttributes;
  const type = attributes?.activityType?.name;
  if (type === 'mergeIntent' || type === 'archiveLineage') return 'merge';
  if (type !== 'runAgentStage') return undefined;
  const payload = attributes?.input?.payloads?.[0];
  if (!payload) return undefined;
  const input = common().defaultPayloadConverter.fromPayload<{ stage?: string }>(payload);
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
  const attributes = first.event.activityTaskScheduledEventAttributes!;
  const payload = attributes.input?.payloads?.[0];
  const input = payload ? common().defaultPayloadConverter.fromPayload<{ intent?: { repoPath?: string }; startCommit?: string }>(payload) : {};
  return {
    stage: target,
    workflowTaskCompletedEventId: Number(attributes.workflowTaskCompletedEventId),
    ...(input.intent?.repoPath ? { repoPath: input.intent.repoPath } : {}),
    ...(input.startCommit ? { startCommit: input.startCommit } : {}),
  };
}

/** The stage activities and signals a reset to `point` drops from the intent's history. Pure over the events. */
export function undoneByReset(events: readonly HistoryEvent[], point: ResetPoint): ResetUndoes {
  const after = events.filter((event) => Number(event.eventId) > point.workflowTaskCompletedEventId);
  const stages = after.map(stageOf).filter((stage): stage is Stage => stage !== undefined);
  const signals = after
    .map((event) => event.workflowExecutionSignaledEventAttributes)
    .filter((attributes): attributes is NonNullable<typeof attributes> => Boolean(attributes))
    .map((attributes) => {
      const payload = attributes.input?.payloads?.[0];
      const body = payload ? common().defaultPayloadConverter.fromPayload<{ gate?: string; decision?: string; by?: string }>(payload) : undefined;
      return body?.gate && body.decision ? `${attributes.signalName}: ${body.decision} at ${body.gate}${body.by ? ` by ${body.by}` : ''}` : (attributes.signalName ?? 'signal');
    });
  return { stages, signals };
}

/**
 * Refuses a reset whose stage would start from commits Warden no longer keeps: the intent's
 * branch is gone or moved and its resume ref was dropped after the retention. Checked where the
 * repository is at hand (the worker checks again as the stage starts).
 */
async function refuseLostCommits(intentId: string, point: ResetPoint): Promise<void> {
  const { repoPath, startCommit } = point;
  if (!repoPath || !startCommit || !existsSync(repoPath)) return;
  if (await resumeRef().resumableFrom(repoPath, intentId, startCommit)) return;
  throw new UserError(
    `intent ${intentId} cannot resume from ${point.stage}: the commit it started from (${startCommit.slice(0, 12)}) is no longer kept ` +
      `(its branch is gone or moved, and ${resumeRefFor(intentId)} was dropped after its retention, lineage.keepForResume); start a new intent instead`,
  );
}

export interface ResumeOptions {
  readonly stage?: string;
  readonly reason: string;
  readonly reapplySignals: boolean;
  readonly force: boolean;
  /** Who asks (kept in the ledger row). */
  readonly by: string;
  /** Where the INTENT_RESUMED row goes: the reset and what it undid. */
  readonly ledger: { readonly audit: Pick<AuditStore, 'recordSafetyEvent'> };
}

/**
 * `warden resume`: resets the intent's workflow to the workflow task just before its first
 * activity of the stage, so earlier stages are not run again (their results come from history)
 * and the stage and everything after run anew. Signals after the point are dropped unless
 * asked for, so gate decisions made after it must be made again. Returns the new run id.
 */
export async function resumeIntent(client: Client, namespace: string, intentId: string, options: ResumeOptions): Promise<{ runId: string; stage: Stage }> {
  const handle = intents().intentHandle(client, intentId);
  const description = await intents().describeOrExplain(handle, intentId);
  if (description.status.name === 'RUNNING' && !options.force) {
    throw new UserError(`intent ${intentId} is still running; stop it first, or pass --force to reset it while it runs`);
  }
  const history = await handle.fetchHistory();
  const events = history.events ?? [];
  const point = findResetPoint(events, options.stage);
  await refuseLostCommits(intentId, point);
  const undone = undoneByReset(events, point);
  const commitsBack = point.repoPath && point.startCommit ? await commitsAfter(point.repoPath, intentId, point.startCommit) : undefined;
  const { ResetReapplyType, ResetReapplyExcludeType } = proto().temporal.api.enums.v1;
  const response: ProtoModule.temporal.api.workflowservice.v1.IResetWorkflowExecutionResponse = await client.workflowService.resetWorkflowExecution({
    namespace,
    workflowExecution: { workflowId: description.workflowId, runId: description.runId },
    reason: options.reason,
    workflowTaskFinishEventId: long().fromNumber(point.workflowTaskCompletedEventId),
    requestId: randomUUID(),
    resetReapplyType: options.reapplySignals ? ResetReapplyType.RESET_REAPPLY_TYPE_SIGNAL : ResetReapplyType.RESET_REAPPLY_TYPE_NONE,
    resetReapplyExcludeTypes: options.reapplySignals ? [] : [ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL],
  });
  const runId = response.runId ?? '';
  const ended = description.status.name.toLowerCase().replace(/_/g, ' ');
  const attempts = undone.stages.length ? `${undone.stages.length} stage attempt(s) (${undone.stages.join(', ')})` : 'no stage attempt';
  const decisions = options.reapplySignals || undone.signals.length === 0 ? '' : `; ${undone.signals.length} signal(s) dropped (${undone.signals.join('; ')})`;
  const commits = commitsBack ? `; the branch goes back from ${commitsBack.tip.slice(0, 12)} to ${point.startCommit!.slice(0, 12)} (${commitsBack.count} commit(s) of the ${ended} run)` : '';
  await options.ledger.audit.recordSafetyEvent({
    id: eventId().deterministicUuid('INTENT_RESUMED', description.workflowId, runId),
    timestamp: new Date(),
    eventType: 'INTENT_RESUMED',
    severity: 'medium',
    intentId,
    reason: `resumed from ${point.stage} by ${options.by} (${options.reason}): the ${ended} run ${description.runId} was reset, undoing ${attempts}${decisions}${commits}`,
    metadata: {
      by: options.by,
      stage: point.stage,
      fromRunId: description.runId,
      toRunId: runId,
      endedAs: description.status.name,
      undoneStages: undone.stages,
      droppedSignals: options.reapplySignals ? [] : undone.signals,
      ...(point.startCommit ? { startCommit: point.startCommit } : {}),
      ...(commitsBack ? { branchTip: commitsBack.tip, commitsUndone: commitsBack.count } : {}),
    },
  });
  return { runId, stage: point.stage };
}

/** The tip the intent's commits end at (its branch, else its resume ref's) and how many commits lie after `start`. */
async function commitsAfter(repoPath: string, intentId: string, start: string): Promise<{ tip: string; count: number } | undefined> {
  if (!existsSync(repoPath)) return undefined;
  const kept = await resumeRef().readResumeRef(repoPath, intentId);
  for (const tip of [`refs/heads/${branchForIntent(intentId)}`, ...(kept ? [`${kept.ref}^1`] : [])]) {
    if ((await git().gitRaw(repoPath, ['merge-base', '--is-ancestor', start, tip])).code !== 0) continue;
    const commit = (await git().gitRaw(repoPath, ['rev-parse', tip])).stdout.trim();
    const count = Number((await git().gitRaw(repoPath, ['rev-list', '--count', `${start}..${tip}`])).stdout.trim());
    return { tip: commit, count };
  }
  return undefined;
}

/** Adds `warden resume ID [--from STAGE]`. */
export function addResumeCommand(program: Command, config: RuntimeConfig, io: { readonly print: (line: string) => void; readonly defaultUser: () => string }): void {
  program
    .command('resume <id>')
    .description('Run an intent again from a stage (default: the stage that failed); earlier stages are not run again')
    .option('--from <stage>', `stage to run again: ${STAGES.join(', ')}`)
    .option('--reason <text>', 'why (kept with the reset)', 'resumed from the CLI')
    .option('--by <name>', "who resumes it (default: the config's operator, else $USER)")
    .option('--reapply-signals', 'also re-deliver signals sent after that point (gate decisions included)')
    .option('--force', 'reset even though the intent is still running')
    .action(async (id: string, flags: ResumeFlags) => {
      io.print(await resumeFromCli(config, id, { ...flags, by: flags.by ?? io.defaultUser() }));
    });
}

interface ResumeFlags {
  readonly from?: string;
  readonly reason?: string;
  readonly by?: string;
  readonly reapplySignals?: boolean;
  readonly force?: boolean;
}

/** Shared by `warden resume` and `warden run --id ID --resume-from STAGE`. */
export async function resumeFromCli(config: RuntimeConfig, id: string, flags: ResumeFlags & { readonly by: string }): Promise<string> {
  // A bad stage is the user's to fix, whatever state the server is in: say so before connecting.
  refuseUnknownStage(flags.from);
  const { ledger, database } = await openLedgerModule().openLedger(config, () => undefined);
  try {
    const target = await session().connectTemporal(config, () => undefined);
    try {
      const { runId, stage } = await resumeIntent(target.client, target.namespace, id, {
        stage: flags.from,
        reason: flags.reason ?? 'resumed from the CLI',
        reapplySignals: Boolean(flags.reapplySignals),
        force: Boolean(flags.force),
        by: flags.by,
        ledger,
      });
      return `intent ${id} resumes from ${stage} (run ${runId}); a worker must be running (warden worker or warden dev)`;
    } finally {
      await target.close();
    }
  } finally {
    await database.close();
  }
}

function refuseUnknownStage(stage: string | undefined): asserts stage is Stage | undefined {
  if (stage !== undefined && !isStage(stage)) throw new UserError(`unknown stage "${stage}": the stages are ${STAGES.join(', ')}`);
}
