import type { Client } from '@temporalio/client';
import type { IntentStatusReader } from '../activities/sweeper';
import { workflowIdForIntent } from '../shared/ids';

/**
 * Asks Temporal how an intent's workflow stands (for the sweeper): its status, the closing run,
 * and for a terminated one who terminated it and why (the last event of its history).
 */
export function temporalIntentStatus(client: Client): IntentStatusReader {
  return async (intentId) => {
    const workflowId = workflowIdForIntent(intentId);
    let description;
    try {
      description = await client.workflow.getHandle(workflowId).describe();
    } catch (error) {
      if ((error as Error).name === 'WorkflowNotFoundError') return { status: 'NOT_FOUND' };
      throw error;
    }
    const status = description.status.name;
    const closed = { status, runId: description.runId, ...(description.closeTime ? { closeTime: description.closeTime } : {}) };
    if (status !== 'TERMINATED') return closed;
    const last = await client.workflowService.getWorkflowExecutionHistoryReverse({
      namespace: client.options.namespace,
      execution: { workflowId, runId: description.runId },
      maximumPageSize: 1,
    });
    const terminated = last.history?.events?.[0]?.workflowExecutionTerminatedEventAttributes;
    const how = terminated ? `terminated by ${terminated.identity || 'an unnamed client'}${terminated.reason ? `: ${terminated.reason}` : ''}` : undefined;
    return { ...closed, ...(how ? { how } : {}) };
  };
}
