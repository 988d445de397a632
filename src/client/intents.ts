import { WorkflowExecutionAlreadyStartedError, WorkflowIdConflictPolicy, WorkflowIdReusePolicy, type Client, type WorkflowExecutionDescription, type WorkflowHandle, type WorkflowHandleWithStartDetails } from '@temporalio/client';
import { approverKeysDir } from '../shared/approver-keys-dir';
import { readApproverKey, signDecision } from './approver-keys';
import { answeringState } from './worker-presence';
import { UserError } from '../shared/errors';
import { TASK_QUEUE, workflowIdForIntent } from '../shared/ids';
import { IntentSchema, describeIssues, type Intent, type IntentInput } from '../shared/intent';
import { decideUpdate, stateQuery } from '../shared/messages';
import { SEARCH_ATTRIBUTE_DEFINITIONS, WardenRepo, WardenStage, WardenStatus } from '../shared/search-attributes';
import type { Decision } from '../shared/decisions';
import type { GateName } from '../shared/gates';
import type { IntentState } from '../shared/state';
import type { intentWorkflow } from '../workflows';

/** Validates an intent as the workflow will; a bad one is a `UserError` naming each field. */
export function validateIntent(input: IntentInput): Intent {
  const parsed = IntentSchema.safeParse(input);
  if (!parsed.success) throw new UserError(`invalid intent: ${describeIssues(parsed.error)}`);
  return parsed.data;
}

/**
 * Starts an intent's workflow (id `intent-<id>`). An intent id is used once: the server refuses
 * it while a workflow with that id runs (conflict policy FAIL) and after one has closed, however
 * it ended (reuse policy REJECT_DUPLICATE), so a second intent never lands on the first one's
 * branch. A run again from a stage is `warden resume`, a reset of the same workflow.
 *
 * The workflow gets the input as given, checked but not filled in: what it leaves out, the
 * worker completes from its config (intent-completion.ts). The schema's defaults filled in here
 * would reach the worker as values the start asked for, and be refused where the config is
 * stricter than they are.
 *
 * `eager`: this process runs a worker on `taskQueue` and `client` is on that worker's native
 * connection (see RunningWorker.client): the server then hands the intent's first workflow task
 * back with the start's answer, to that worker, instead of through the task queue. When that
 * worker has no free slot the start goes through the queue as usual.
 */
export async function startIntent(
  client: Client,
  input: IntentInput,
  taskQueue: string = TASK_QUEUE,
  { eager = false }: { readonly eager?: boolean } = {},
): Promise<WorkflowHandleWithStartDetails<typeof intentWorkflow>> {
  const intent = validateIntent(input);
  try {
    return await client.workflow.start<typeof intentWorkflow>('intentWorkflow', {
      taskQueue,
      ...(eager ? { requestEagerStart: true } : {}),
      workflowId: workflowIdForIntent(intent.id),
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.FAIL,
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      args: [input],
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
      throw (await takenIdProblem(client, intent.id)) ?? new UserError(`intent id ${intent.id} is already used (workflow ${workflowIdForIntent(intent.id)}); pick another --id`);
    }
    const missing = await missingSearchAttributesProblem(client, error);
    if (missing) throw missing;
    throw error;
  }
}

/**
 * Refuses an intent id that a workflow already has, running or finished, before anything is
 * started for it. The start itself is refused by the server too; this makes the answer quick.
 */
export async function refuseTakenId(client: Client, intentId: string): Promise<void> {
  const problem = await takenIdProblem(client, intentId);
  if (problem) throw problem;
}

/** Why `intentId` cannot be started again, or undefined when no workflow has it. */
async function takenIdProblem(client: Client, intentId: string): Promise<UserError | undefined> {
  let description;
  try {
    description = await intentHandle(client, intentId).describe();
  } catch (error) {
    if ((error as Error).name === 'WorkflowNotFoundError') return undefined;
    throw error;
  }
  const workflowId = workflowIdForIntent(intentId);
  if (description.status.name === 'RUNNING') {
    return new UserError(`intent ${intentId} is already running (workflow ${workflowId}); stop it or pick another --id`);
  }
  const status = description.typedSearchAttributes.get(WardenStatus) ?? description.status.name.toLowerCase();
  return new UserError(
    `intent ${intentId} already ran (${status}; workflow ${workflowId}): pick another --id, or run it again from a stage with warden resume ${intentId} --from STAGE`,
  );
}

const MISSING_ATTRIBUTE = /no mapping defined for search attribute (\w+)/;

/**
 * A start refused because the namespace lacks Warden's search attributes becomes a `UserError`
 * naming the missing ones and the command that registers them.
 */
async function missingSearchAttributesProblem(client: Client, error: unknown): Promise<UserError | undefined> {
  const named = messagesOf(error).map((m) => MISSING_ATTRIBUTE.exec(m)?.[1]).find(Boolean);
  if (!named) return undefined;
  const namespace = client.options.namespace;
  let missing = [named];
  try {
    const { customAttributes } = await client.connection.operatorService.listSearchAttributes({ namespace });
    missing = Object.keys(SEARCH_ATTRIBUTE_DEFINITIONS).filter((name) => !customAttributes?.[name]);
    if (!missing.includes(named)) missing.unshift(named);
  } catch {
    // not allowed to list them (some clouds): name the one the server named
  }
  // One `create` per attribute: the Temporal CLI (1.9) adds only the first of several names.
  const commands = missing.map((name) => `temporal operator search-attribute create --namespace ${namespace} --name ${name} --type ${SEARCH_ATTRIBUTE_DEFINITIONS[name] ?? 'Keyword'}`);
  return new UserError(
    `the Temporal namespace ${namespace} lacks Warden's search attribute${missing.length > 1 ? 's' : ''} ${missing.join(', ')}: register ${missing.length > 1 ? 'them' : 'it'} once with: ${commands.join(' && ')}`,
  );
}

/** The messages of an error and its causes (the SDK wraps the server's answer). */
function messagesOf(error: unknown): string[] {
  const messages: string[] = [];
  for (let e = error as { message?: unknown; cause?: unknown; details?: unknown } | undefined, depth = 0; e && depth < 5; e = e.cause as typeof e, depth++) {
    if (typeof e.message === 'string') messages.push(e.message);
    if (typeof e.details === 'string') messages.push(e.details);
  }
  return messages;
}

export function intentHandle(client: Client, intentId: string): WorkflowHandle<typeof intentWorkflow> {
  return client.workflow.getHandle<typeof intentWorkflow>(workflowIdForIntent(intentId));
}

export async function queryState(client: Client, intentId: string): Promise<IntentState> {
  return intentHandle(client, intentId).query(stateQuery);
}

/** The gate a running intent waits at; a clear error when it waits at none. */
export async function pendingGateOf(client: Client, intentId: string): Promise<GateName> {
  const handle = intentHandle(client, intentId);
  const description = await describeRunning(handle, intentId);
  const state = await answeringState(client, handle, intentId, description.taskQueue);
  if (!state.pendingGate) throw new UserError(`intent ${intentId} is not waiting at a gate (it is at stage ${state.stage})`);
  return state.pendingGate.gate;
}

/**
 * Sends a decision to a running intent (as the `decision` update, so the answer comes back) after
 * checking it waits at that gate, signed with the approver's key when `decision.by` has one in
 * `keysDir` (default: the user's, see approverKeysDir). The workflow checks payload, sender and
 * signature again.
 */
export async function sendDecision(client: Client, intentId: string, decision: Decision, options: { readonly keysDir?: string } = {}): Promise<void> {
  const handle = intentHandle(client, intentId);
  const description = await describeRunning(handle, intentId);
  const state = await answeringState(client, handle, intentId, description.taskQueue);
  const pending = state.pendingGate;
  if (pending?.gate !== decision.gate) {
    const where = pending ? `the ${pending.gate} gate` : `stage ${state.stage}, no gate`;
    throw new UserError(`intent ${intentId} is not waiting at the ${decision.gate} gate (it is at ${where})`);
  }
  const key = decision.proof || decision.agentSession ? undefined : readApproverKey(options.keysDir ?? approverKeysDir(), decision.by);
  const sent = key ? { ...decision, proof: signDecision(key, intentId, decision, pending.requestedAt) } : decision;
  // The update answers: a refusal (not an approver, the agent itself, deferred twice, unsigned where a signature is needed) is an error here.
  const answer = await handle.executeUpdate(decideUpdate, { args: [sent] });
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

/**
 * How an intent that has ended ended (`merged`, `rejected`, `cancelled`, `failed`; `terminated` or
 * `timed_out` when it ended from outside), from the server's description alone: no query, so no
 * worker has to replay its history. Undefined while it runs.
 */
export async function endedStatusOf(client: Client, intentId: string): Promise<string | undefined> {
  const description = await intentHandle(client, intentId).describe();
  return description.status.name === 'RUNNING' ? undefined : wardenStatusOf(description);
}

/** Workflows that ended from outside: the workflow never got to say so itself, its last word would be "running". */
const ENDED_FROM_OUTSIDE = new Set(['TERMINATED', 'TIMED_OUT']);

/** Warden's status of an intent as the server describes it: the workflow's own word (a search attribute), unless it ended from outside. */
export function wardenStatusOf(description: WorkflowExecutionDescription): string {
  const status = description.status.name;
  if (ENDED_FROM_OUTSIDE.has(status)) return status.toLowerCase();
  return description.typedSearchAttributes.get(WardenStatus) ?? status.toLowerCase();
}

export async function describeOrExplain(handle: WorkflowHandle, intentId: string) {
  try {
    return await handle.describe();
  } catch (error) {
    if ((error as Error).name === 'WorkflowNotFoundError') throw new UserError(`no intent with id ${intentId}`);
    throw error;
  }
}
