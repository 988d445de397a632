import { createStageActivities, type ActivityDeps } from './stage-activities';

export type { ActivityDeps, StageInput, StageResult, TestRunResult, IntentRef } from './stage-activities';
export type { WorktreeRef } from './worktree';

/** Every activity the Warden worker registers, built from injected dependencies. */
export function createActivities(deps: ActivityDeps) {
  return { ...createStageActivities(deps) };
}

/** The activity interface workflows import (as a type only). */
export type WardenActivities = ReturnType<typeof createActivities>;
