import type { Logger } from 'pino';
import type { WardenConfig } from '../config/schema';
import type { RuntimeConfig } from '../runtime/config';
import { UserError } from '../shared/errors';
import type { IntentInput } from '../shared/intent';
import type { IntentState } from '../shared/state';
import { followIntent, type FollowResult } from './follow';
import { catchInterrupts } from './interrupts';
import { refuseTakenId, startIntent, validateIntent } from './intents';
import { connectTemporal, hasLiveWorker, openOwnedLedger, startWorker, webUiLink, type RunningWorker } from './session';
import { startTracing } from '../runtime/telemetry';
import { refuseUnconfinableIntent } from '../runtime/sandbox-readiness';
import { probeBubblewrap, type BubblewrapProbe } from '../activities/sandbox';
import { serveAlongside } from './web/serve';
import type { WebApp } from './web/server';
import { decideCommands } from '../shared/decide-commands';

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
  /** Serve the web app while following (default: yes); a port in use only says so. */
  readonly serve?: boolean;
}

/** Ctrl-C stopped the following; the intent goes on. `next` says how to carry on with it. */
export interface StoppedFollowing {
  readonly intentId: string;
  readonly detached: true;
  readonly interrupted: true;
  readonly state?: IntentState;
  readonly next: readonly string[];
}

export type RunIntentResult =
  | { readonly intentId: string; readonly detached: true; readonly interrupted?: undefined }
  | StoppedFollowing
  | ({ readonly intentId: string; readonly detached: false } & FollowResult);

/**
 * Starts an intent and, unless detached, follows it to the end with a worker running in this
 * process (any other workers on the queue share the work). The first Ctrl-C stops the following
 * (see interrupts.ts); the worker and any embedded server this command started are stopped.
 */
export async function runIntent(input: IntentInput, options: RunIntentOptions): Promise<RunIntentResult> {
  const intent = validateIntent(input);
  // What the worker's sandbox rules would refuse is refused now, detached or not: nothing starts.
  const workerHere = !options.detach || options.config.temporalAddress === undefined;
  await refuseUnconfinableIntent(intent, workerHere ? probeBubblewrap : bubblewrapOfWorkerElsewhere);
  const interrupts = catchInterrupts(options.print);
  const beforeStart = (): void => {
    if (interrupts.signal.aborted) throw new UserError('interrupted before the intent started: nothing was started', 130);
  };
  try {
    await refuseWhileStopped(options.config, options.print);
    beforeStart();
    const tracing = startTracing(options.safety.telemetry.otlpEndpoint, 'warden-client');
    const target = await connectTemporal(options.config, (m) => options.print(m), tracing?.client);
    let worker: RunningWorker | undefined;
    let stopped: Omit<StoppedFollowing, 'next'> | undefined;
    let otherWorkers = false;
    let webApp: WebApp | undefined;
    try {
      if (options.detach && target.embedded) {
        throw new UserError('--detach needs a Temporal server that outlives this command: start `warden dev` first, or set TEMPORAL_ADDRESS');
      }
      // An id is used once; say so before a worker is started for nothing.
      await refuseTakenId(target.client, intent.id);
      beforeStart();
      if (!options.detach) {
        // A worker here guarantees progress while we follow; other workers share the queue.
        worker = await startWorker(target, options.config, options.safety, options.logger);
      } else if (!(await hasLiveWorker(target.client, target.namespace))) {
        options.print('note: no worker is running; the intent waits until one starts (`warden worker` or `warden dev`)');
      }
      beforeStart();
      await startIntent(target.client, input);
      options.print(`started intent ${intent.id}: ${intent.goal}`);
      const link = webUiLink(target, intent.id);
      if (link) options.print(`Web UI: ${link}`);
      if (options.detach) return { intentId: intent.id, detached: true };
      webApp = options.serve === false ? undefined : await serveAlongside(target.client, options.config, options.safety, { operator: options.by, logger: options.logger, print: options.print });
      const result = await followIntent({
        client: target.client,
        intentId: intent.id,
        approve: options.approve,
        interactive: options.interactive,
        by: options.by,
        print: options.print,
        signal: interrupts.signal,
      });
      if (result.kind !== 'interrupted') return { intentId: intent.id, detached: false, ...result };
      stopped = { intentId: intent.id, detached: true, interrupted: true, state: result.state };
      otherWorkers = !target.embedded && (await hasLiveWorker(target.client, target.namespace, worker?.identity).catch(() => true));
    } finally {
      await webApp?.close();
      await worker?.stop();
      await target.close();
      await tracing?.shutdown(); // flush the client's spans before the command exits
    }
    if (!stopped) throw new Error('runIntent: followed to neither an end nor an interrupt'); // every other path returned
    return { ...stopped, next: howToGoOn(stopped, { embedded: Boolean(target.embedded), otherWorkers }) };
  } finally {
    interrupts.dispose();
  }
}

/** What to tell someone who stopped following: where the intent is and the commands that reach it. */
function howToGoOn(stopped: Omit<StoppedFollowing, 'next'>, where: { embedded: boolean; otherWorkers: boolean }): string[] {
  const id = stopped.intentId;
  const state = stopped.state;
  const at = state ? ` (stage ${state.stage}${state.pendingGate ? `, waiting at the ${state.pendingGate.gate} gate` : ''})` : '';
  const lines = [`stopped following intent ${id}; the intent itself goes on${at}`, `  follow:  warden status ${id}`];
  if (state?.pendingGate) {
    const commands = decideCommands(id, state.pendingGate.gate);
    lines.push(`  approve: ${commands.approve}`, `  reject:  ${commands.reject}`);
  }
  lines.push(`  stop it: warden stop ${id} --reason "…"`);
  if (where.embedded) {
    lines.push('the embedded Temporal server stopped with this command; the intent is kept and goes on when `warden dev` (or another warden run) starts it again');
  } else if (!where.otherWorkers) {
    lines.push('no other worker is running: the intent waits until one starts (`warden worker` or `warden dev`)');
  }
  return lines;
}

/**
 * A detached intent on a remote Temporal server runs on a worker elsewhere: whether bubblewrap
 * works there is that worker's to say (it refuses at the stage); this machine's says nothing.
 */
async function bubblewrapOfWorkerElsewhere(): Promise<BubblewrapProbe> {
  return { available: true };
}

/** `warden run` starts nothing while the global stop flag is set, and says why. */
async function refuseWhileStopped(config: RuntimeConfig, print: (line: string) => void): Promise<void> {
  // The first to open the ledger: its first-use steps (installing and starting the embedded PostgreSQL) are shown.
  const { ledger, database } = await openOwnedLedger(config, () => undefined, print);
  try {
    const stop = await ledger.globalStop.current();
    if (stop.stopped) {
      throw new UserError(`Warden is stopped (by ${stop.by ?? 'someone'}: ${stop.reason ?? 'no reason given'}); nothing starts until warden unlock --reason TEXT`);
    }
  } finally {
    await database.close();
  }
}
