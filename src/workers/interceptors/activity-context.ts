import type { Context } from '@temporalio/activity';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { Logger } from 'pino';
import { withActivityLogger } from '../../activities/log-context';
import { intentIdFromWorkflowId } from '../../shared/ids';
import { redactDeep, type Redactor } from '../../shared/redact';

const INTENT_WORKFLOW_PREFIX = 'intent-';

/**
 * Where an activity runs, for its log lines. The intent id comes from the input
 * (`{ intent: { id } }` or `{ intentId }`) or else from the intent workflow's id; the stage from
 * the input when it names one; the attempt is the stage attempt when the input carries one, else
 * the activity's own attempt (always also bound as `activityAttempt`).
 */
export function activityBindings(info: Context['info'], args: readonly unknown[]): Record<string, unknown> {
  const first = (args[0] && typeof args[0] === 'object' ? args[0] : {}) as { intent?: { id?: unknown }; intentId?: unknown; stage?: unknown; attempt?: unknown };
  const workflowId = info.workflowExecution?.workflowId;
  const intentId =
    typeof first.intent?.id === 'string'
      ? first.intent.id
      : typeof first.intentId === 'string'
        ? first.intentId
        : workflowId?.startsWith(INTENT_WORKFLOW_PREFIX)
          ? intentIdFromWorkflowId(workflowId)
          : undefined;
  return {
    activity: info.activityType,
    workflowId,
    activityAttempt: info.attempt,
    ...(intentId !== undefined ? { intentId } : {}),
    ...(typeof first.stage === 'string' ? { stage: first.stage } : {}),
    attempt: typeof first.attempt === 'number' ? first.attempt : info.attempt,
  };
}

/**
 * Scrubs secrets from an error before the SDK turns it into a failure in workflow history: its
 * message and stack, those of every error in its `cause` chain, and ApplicationFailure details.
 */
export function redactError(error: unknown, redact: Redactor): void {
  const seen = new Set<unknown>();
  for (let current = error; current instanceof Error && !seen.has(current); current = current.cause) {
    seen.add(current);
    current.message = redact(current.message);
    if (current.stack) current.stack = redact(current.stack);
    const details = (current as { details?: unknown }).details;
    // ApplicationFailure.details is readonly in its type only; the SDK reads it when it converts.
    if (Array.isArray(details)) Object.assign(current, { details: redactDeep(details, redact) });
  }
}

/**
 * Binds the intent id, stage and attempt to every log line an activity writes, and logs the
 * start, end, duration and outcome of every activity. Failures are scrubbed of secrets before
 * they reach workflow history.
 */
export function activityContextInterceptor(base: Logger, redact: Redactor): ActivityInterceptorsFactory {
  return (ctx: Context) => ({
    inbound: {
      async execute(input, next) {
        const logger = base.child(activityBindings(ctx.info, input.args));
        const started = Date.now();
        logger.debug('activity started');
        try {
          const result = await withActivityLogger(logger, () => next(input));
          logger.info({ durationMs: Date.now() - started, outcome: 'completed' }, 'activity finished');
          return result;
        } catch (error) {
          redactError(error, redact);
          const outcome = ctx.cancellationSignal.aborted ? 'cancelled' : 'failed';
          logger.warn({ durationMs: Date.now() - started, outcome, error: (error as Error).message }, 'activity finished');
          throw error;
        }
      },
    },
  });
}
