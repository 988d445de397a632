/**
 * A workflow interceptor module for replay only (bench/chaos/ledger-vs-history.ts): each
 * `appendToLedger` call that the history shows completed, and each other activity that carried
 * rows to write (`ledgerBatch`: a gate's request with its review package, an intent's ending with
 * its ladder run; or rows sent ahead of it, see src/shared/carried-rows.ts), hands the ids of the rows it wrote to the `ledgerCapture` sink. The workflow makes those ids itself (its deterministic uuid4), so replaying
 * a history gives exactly the rows its run put in the ledger.
 */
import { CARRIED_ROWS_FIELD } from '../../src/shared/carried-rows';
import { proxySinks, type ActivityInput, type LocalActivityInput, type Next, type Sinks, type WorkflowInterceptorsFactory, type WorkflowOutboundCallsInterceptor } from '@temporalio/workflow';

export interface LedgerCaptureSinks extends Sinks {
  ledgerCapture: { written(ids: string[]): void };
}

const { ledgerCapture } = proxySinks<LedgerCaptureSinks>();

type Rows = ReadonlyArray<Record<string, { id?: unknown } | undefined>>;

/**
 * The ids of the ledger rows an activity call wrote: an `appendToLedger` batch, the batch another
 * activity carried to write with its own work, or the rows it carried ahead of itself.
 */
function idsOf(activityType: string, args: readonly unknown[]): string[] {
  const input = args[0] as ({ rows?: Rows; ledgerBatch?: { rows?: Rows } } & Partial<Record<typeof CARRIED_ROWS_FIELD, { rows?: Rows }>>) | undefined;
  const rows = [...((activityType === 'appendToLedger' ? input?.rows : input?.ledgerBatch?.rows) ?? []), ...(input?.[CARRIED_ROWS_FIELD]?.rows ?? [])];
  return rows.flatMap((row) => Object.values(row).flatMap((value) => (typeof value?.id === 'string' ? [value.id] : [])));
}

class LedgerCapture implements WorkflowOutboundCallsInterceptor {
  async scheduleActivity(input: ActivityInput, next: Next<WorkflowOutboundCallsInterceptor, 'scheduleActivity'>): Promise<unknown> {
    const result = await next(input);
    const ids = idsOf(input.activityType, input.args);
    if (ids.length > 0) ledgerCapture.written(ids);
    return result;
  }

  async scheduleLocalActivity(input: LocalActivityInput, next: Next<WorkflowOutboundCallsInterceptor, 'scheduleLocalActivity'>): Promise<unknown> {
    const result = await next(input);
    const ids = idsOf(input.activityType, input.args);
    if (ids.length > 0) ledgerCapture.written(ids);
    return result;
  }
}

export const interceptors: WorkflowInterceptorsFactory = () => ({ outbound: [new LedgerCapture()] });
