import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../shared/errors';
import { describeIssues, IntentSchema, type Intent } from '../shared/intent';

/**
 * The workflow's own check of its input (the client checked it too, but a workflow can be
 * started from anywhere: the Web UI, the Temporal CLI, another SDK). It runs as a local activity
 * so that zod and the intent schema stay out of workflow code (see schema-primitives.ts).
 */
export function createIntentCheckActivities() {
  return {
    /** The intent with its defaults filled in; a non-retryable INVALID_INTENT failure when it is not one. */
    async checkIntent(input: unknown): Promise<Intent> {
      const parsed = IntentSchema.safeParse(input);
      if (parsed.success) return parsed.data;
      throw ApplicationFailure.create({ type: FailureType.InvalidIntent, message: `invalid intent: ${describeIssues(parsed.error)}`, nonRetryable: true });
    },
  };
}
