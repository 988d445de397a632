/**
 * The refs an ending intent leaves in its repository: its lineage (when it goes into a ref) and
 * its commits kept for a resume. Both read the same refs and both move one: one read and one
 * transaction for the two, since a stop ends a hundred intents at once and each git process
 * then waits for a core.
 */
import { moveRefs, refCommits, type RefMove } from './git';
import { lineageCommit, lineageRefsRead } from './lineage-ref';
import { resumeCommit, resumeRefsRead, type ResumeRef } from './resume-ref';

export interface EndingRefs {
  /** The lineage ref, when the lineage went into one (or had gone before). */
  readonly lineageRef?: string;
  /** The resume ref and its date, when the intent was kept for a resume. */
  readonly kept?: ResumeRef;
}

/**
 * Records the lineage folder `lineageFolder` (when given) under the intent's lineage ref and
 * keeps the intent branch's head for `keepForResumeMs` from `now` (when given), as
 * recordLineageRef and keepForResume do one at a time.
 */
export async function recordEndingRefs(
  repoPath: string,
  intentId: string,
  ending: { readonly lineageFolder?: string; readonly keepForResumeMs?: number; readonly now: Date },
): Promise<EndingRefs> {
  const known = await refCommits(repoPath, [...new Set([...lineageRefsRead(intentId), ...resumeRefsRead(intentId)])]);
  const lineage = ending.lineageFolder === undefined ? {} : await lineageCommit(repoPath, intentId, ending.lineageFolder, known);
  const resume = ending.keepForResumeMs === undefined ? {} : await resumeCommit(repoPath, intentId, ending.keepForResumeMs, ending.now, known);
  const moves = [lineage.move, resume.move].filter((move): move is RefMove => move !== undefined);
  await moveRefs(repoPath, moves, `warden: the ending of ${intentId}`);
  return { ...(lineage.ref ? { lineageRef: lineage.ref } : {}), ...(resume.kept ? { kept: resume.kept } : {}) };
}
