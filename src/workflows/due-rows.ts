import type { StageInput } from '../activities';
import { CARRIED_ROWS_FIELD } from '../shared/carried-rows';
import type { IntentActivities } from './intent-activities';
import type { LedgerRecorder } from './ledger-recorder';
import { currentStageGuard } from './stage-guard';

/** The kinds of activity that run on a worker's task queue and so may carry rows ahead of themselves. */
const CARRIERS: ReadonlySet<keyof IntentActivities> = new Set(['git', 'agents', 'tests', 'forge']);

/**
 * An intent's activities, each call made only once the ledger rows due are on their way
 * (`LedgerRecorder.writeBeforeWaiting`): rows recorded after an agent call go with the next
 * ledger write of the same workflow task when there is one, and never wait behind an activity.
 * An activity on the task queue carries them in its first argument, and its worker writes them
 * before anything else (`sendAhead`): no local activity, no second look at the workflow. Rows go
 * through a ledger write of their own first where the call would wait before it is dispatched
 * (a pause, an agent call's cooldown): a reader of the ledger must not wait on that. Local
 * activities (the cleanup) take them through a write, and the ledger writes pass straight through.
 */
export function dueRowsFirst(activities: IntentActivities, ledger: () => LedgerRecorder): IntentActivities {
  const wrap = (kind: keyof IntentActivities): IntentActivities[typeof kind] =>
    new Proxy(activities[kind], {
      get: (target, name) => {
        // Not a thenable: an async function may return the stand-in.
        if (typeof name !== 'string' || name === 'then') return undefined;
        const call = (target as unknown as Record<string, unknown>)[name] as ((...a: unknown[]) => Promise<unknown>) | undefined;
        // The ledger's own writes carry the due rows.
        if (typeof call !== 'function' || name === 'appendToLedger') return call;
        return async (...args: unknown[]) => {
          const recorder = ledger();
          const [first, ...rest] = args;
          if (recorder.due && CARRIERS.has(kind) && isPlainObject(first) && !heldBeforeDispatch(name, first)) {
            return recorder.sendAhead((batch) => call({ ...first, [CARRIED_ROWS_FIELD]: batch }, ...rest));
          }
          await recorder.flushIfDue();
          return call(...args);
        };
      },
    });
  return Object.fromEntries((Object.keys(activities) as Array<keyof IntentActivities>).map((kind) => [kind, wrap(kind)])) as unknown as IntentActivities;
}

/** Whether the stage guard would hold this call before dispatching it (see interceptors.ts). */
function heldBeforeDispatch(activityType: string, input: Record<string, unknown>): boolean {
  const guard = currentStageGuard();
  if (!guard) return false;
  return activityType === 'runAgentStage' ? guard.holdsAgentCall((input as unknown as StageInput).stage) : guard.holdsBeforeActivity(activityType);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
