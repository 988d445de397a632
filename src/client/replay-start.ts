/**
 * `warden replay ID --from STAGE`: where such a replay starts. The stages before STAGE are the
 * original's and do not run again: the replay's branch starts at the commit STAGE started from
 * in the original (its documents and changes), and triage's assessment is the original's. Read
 * from the original's workflow history, as `warden resume` reads its reset point.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { defaultPayloadConverter } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import type { TriageAssessment } from '../shared/assessments';
import { UserError } from '../shared/errors';
import { activeLineageDir, branchForIntent } from '../shared/ids';
import { REPLAY_FROM_STAGES } from '../shared/intent';
import { findResetPoint } from './resume';
import { WARDEN_GIT_IDENTITY } from '../activities/git';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
type FromStage = (typeof REPLAY_FROM_STAGES)[number];

const run = promisify(execFile);

/** Where a replay from a stage starts, taken from the original's history. */
export interface ReplayStart {
  readonly stage: FromStage;
  /** The commit the original's first attempt of `stage` started from. */
  readonly commit: string;
  readonly triage: TriageAssessment;
}

/**
 * The stage a replay starts from, checked: undefined for the whole replay (no `--from`, or
 * `--from triage`); a UserError for a stage a replay cannot start from.
 */
export function replayFromStage(stage: string | undefined): FromStage | undefined {
  if (stage === undefined || stage === 'triage') return undefined;
  if ((REPLAY_FROM_STAGES as readonly string[]).includes(stage)) return stage as FromStage;
  throw new UserError(`--from takes one of ${REPLAY_FROM_STAGES.join(', ')} (from triage is the whole replay; merge asks no model), not "${stage}"`);
}

/** Where a replay of the intent whose history is `events` starts when it starts from `stage`. Pure over the events. */
export function replayStartOf(intentId: string, events: readonly HistoryEvent[], stage: FromStage): ReplayStart {
  const point = findResetPoint(events, stage);
  if (!point.startCommit) throw new UserError(`intent ${intentId}'s history does not say which commit its ${stage} stage started from: replay it whole`, 1);
  const triage = triageOf(events);
  if (!triage) throw new UserError(`intent ${intentId}'s history holds no triage assessment to start a replay after triage from`, 1);
  return { stage, commit: point.startCommit, triage };
}

/** The assessment of the original's last completed triage attempt. */
function triageOf(events: readonly HistoryEvent[]): TriageAssessment | undefined {
  const triageScheduled = new Set<string>();
  let triage: TriageAssessment | undefined;
  for (const event of events) {
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled?.activityType?.name === 'runAgentStage') {
      const payload = scheduled.input?.payloads?.[0];
      const input = payload ? defaultPayloadConverter.fromPayload<{ stage?: string; designReview?: boolean }>(payload) : {};
      if (input.stage === 'triage' && !input.designReview) triageScheduled.add(String(event.eventId));
    }
    const completed = event.activityTaskCompletedEventAttributes;
    if (completed && triageScheduled.has(String(completed.scheduledEventId))) {
      const payload = completed.result?.payloads?.[0];
      const result = payload ? defaultPayloadConverter.fromPayload<{ triage?: TriageAssessment }>(payload) : undefined;
      if (result?.triage) triage = result.triage;
    }
  }
  return triage;
}

/**
 * In the replay's scratch clone, the replay's branch at the commit the original's stage started
 * from, with the original's lineage folder named for the replay, so the replay's stages read the
 * documents before them where they look for their own. Leaves the clone's checkout as it was.
 * The clone is the replay's own: the original's commits are not changed anywhere else.
 */
export async function branchReplayStart(scratch: string, start: ReplayStart, originalId: string, replayId: string): Promise<void> {
  const known = await run('git', ['-C', scratch, 'cat-file', '-e', `${start.commit}^{commit}`]).then(() => true, () => false);
  if (!known) throw new UserError(`the commit intent ${originalId}'s ${start.stage} stage started from (${start.commit.slice(0, 12)}) is no longer in its repository: replay it whole`, 1);
  const back = (await run('git', ['-C', scratch, 'symbolic-ref', '--short', 'HEAD'])).stdout.trim();
  await run('git', ['-C', scratch, 'checkout', '--quiet', '-b', branchForIntent(replayId), start.commit]);
  const from = activeLineageDir(originalId);
  const listed = (await run('git', ['-C', scratch, 'ls-files', '--', from])).stdout.trim();
  if (listed) {
    await run('git', ['-C', scratch, 'mv', from, activeLineageDir(replayId)]);
    // Into the commit it started from, message and author kept: the agents see the branch's log
    // as the original's agents saw it (its commit ids are masked in the match, its words are not).
    await run('git', ['-C', scratch, ...WARDEN_GIT_IDENTITY, 'commit', '--quiet', '--no-verify', '--amend', '--no-edit']);
  }
  await run('git', ['-C', scratch, 'checkout', '--quiet', back]);
}
