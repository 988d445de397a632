/**
 * A workflow interceptor module for replay only (bench/chaos/ledger-vs-history.ts): each
 * `appendToLedger` call that the history shows completed hands the ids of the rows it wrote to the
 * `ledgerCapture` sink. The workflow makes those ids itself (its deterministic uuid4), so replaying
 * a history gives exactly the rows its run put in the ledger.
 */
import { proxySinks, type ActivityInput, type LocalActivityInput, type Next, type Sinks, type WorkflowInterceptorsFactory, type WorkflowOutboundCallsInterceptor } from '@temporalio/workflow';

export interface LedgerCaptureSinks extends Sinks {
  ledgerCapture: { written(ids: string[]): void };
}

const { ledgerCapture } = proxySinks<LedgerCaptureSinks>();

function idsOf(args: readonly unknown[]): string[] {
  const batch = args[0] as { rows?: ReadonlyArray<Record<string, { id?: unknown } | undefined>> } | undefined;
  return (batch?.rows ?? []).flatMap((row) => Object.values(row).flatMap((value) => (typeof value?.id === 'string' ? [value.id] : [])));
}

class LedgerCapture implements WorkflowOutboundCallsInterceptor {
  async scheduleActivity(input: ActivityInput, next: Next<WorkflowOutboundCallsInterceptor, 'scheduleActivity'>): Promise<unknown> {
    const result = await next(input);
    if (input.activityType === 'appendToLedger') ledgerCapture.written(idsOf(input.args));
    return result;
  }

  async scheduleLocalActivity(input: LocalActivityInput, next: Next<WorkflowOutboundCallsInterceptor, 'scheduleLocalActivity'>): Promise<unknown> {
    const result = await next(input);
    if (input.activityType === 'appendToLedger') ledgerCapture.written(idsOf(input.args));
    return result;
  }
}

export const interceptors: WorkflowInterceptorsFactory = () => ({ outbound: [new LedgerCapture()] });
