import { defaultPayloadConverter } from '@temporalio/common';
import type { WorkflowInterceptorsFactory } from '@temporalio/workflow';
import type { StageInput } from '../activities';
import { LEDGER_ROWS_HEADER } from '../shared/ledger-handover';
import { currentLedgerRecorder, registerLedgerHandOver } from './ledger-recorder';
import { currentStageGuard } from './stage-guard';

/**
 * Workflow interceptors the worker registers (`interceptors.workflowModules`). Before any agent
 * stage activity is scheduled, the intent's StageGuard checks its limits: it may wait (pause,
 * cooldown) or halt the intent with a SAFETY_HALT failure. Every other stage activity (tests,
 * checks, archive, merge) waits while the intent is paused; bookkeeping (ledger writes, the final
 * cleanup) never waits. Local activities are all bookkeeping. Workflows without a guard pass through.
 *
 * Ledger rows owed before the next step (a gate's decision, see
 * LedgerRecorder.writeBeforeNextStep) ride on the next activity that starts at once, in a header
 * its worker writes first; before any other next step (a timer, a local activity, an activity
 * that may be held) they are written here, first.
 */
export const interceptors: WorkflowInterceptorsFactory = () => {
  registerLedgerHandOver();
  return {
    outbound: [
      {
        async scheduleActivity(input, next) {
          const guard = currentStageGuard();
          const ledger = currentLedgerRecorder();
          const agentCall = input.activityType === 'runAgentStage';
          if (ledger?.owesRows && (agentCall || guard?.holdsBeforeActivity(input.activityType))) await ledger.flush();
          if (guard && agentCall) await guard.beforeDispatch(input.args[0] as StageInput);
          else if (guard?.holdsBeforeActivity(input.activityType)) await guard.untilResumed();
          const rows = ledger?.handOver();
          if (!ledger || !rows) return next(input);
          const scheduled = next({ ...input, headers: { ...input.headers, [LEDGER_ROWS_HEADER]: defaultPayloadConverter.toPayload({ rows }) } });
          scheduled.then(
            () => ledger.settle(rows, true),
            () => ledger.settle(rows, false),
          );
          return scheduled;
        },
        async scheduleLocalActivity(input, next) {
          const ledger = currentLedgerRecorder();
          if (ledger?.owesRows && input.activityType !== 'appendToLedger') await ledger.flush();
          return next(input);
        },
        async startTimer(input, next) {
          const ledger = currentLedgerRecorder();
          if (ledger?.owesRows) await ledger.flush();
          return next(input);
        },
      },
    ],
  };
};
