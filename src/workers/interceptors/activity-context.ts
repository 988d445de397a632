import type { Context } from '@temporalio/activity';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { Logger } from 'pino';
import { withActivityLogger } from '../../activities/log-context';
import type { Redactor } from '../../shared/redact';

/** What an activity's input says about where it runs: `{ intent: { id }, stage, attempt }`. */
function bindings(args: readonly unknown[]): Record<string, unknown> {
  const first = args[0] as { intent?: { id?: unknown }; stage?: unknown; attempt?: unknown } | undefined;
  if (!first || typeof first !== 'object') return {};
  return {
    ...(typeof first.intent?.id === 'string' ? { intentId: first.intent.id } : {}),
    ...(typeof first.stage === 'string' ? { stage: first.stage } : {}),
    ...(typeof first.attempt === 'number' ? { attempt: first.attempt } : {}),
  };
}

/**
 * Binds the intent id, stage and attempt to every log line an activity writes, and logs the
 * start, end, duration and outcome of every activity. Failure messages are scrubbed of secrets
 * before they reach workflow history.
 */
export function activityContextInterceptor(base: Logger, redact: Redactor): ActivityInterceptorsFactory {
  return (ctx: Context) => ({
    inbound: {
      async execute(input, next) {
        const info = ctx.info;
        const logger = base.child({
          activity: info.activityType,
          workflowId: info.workflowExecution?.workflowId,
          activityAttempt: info.attempt,
          ...bindings(input.args),
        });
        const started = Date.now();
        logger.debug('activity started');
        try {
          const result = await withActivityLogger(logger, () => next(input));
          logger.info({ durationMs: Date.now() - started, outcome: 'completed' }, 'activity finished');
          return result;
        } catch (error) {
          if (error instanceof Error) error.message = redact(error.message);
          const outcome = ctx.cancellationSignal.aborted ? 'cancelled' : 'failed';
          logger.warn({ durationMs: Date.now() - started, outcome, error: (error as Error).message }, 'activity finished');
          throw error;
        }
      },
    },
  });
}
