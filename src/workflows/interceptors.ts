import type { WorkflowInterceptorsFactory } from '@temporalio/workflow';
import type { StageInput } from '../activities';
import { currentStageGuard } from './stage-guard';

/**
 * Workflow interceptors the worker registers (`interceptors.workflowModules`). Before any agent
 * stage activity is scheduled, the intent's StageGuard checks its limits: it may wait (pause,
 * cooldown) or halt the intent with a SAFETY_HALT failure. Every other stage activity (tests,
 * checks, archive, merge) waits while the intent is paused; bookkeeping (ledger writes, the final
 * cleanup) never waits. Local activities are all bookkeeping. Workflows without a guard pass through.
 */
export const interceptors: WorkflowInterceptorsFactory = () => ({
  outbound: [
    {
      async scheduleActivity(input, next) {
        const guard = currentStageGuard();
        if (guard && input.activityType === 'runAgentStage') await guard.beforeDispatch(input.args[0] as StageInput);
        else if (guard?.holdsBeforeActivity(input.activityType)) await guard.untilResumed();
        return next(input);
      },
    },
  ],
});
