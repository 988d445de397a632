import { WorkflowExecutionAlreadyStartedError, type Client, type WorkflowHandle } from '@temporalio/client';
import { UserError } from '../shared/errors';
import { TASK_QUEUE, workflowIdForIntent } from '../shared/ids';
import { IntentSchema, describeIssues, type Intent, type IntentInput } from '../shared/intent';
import { decideUpdate, stateQuery } from '../shared/messages';
import { WardenRepo, WardenStage, WardenStatus } from '../shared/search-attributes';
import type { Decision } from '../shared/decisions';
import type { GateKind } from '../shared/gates';
import type { IntentState } from '../shared/state';
import type { intentWorkflow } from '../workflows';

/** Validates an intent as the workflow will; a bad one is a `UserError` naming each field. */
export function validateIntent(input: IntentInput): Intent {
  const parsed = IntentSchema.safeParse(input);
  if (!parsed.success) throw new UserError(`invalid intent: ${describeIssues(parsed.error)}`);
  return parsed.data;
}

/**
 * Starts an intent's workflow (id `intent-<id>`). The server refuses a second running workflow
 * with the same id; that becomes a clear `UserError`.
 */
export async function startIntent(
  client: Client,
  input: IntentInput,
  taskQueue: string = TASK_QUEUE,
): Promise<WorkflowHandle<typeof intentWorkflow>> {
  const intent = validateIntent(input);
  try {
    return await client.workflow.start<typeof intentWorkflow>('intentWorkflow', {
      taskQueue,
      workflowId: workflowIdForIntent(intent.id),
      args: [intent],
      staticSummary: intent.goal.slice(0, 200),
      memo: { goal: intent.goal },
      typedSearchAttributes: [
        { key: WardenStatus, value: 'running' },
        { key: WardenStage, value: 'triage' },
        { key: WardenRepo, value: intent.repoPath },
      ],
    });
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) {
      throw new UserError(`intent ${intent.id} is already running (workflow ${workflowIdForIntent(intent.id)}); stop it or pick another --id`);
    }
    throw error;
  }
}

export function intentHandle(client: Client, intentId: string): WorkflowHandle<typeof intentWorkflow> {
  return client.workflow.getHandle<typeof intentWorkflow>(workflowIdForIntent(intentId));
}

export async function queryState(client: Client, intentId: string): Promise<IntentState> {
  return intentHandle(client, intentId).query(stateQuery);
}

/** The gate a running intent waits at; a clear error when it waits at none. */
export async function pendingGateOf(client: Client, intentId: string): Promise<GateKind> {
  const handle = intentHandle(client, intentId);
  await describeRunning(handle, intentId);
  const state = await handle.query(stateQuery);
  if (!state.pendingGate) throw new UserError(`intent ${intentId} is not waiting at a gate (it is at stage ${state.stage})`);
  return state.pendingGate.gate;
}

/**
 * Sends a decision to a running intent (as the `decision` update, so the answer comes back) after
 * checking it waits at that gate. The workflow validates the payload and the sender again.
 */
export async function sendDecision(client: Client, intentId: string, decision: Decision): Promise<void> {
  const handle = intentHandle(client, intentId);
  await describeRunning(handle, intentId);
  const state = await handle.query(stateQuery);
  if (state.pendingGate?.gate !== decision.gate) {
    const where = state.pendingGate ? `the ${state.pendingGate.gate} gate` : `stage ${state.stage}, no gate`;
    throw new UserError(`intent ${intentId} is not waiting at the ${decision.gate} gate (it is at ${where})`);
  }
  // The update answers: a refusal (not an approver, the agent itself, deferred twice) is an error here.
  const answer = await handle.executeUpdate(decideUpdate, { args: [decision] });
  if (!answer.accepted) throw new UserError(`the ${decision.gate} gate of ${intentId} refused the decision: ${answer.reason}`);
}

/** Describes an intent that must be running; a missing or finished one is a clear `UserError`. */
export async function describeRunning(handle: WorkflowHandle, intentId: string) {
  const description = await describeOrExplain(handle, intentId);
  if (description.status.name !== 'RUNNING') {
    throw new UserError(`intent ${intentId} is not running (${description.status.name.toLowerCase()})`);
  }
  return description;
}

export async function describeOrExplain(handle: WorkflowHandle, intentId: string) {
  try {
    return await handle.describe();
  } catch (error) {
    if ((error as Error).name === 'WorkflowNotFoundError') throw new UserError(`no intent with id ${intentId}`);
    throw error;
  }
}
