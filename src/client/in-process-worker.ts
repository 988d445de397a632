import path from 'node:path';
import type { WardenWorker } from '../workers/host-worker';
import { Runtime } from '@temporalio/worker';
import type { Logger } from 'pino';
import { serveUrl, type TelemetryConfig, type WardenConfig } from '../config/schema';
import { linkSecretOrWhyNot, type LinkSecret } from '../runtime/link-secret';
import { defaultApprover } from '../runtime/default-approver';
import { GateViewLinks } from '../ledger/gate-view-links';
import { gateLinks } from '../workers/gate-links';
import type { RuntimeConfig } from '../runtime/config';
import { createLogger } from '../runtime/logger';
import { pinoSdkLogger } from '../runtime/sdk-logger';
import type { TemporalTarget } from '../runtime/temporal';
import { createRedactor } from '../shared/redact';
import type { LadderLevel } from '../shared/ladder';
import { createWardenMetrics, type WardenMetrics } from '../workers/metrics';
import { startLedgerProbe, type LedgerProbe } from '../workers/ledger-probe';
import { hostOfQueue } from '../shared/ids';
import { createWardenWorker, startWorkerGateway } from '../workers/warden-worker';
import { startTracing, telemetryEnabled } from '../runtime/telemetry';
import { openOwnedLedger } from './open-ledger';

/**
 * A Warden worker in this process (`warden dev`, `warden worker`, and `warden run` while it
 * follows). Kept apart from session.ts: the worker, its activities and the SDK's native runtime
 * take most of a second to load, which commands that only read should not pay.
 */

/** A worker running in this process, and how to stop it. */
export interface RunningWorker {
  readonly worker: WardenWorker;
  /** The identity it polls with (pollers of the task queue are listed by it). */
  readonly identity: string;
  /** The host it is (its own task queue's name after the @). */
  readonly host: string;
  stop(): Promise<void>;
}

let runtimeInstalled = false;
let metricsServed = false;

/**
 * Installs the SDK runtime once per process: its own logging kept to warnings, so CLI output
 * stays readable, and written through `logger` (Warden's pino: JSON lines, secrets redacted);
 * with `telemetry.prometheus` set and WARDEN_TELEMETRY not 0, a Prometheus endpoint for the
 * SDK's metrics and Warden's own.
 */
export function quietSdkRuntime(telemetry: TelemetryConfig = {}, logger: Logger = createLogger('warn')): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  const prometheus = telemetryEnabled(process.env) ? telemetry.prometheus : undefined;
  Runtime.install({
    logger: pinoSdkLogger(logger),
    // Warden's commands handle Ctrl-C themselves (stop following, then stop what they started);
    // the SDK's own handlers would shut the worker down under them.
    shutdownSignals: [],
    ...(prometheus ? { telemetryOptions: { metrics: { prometheus: { bindAddress: prometheus } } } } : {}),
  });
  metricsServed = prometheus !== undefined;
}

/**
 * The decision-link secret, or why there is none (links then only show their gate): a worker
 * whose home is read-only, or whose secret file is unsafe, still runs, and says so.
 */
function workerLinkSecret(logger: Logger): LinkSecret {
  const linkSecret = linkSecretOrWhyNot();
  if (linkSecret.missing) logger.warn(`${linkSecret.missing}: notification links show the gate's page, but cannot decide (set WARDEN_LINK_SECRET)`);
  return linkSecret;
}

/** Starts a Warden worker in this process against `target`, with the ledger it writes to. */
export async function startWorker(target: TemporalTarget, config: RuntimeConfig, warden: WardenConfig, logger: Logger, host?: string, taskQueue?: string): Promise<RunningWorker> {
  quietSdkRuntime(warden.telemetry, logger);
  const { ledger, database } = await openOwnedLedger(config, (m) => logger.info(m));
  let probe: LedgerProbe | undefined;
  let metrics: WardenMetrics | undefined;
  if (metricsServed) {
    metrics = createWardenMetrics(Runtime.instance().metricMeter);
    ledger.writer.observer = metrics;
    const served = metrics;
    probe = startLedgerProbe({ pool: ledger.pool, report: (up) => served.ledgerReachable(up) });
    logger.info({ prometheus: warden.telemetry.prometheus }, 'metrics served at /metrics');
  }
  const tracing = startTracing(warden.telemetry.otlpEndpoint, 'warden-worker');
  const redact = createRedactor(process.env);
  const gateway = await startWorkerGateway({ safety: warden.worker, logger, redact, ledger }, { onCircuitChange: (change) => metrics?.circuitChanged(change) });
  const worker = await createWardenWorker({
    tracing: tracing?.worker,
    connection: await target.nativeConnection(),
    namespace: target.namespace,
    worktreeRoot: config.worktreeRoot,
    lineageRoot: config.lineageRoot,
    ...(host ? { host } : {}),
    ...(taskQueue ? { taskQueue } : {}),
    ledger,
    logger,
    redact,
    gateway,
    safety: warden.worker,
    mode: warden.mode,
    notify: warden.notify,
    // Every intent this worker runs obeys its config, however it was started.
    intentRules: { config: warden, embeddedServer: Boolean(target.embedded) },
    // A channel with no approver decides as the operator, as `warden approve` without --by does.
    gateLink: gateLinks({ baseUrl: serveUrl(warden.serve), operator: defaultApprover(warden.operator), linkSecret: workerLinkSecret(logger), views: new GateViewLinks(ledger.pool) }),
    automation: { level: warden.automation.level as LadderLevel, allowLevelUp: warden.automation.allowLevelUp },
    // WARDEN_ENABLED=false or an EMERGENCY_STOP file: this worker starts no agent work.
    killSwitch: { enabled: process.env.WARDEN_ENABLED !== 'false', emergencyStopFile: path.join(config.wardenHome, 'EMERGENCY_STOP') },
  });
  const running = worker.run();
  return {
    worker,
    identity: worker.identity,
    host: hostOfQueue(worker.hostQueue),
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
      probe?.stop();
      await gateway.close();
      await tracing?.shutdown();
      await database.close();
    },
  };
}
