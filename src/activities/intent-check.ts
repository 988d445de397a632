import { randomUUID } from 'node:crypto';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { completeIntent, type IntentRules } from '../config/intent-completion';
import { deterministicUuid } from '../ledger/event-id';
import type { Ledger } from '../ledger/ledger';
import { FailureType } from '../shared/errors';
import { describeIssues, IntentSchema, type Intent } from '../shared/intent';

export interface IntentCheckDeps {
  readonly ledger: Ledger;
  /** The worker's config, which every start obeys; without it (tests of other things) only the schema is checked. */
  readonly intentRules?: IntentRules;
}

/**
 * The workflow's own check of its input (the client checked it too, but a workflow can be
 * started from anywhere: the Web UI, the Temporal CLI, another SDK). It runs as a local activity
 * so that zod and the intent schema stay out of workflow code (see schema-primitives.ts). What
 * it returns is recorded in the history: a replay runs the intent as it was completed.
 */
export function createIntentCheckActivities(deps: IntentCheckDeps) {
  return {
    /**
     * The intent completed from the worker's config (see intent-completion.ts), with the schema's
     * defaults filled in. A start the config forbids, or no intent at all, is an INTENT_REFUSED
     * row and a non-retryable INVALID_INTENT failure naming every problem.
     */
    async checkIntent(input: unknown): Promise<Intent> {
      const completion = deps.intentRules ? completeIntent(input, deps.intentRules) : { input, problems: [] };
      if (completion.problems.length > 0) {
        await refuse(deps.ledger, input, `the worker's config forbids it: ${completion.problems.join('; ')}`);
      }
      const parsed = IntentSchema.safeParse(completion.input);
      if (parsed.success) return parsed.data;
      return refuse(deps.ledger, input, describeIssues(parsed.error));
    },
  };
}

/** The refusal, in the ledger and as the workflow's failure. */
async function refuse(ledger: Ledger, input: unknown, why: string): Promise<never> {
  const message = `invalid intent: ${why}`;
  const workflowExecution = Context.current().info.workflowExecution ?? { workflowId: 'unknown', runId: randomUUID() };
  const id = typeof input === 'object' && input !== null && typeof (input as { id?: unknown }).id === 'string' ? (input as { id: string }).id : undefined;
  await ledger.audit.recordSafetyEvent({
    // One row per run, however often the check is retried.
    id: deterministicUuid('INTENT_REFUSED', workflowExecution.workflowId, workflowExecution.runId),
    timestamp: new Date(),
    eventType: 'INTENT_REFUSED',
    ...(id !== undefined && id.length <= 64 ? { intentId: id } : {}),
    reason: message.slice(0, 4000),
    suggestion: 'start it with `warden run`, or leave out what the config decides: the worker fills it in',
    metadata: { workflowId: workflowExecution.workflowId },
    severity: 'high',
  });
  throw ApplicationFailure.create({ type: FailureType.InvalidIntent, message, nonRetryable: true });
}
