import { forgeClient } from '../forge';
import { forgeRepositoryFromRemote } from '../forge/remote';
import path from 'node:path';
import v8 from 'node:v8';
import { Client } from '@temporalio/client';
import { Worker, type NativeConnection, type WorkerOptions } from '@temporalio/worker';
import { createSweepActivities, type IntentStatusReader } from '../activities/sweeper';
import { temporalIntentStatus } from './intent-status-reader';
import { keepSweepSchedule, sweepScheduleId } from './sweep-schedule';
import { anchorScheduleId, keepAnchorSchedule } from './anchor-schedule';
import { PAYLOAD_CONVERTER_PATH } from './payload-converter-path';
import type { Logger } from 'pino';
import { createActivities, type WardenActivities } from '../activities';
import { ModelGateway, type GatewayOptions } from '../gateway/gateway';
import { sweepTrash, trashOf } from '../activities/trash';
import type { WorkerSafetyConfig } from '../config/schema';
import type { IntentRules } from '../config/intent-completion';
import type { LadderDefaults } from '../ledger/ladder-store';
import type { Ledger } from '../ledger/ledger';
import { SharedLimitStore, type SharedLimits } from '../ledger/shared-limits';
import type { Tracing } from '../runtime/telemetry';
import { hostQueueFor, TASK_QUEUE } from '../shared/ids';
import { defaultHostName, WardenWorker } from './host-worker';
import { hostPlacementInterceptor } from './interceptors/host-placement';
import type { Redactor } from '../shared/redact';
import { activityContextInterceptor } from './interceptors/activity-context';
import { carriedRowsInterceptor } from './interceptors/carried-rows';
import { agentSafetyInterceptor, DEFAULT_EMERGENCY_STOP_FILE, type KillSwitchOptions } from './interceptors/agent-safety';
import { stageKillSwitchInterceptor } from './interceptors/stage-kill-switch';
import { attemptStillRunsOn, RECONCILE_EVERY_MS, reconcileReservations } from './stale-reservations';
import { killStrays, recordProcessesIn } from '../activities/process-registry';
import { bundleWorkflowsApart } from './workflow-bundle';
import { readyCascadeModel } from './cascade-model-cache';
import type { DISPATCH_DEFAULTS} from './notification-dispatcher';
import { NotificationDispatcher } from './notification-dispatcher';
import { NotificationOutbox } from '../ledger/notification-outbox';
import { ExchangeStore, RECORDING_DEFAULTS, type RecordingContext } from '../ledger/exchange-store';
import type { NotifyChannel } from '../shared/notify-settings';
import type { NotificationDeps } from '../activities/notifications/delivery';
import { becomeCurrentIfNone, deploymentVersionOf, VERSIONING_BEHAVIOR } from './worker-deployment';
import { withoutWorkflowStackTraces } from './workflow-stack-traces';

/** Worker states past which its background rounds stop. */
const WORKER_ENDING = new Set(['STOPPING', 'DRAINING', 'DRAINED', 'STOPPED', 'FAILED']);

/** Workflow interceptor modules: a prebuilt bundle must be made with these too. */
export const WORKFLOW_INTERCEPTOR_MODULES = [require.resolve('../workflows/interceptors')];

export interface WardenWorkerOptions {
  readonly connection: NativeConnection;
  readonly namespace?: string;
  readonly taskQueue?: string;
  /**
   * This worker's host: its stages of an intent run on `<taskQueue>@<host>` once its worktree is
   * here (see host-worker.ts). Default: the name kept in the Warden home (beside `lineageRoot`).
   */
  readonly host?: string;
  readonly worktreeRoot: string;
  readonly lineageRoot: string;
  /** Where scheduled daily reports are written; default `reports` beside `lineageRoot` (`<Warden home>/reports`). */
  readonly reportsDir?: string;
  readonly ledger: Ledger;
  readonly logger: Logger;
  readonly redact: Redactor;
  /** Breakers, rate limits, prices and budgets of this worker (from the config file's profile). */
  readonly safety: WorkerSafetyConfig;
  /** Where agent profiles start on the automation ladder, and whether they may climb (config `automation`). */
  readonly automation?: LadderDefaults;
  /** `development` (default) refuses paid cloud model endpoints; `production` allows them (config `mode`). */
  readonly mode?: 'development' | 'production';
  /**
   * Only for the overhead benchmark (bench/pipeline.ts): false leaves out the agent-safety
   * activity interceptor and the stage-guard workflow interceptor, to measure what they cost.
   */
  readonly safetyInterceptors?: boolean;
  /** OpenTelemetry tracing (sinks and interceptors); the worker then bundles the workflows itself. */
  readonly tracing?: Tracing['worker'];
  /** Replaces global fetch for HTTP agents (tests point it nowhere else: they run local servers). */
  readonly fetch?: typeof fetch;
  /**
   * The model gateway command agents reach their model through. Without one the worker starts
   * its own, which lives as long as the process.
   */
  readonly gateway?: ModelGateway;
  /** A prebuilt bundle (the tests bundle once per run); otherwise the workflows are bundled in a child process. */
  readonly workflowBundle?: { readonly code: string };
  /** Replaces activities, e.g. to inject faults in tests. */
  readonly wrapActivities?: (activities: WardenActivities) => WardenActivities;
  /**
   * Kill switches besides the ledger's global stop (WARDEN_ENABLED=false → `enabled: false`).
   * Default: enabled, with the emergency stop file at `<cwd>/.warden/EMERGENCY_STOP`.
   */
  readonly killSwitch?: KillSwitchOptions;
  /**
   * The config every intent is completed from and checked against before it runs, however it was
   * started (see intent-completion.ts). Warden's own workers always have it; without it (tests
   * and benchmarks of other things) an intent is only checked against the schema.
   */
  readonly intentRules?: IntentRules;
  /** The config's `notify` channels: for events of no intent (intents carry their own). */
  readonly notify?: readonly NotifyChannel[];
  /** How the notification dispatcher polls and retries (defaults: DISPATCH_DEFAULTS). */
  readonly notifications?: Partial<Record<keyof typeof DISPATCH_DEFAULTS, number>>;
  /** Where a gate's notification links to (the web app's page for it). */
  readonly gateLink?: NotificationDeps['gateLink'];
  /**
   * Install the task queue's sweep and ledger anchor schedules and keep them (default true): what
   * terminated intents leave is then cleaned and recorded within a minute, and the ledger chain's
   * head is anchored every hour. Tests that sweep by hand turn it off.
   */
  readonly sweepSchedule?: boolean;
}

/** Builds the worker that runs intent workflows and their activities on one task queue. */
export async function createWardenWorker(options: WardenWorkerOptions): Promise<WardenWorker> {
  // The cascade model is needed by the first answer: ready before the worker polls, not trained
  // inside that answer, where seconds of CPU would hold up heartbeats.
  await readyCascadeModel(options.logger);
  const gateway = options.gateway ?? (await startWorkerGateway(options, { detached: true }));
  const sharedLimits = sharedLimitsOf(options);
  const client = new Client({ connection: options.connection, namespace: options.namespace });
  const intentStatus = temporalIntentStatus(client);
  const taskQueue = options.taskQueue ?? TASK_QUEUE;
  const hostQueue = hostQueueFor(taskQueue, options.host ?? defaultHostName(path.dirname(options.lineageRoot)));
  const recording = { ...RECORDING_DEFAULTS, ...options.safety.recording };
  const exchanges = new ExchangeStore(options.ledger.pool, recording);
  const activities = createActivities({
    hostQueue,
    ...(recording.enabled ? { recordContext: (intentId: string, context: RecordingContext) => exchanges.recordContext(intentId, context) } : {}),
    worktreeRoot: options.worktreeRoot,
    lineageRoot: options.lineageRoot,
    logger: options.logger,
    redact: options.redact,
    ledger: options.ledger,
    pricing: options.safety.pricing,
    automation: options.automation,
    dayBudgetUsd: options.safety.dayBudgetUsd,
    recordingKeep: options.safety.recording?.keep,
    reportsDir: options.reportsDir ?? path.join(path.dirname(options.lineageRoot), 'reports'),
    mode: options.mode,
    fetch: options.fetch,
    gateway,
    intentStatus,
    gateLink: options.gateLink,
    // The forge's tokens are read from this worker's environment when a pull request needs them.
    forge: { env: process.env, forgeClient, repositoryOf: (remoteUrl, settings) => forgeRepositoryFromRemote(remoteUrl, { kind: settings.kind, ...(settings.url ? { webUrl: settings.url } : {}) }) },
    intentRules: options.intentRules,
  });
  // Worktrees removed before a crash may still be in the trash: delete them in the background.
  void sweepTrash(trashOf(options.worktreeRoot));
  // Agents and test runs of a worker killed on this machine (SIGKILL, a crash) end now.
  endStrayProcesses(path.join(path.dirname(options.lineageRoot), 'processes'), options.logger);
  // Reservations of calls cut off by a crash are released once Temporal says their attempt is over.
  const reconcile = () => reconcileReservations(options.ledger, options.logger, attemptStillRunsOn(client));
  void reconcile();
  // Worktrees of intents that ended without their cleanup (terminated, timed out) go now, and
  // from then on every half minute (the schedule).
  void sweepAtStart(options, intentStatus);
  const keepSchedule = () => (options.sweepSchedule === false ? Promise.resolve() : keepTheSweepSchedule(client, options));
  void keepSchedule();
  const workflowModules = [...(options.safetyInterceptors === false ? [] : WORKFLOW_INTERCEPTOR_MODULES), ...(options.tracing?.workflowModules ?? [])];
  const workflowBundle =
    options.workflowBundle && !options.tracing && options.safetyInterceptors !== false ? options.workflowBundle : await bundleWorkflowsApart(workflowModules);
  const killSwitch = options.killSwitch ?? { enabled: true, emergencyStopFile: path.join(process.cwd(), DEFAULT_EMERGENCY_STOP_FILE) };
  if (options.safety.workflowHeapMb !== undefined) {
    // A V8 flag applies to isolates created after it is set: here, the workflow thread this worker
    // is about to start (the main thread's heap keeps its own limit).
    v8.setFlagsFromString(`--max-old-space-size=${options.safety.workflowHeapMb}`);
  }
  const deployment = options.safety.deployment ? deploymentVersionOf(options.safety.deployment, workflowBundle.code) : undefined;
  const activityOptions = {
    // Both workers of the host are one version: an intent on the current version runs its stages
    // on that version's host workers too.
    ...(deployment ? { workerDeploymentOptions: { useWorkerVersioning: true as const, version: deployment, defaultVersioningBehavior: VERSIONING_BEHAVIOR } } : {}),
    connection: options.connection,
    namespace: options.namespace,
    dataConverter: { payloadConverterPath: PAYLOAD_CONVERTER_PATH },
    activities: options.wrapActivities ? options.wrapActivities(activities) : activities,
    interceptors: {
      activity: [
        activityContextInterceptor(options.logger, options.redact),
        // Before the safety layers: a refused activity still leaves the rows it carried on record.
        carriedRowsInterceptor({ ledger: options.ledger, redact: options.redact, logger: options.logger }),
        ...(options.safetyInterceptors === false
          ? []
          : [
              agentSafetyInterceptor({
                ledger: options.ledger,
                config: options.safety,
                logger: options.logger,
                killSwitch,
                sharedLimits,
              }),
              // Inside agent-safety, whose audit row then records a refused activity too.
              stageKillSwitchInterceptor({ ledger: options.ledger, logger: options.logger, killSwitch }),
            ]),
        ...(options.tracing?.activity ?? []),
        // Innermost: an activity refused above never clones or pushes.
        hostPlacementInterceptor({ clonesRoot: path.join(path.dirname(options.lineageRoot), 'clones'), worktreeRoot: options.worktreeRoot }),
      ],
    },
    maxTaskQueueActivitiesPerSecond: options.safety.rateLimits.globalActivitiesPerSecond,
    // Both workers of the host measure the same machine: each holds back when it is above its targets.
    ...(options.safety.slots ? { tuner: { tunerOptions: { targetCpuUsage: options.safety.slots.targetCpu, targetMemoryUsage: options.safety.slots.targetMemory } } } : {}),
    // Cancellation reaches an activity on its next heartbeat: keep that within a second or so.
    // (The global stop does not wait for it: see GlobalStopWatch.)
    maxHeartbeatThrottleInterval: '1s',
    defaultHeartbeatThrottleInterval: '1s',
  } satisfies Partial<WorkerOptions>;
  const createShared = () =>
    Worker.create({
      ...activityOptions,
      taskQueue,
      workflowBundle,
      ...(options.tracing ? { sinks: options.tracing.sinks } : {}),
      ...(options.safety.maxCachedWorkflows !== undefined ? { maxCachedWorkflows: options.safety.maxCachedWorkflows } : {}),
    });
  const shared = options.safety.workflowStackTraces === true ? await createShared() : await withoutWorkflowStackTraces(createShared);
  // The stages of intents whose worktree is on this host: activities only.
  const worker = new WardenWorker(shared, await Worker.create({ ...activityOptions, taskQueue: hostQueue }), hostQueue);
  // Every notifiable ledger event becomes a delivery workflow, whichever worker recorded it.
  const dispatcher = new NotificationDispatcher({
    client,
    outbox: new NotificationOutbox(options.ledger.pool),
    taskQueue,
    logger: options.logger,
    channels: options.notify ?? [],
    ...options.notifications,
    running: () => !WORKER_ENDING.has(worker.getState()),
  });
  dispatcher.start();
  if (deployment) {
    options.logger.info({ deployment: deployment.deploymentName, buildId: deployment.buildId }, 'worker serves its deployment version (worker versioning on)');
    void becomeCurrentIfNone(client.workflowService, options.namespace ?? 'default', deployment, {
      identity: worker.identity,
      running: () => !WORKER_ENDING.has(worker.getState()),
      onError: (error) => options.logger.warn({ err: error, deployment: deployment.deploymentName }, 'could not read or set the deployment\'s current version; trying again'),
    }).then((outcome) => {
      if (outcome === 'made-current') options.logger.warn({ deployment: deployment.deploymentName, buildId: deployment.buildId }, 'the deployment had no current version: this worker\'s version is now current');
    });
  }
  // Again every minute while the worker lives: an attempt cut off just now is over only once
  // its heartbeat times out.
  const rounds = setInterval(() => {
    const state = worker.getState();
    if (state === 'STOPPED' || state === 'FAILED') clearInterval(rounds);
    else if (state === 'RUNNING') {
      void reconcile();
      void keepSchedule(); // someone may have deleted or changed it
    }
  }, RECONCILE_EVERY_MS);
  rounds.unref();
  return worker;
}

/** The sweep a starting worker runs (see sweeper.ts). Never throws: the schedule sweeps again within a minute. */
async function sweepAtStart(options: WardenWorkerOptions, intentStatus: IntentStatusReader): Promise<void> {
  try {
    const { sweepClosedIntents } = createSweepActivities({ ...options, intentStatus });
    const report = await sweepClosedIntents();
    if (report.swept.length > 0) options.logger.warn({ swept: report.swept.map((s) => s.intentId) }, 'swept intents that ended without their cleanup');
  } catch (error) {
    options.logger.warn({ err: error }, 'the sweep at worker start failed; the warden-sweep schedule tries again');
  }
}

/** Installs or checks the sweep and ledger anchor schedules. Never throws: the next round tries again. */
async function keepTheSweepSchedule(client: Client, options: WardenWorkerOptions): Promise<void> {
  const taskQueue = options.taskQueue ?? TASK_QUEUE;
  try {
    const change = await keepSweepSchedule(client, taskQueue);
    if (change !== 'kept') options.logger.info({ scheduleId: sweepScheduleId(taskQueue), change }, 'sweep schedule installed');
  } catch (error) {
    options.logger.warn({ err: error, scheduleId: sweepScheduleId(taskQueue) }, 'could not install the sweep schedule; the worker tries again in a minute');
  }
  // The hourly anchor of the ledger's hash chain, kept the same way.
  try {
    const change = await keepAnchorSchedule(client, taskQueue);
    if (change !== 'kept') options.logger.info({ scheduleId: anchorScheduleId(taskQueue), change }, 'ledger anchor schedule installed');
  } catch (error) {
    options.logger.warn({ err: error, scheduleId: anchorScheduleId(taskQueue) }, 'could not install the ledger anchor schedule; the worker tries again in a minute');
  }
}

/**
 * The limits a worker shares with the others through the ledger's database: rate buckets,
 * circuits and the error window, scoped by task queue (the workers serving one queue are the
 * fleet whose limits hold together; N of them admit what one would).
 */
function sharedLimitsOf(options: Pick<WardenWorkerOptions, 'ledger' | 'taskQueue'>): SharedLimits {
  return { store: new SharedLimitStore(options.ledger.pool), scope: options.taskQueue ?? TASK_QUEUE };
}

/** A model gateway with the worker's limits (shared with the other workers), secrets redaction and ledger. */
export function startWorkerGateway(
  options: Pick<WardenWorkerOptions, 'safety' | 'logger' | 'redact' | 'ledger' | 'fetch' | 'taskQueue'>,
  extra: { readonly detached?: boolean; readonly onCircuitChange?: GatewayOptions['onCircuitChange'] } = {},
): Promise<ModelGateway> {
  const recording = { ...RECORDING_DEFAULTS, ...options.safety.recording };
  return ModelGateway.start({
    shared: sharedLimitsOf(options),
    limits: options.safety,
    logger: options.logger,
    redact: options.redact,
    recordCall: (row) => options.ledger.modelCalls.record(row),
    recordEvent: (event) => options.ledger.audit.recordSafetyEvent(event),
    ...(recording.enabled ? { exchanges: new ExchangeStore(options.ledger.pool, recording) } : {}),
    // Replays are answered from recordings whether or not this worker records new ones.
    recordings: new ExchangeStore(options.ledger.pool, recording),
    fetch: options.fetch,
    detached: extra.detached,
    onCircuitChange: extra.onCircuitChange,
  });
}

/**
 * Kills what workers that died on this machine left running (their recorded process groups),
 * then records this worker's own. Bubblewrap and the pid namespace of the lower levels already
 * end a dead worker's processes; this catches what they cannot (a machine without namespaces).
 */
function endStrayProcesses(dir: string, logger: Logger): void {
  const strays = killStrays(dir);
  if (strays.length > 0) logger.warn({ strays: strays.map((s) => ({ pgid: s.pgid, command: s.label, worker: s.owner.pid })) }, 'killed process groups left by a worker that stopped without ending them');
  recordProcessesIn(dir);
}
