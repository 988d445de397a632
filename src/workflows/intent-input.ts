import { ActivityFailure, ApplicationFailure, proxyLocalActivities } from '@temporalio/workflow';
import type { WardenActivities } from '../activities';
import { FailureType } from '../shared/errors';
import { workflowIdForIntent } from '../shared/ids';
import type { Intent } from '../shared/intent';

/**
 * The workflow's input, re-checked against the intent schema by a local activity (the client
 * checked it too); a bad intent fails the workflow at once with INVALID_INTENT. The checked
 * intent is recorded in the history, so a replay uses it as it was, whatever the schema's
 * defaults have become since.
 */
export async function checkedIntent(input: unknown): Promise<Intent> {
  const { checkIntent } = proxyLocalActivities<WardenActivities>({ startToCloseTimeout: '10s', retry: { nonRetryableErrorTypes: [FailureType.InvalidIntent] } });
  try {
    return await checkIntent(input);
  } catch (error) {
    const cause = error instanceof ActivityFailure ? error.cause : undefined;
    if (cause instanceof ApplicationFailure && cause.type === FailureType.InvalidIntent) {
      throw ApplicationFailure.create({ type: FailureType.InvalidIntent, message: cause.message, nonRetryable: true });
    }
    throw error;
  }
}

/**
 * The server refuses a second running workflow with the same id, and that is what keeps two runs of
 * one intent off the same branch and worktree; a workflow started under any other id (from the Web
 * UI or another client) would slip past it, so it is refused before it touches anything.
 */
export function refuseForeignWorkflowId(intentId: string, workflowId: string): void {
  const expected = workflowIdForIntent(intentId);
  if (workflowId === expected) return;
  throw ApplicationFailure.create({
    type: FailureType.InvalidIntent,
    message: `intent ${intentId} must run as workflow ${expected}, not ${workflowId}: one workflow id per intent is what keeps two runs off one branch`,
    nonRetryable: true,
  });
}
