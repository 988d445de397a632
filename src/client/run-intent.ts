import type { Logger } from 'pino';
import type { WardenConfig } from '../config/schema';
import type { RuntimeConfig } from '../runtime/config';
import { UserError } from '../shared/errors';
import type { IntentInput } from '../shared/intent';
import { followIntent, type FollowResult } from './follow';
import { startIntent, validateIntent } from './intents';
import { connectTemporal, hasLiveWorker, openLedger, startWorker, webUiLink, type RunningWorker } from './session';
import { startTracing } from '../runtime/telemetry';

export interface RunIntentOptions {
  readonly config: RuntimeConfig;
  /** Worker-side safety settings for the worker this command runs. */
  readonly safety: WardenConfig;
  readonly logger: Logger;
  readonly detach: boolean;
  readonly approve: boolean;
  readonly interactive: boolean;
  readonly by: string;
  readonly print: (line: string) => void;
}

export type RunIntentResult = { readonly intentId: string; readonly detached: true } | ({ readonly intentId: string; readonly detached: false } & FollowResult);

/**
 * Starts an intent and, unless detached, follows it to the end with a worker running in this
 * process (any other workers on the queue share the work).
 */
export async function runIntent(input: IntentInput, options: RunIntentOptions): Promise<RunIntentResult> {
  const intent = validateIntent(input);
  await refuseWhileStopped(options.config);
  const tracing = startTracing(options.safety.telemetry.otlpEndpoint, 'warden-client');
  const target = await connectTemporal(options.config, (m) => options.print(m), tracing?.client);
  let worker: RunningWorker | undefined;
  try {
    if (options.detach && target.embedded) {
      throw new UserError('--detach needs a Temporal server that outlives this command: start `warden dev` first, or set TEMPORAL_ADDRESS');
    }
    if (!options.detach) {
      // A worker here guarantees progress while we follow; other workers share the queue.
      worker = await startWorker(target, options.config, options.safety, options.logger);
    } else if (!(await hasLiveWorker(target.client, target.namespace))) {
      options.print('note: no worker is running; the intent waits until one starts (`warden worker` or `warden dev`)');
    }
    await startIntent(target.client, intent);
    options.print(`started intent ${intent.id}: ${intent.goal}`);
    const link = webUiLink(target, intent.id);
    if (link) options.print(`Web UI: ${link}`);
    if (options.detach) return { intentId: intent.id, detached: true };
    const result = await followIntent({
      client: target.client,
      intentId: intent.id,
      approve: options.approve,
      interactive: options.interactive,
      by: options.by,
      print: options.print,
    });
    return { intentId: intent.id, detached: false, ...result };
  } finally {
    await worker?.stop();
    await target.close();
    await tracing?.shutdown(); // flush the client's spans before the command exits
  }
}

/** `warden run` starts nothing while the global stop flag is set, and says why. */
async function refuseWhileStopped(config: RuntimeConfig): Promise<void> {
  const { ledger, database } = await openLedger(config, () => undefined);
  try {
    const stop = await ledger.globalStop();
    if (stop.stopped) {
      throw new UserError(`Warden is stopped (by ${stop.by ?? 'someone'}: ${stop.reason ?? 'no reason given'}); nothing starts until warden unlock --reason TEXT`);
    }
  } finally {
    await database.close();
  }
}
