import type { IntentActivities } from './intent-activities';
import type { LedgerRecorder } from './ledger-recorder';

/**
 * An intent's activities, each call made only once the ledger rows due are written
 * (`LedgerRecorder.writeBeforeWaiting`): rows recorded after an agent call go with the next
 * ledger write of the same workflow task when there is one, and never wait behind an activity.
 * The ledger writes themselves pass straight through.
 */
export function dueRowsFirst(activities: IntentActivities, ledger: () => LedgerRecorder): IntentActivities {
  const wrap = (kind: keyof IntentActivities): IntentActivities[typeof kind] =>
    new Proxy(activities[kind], {
      get: (target, name) => {
        // Not a thenable: an async function may return the stand-in.
        if (typeof name !== 'string' || name === 'then') return undefined;
        const call = (target as unknown as Record<string, unknown>)[name];
        // The ledger's own writes carry the due rows.
        if (typeof call !== 'function' || name === 'appendToLedger') return call;
        return async (...args: unknown[]) => {
          await ledger().flushIfDue();
          return (call as (...a: unknown[]) => Promise<unknown>)(...args);
        };
      },
    });
  return Object.fromEntries((Object.keys(activities) as Array<keyof IntentActivities>).map((kind) => [kind, wrap(kind)])) as unknown as IntentActivities;
}
