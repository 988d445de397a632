import type { Logger } from 'pino';
import type { WardenConfig } from '../config/schema';
import type { RuntimeConfig } from '../runtime/config';
import { connectTemporal, type TemporalTarget } from '../runtime/temporal';
import { workflowIdForIntent } from '../shared/ids';
import type * as InProcessWorker from './in-process-worker';
import type { RunningWorker } from './in-process-worker';

export type { RunningWorker } from './in-process-worker';

/** Starts a Warden worker in this process (see in-process-worker.ts); loaded only by the commands that run one. */
export async function startWorker(target: TemporalTarget, config: RuntimeConfig, warden: WardenConfig, logger: Logger, host?: string, taskQueue?: string): Promise<RunningWorker> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only when a worker runs
  const { startWorker: start } = require('./in-process-worker') as typeof InProcessWorker;
  return start(target, config, warden, logger, host, taskQueue);
}

/** Link to an intent in the Temporal Web UI. */
export function webUiLink(target: TemporalTarget, intentId: string): string | undefined {
  return target.uiUrl ? `${target.uiUrl}/namespaces/${target.namespace}/workflows/${workflowIdForIntent(intentId)}` : undefined;
}

export { connectTemporal };
export { openLedger, openOwnedLedger } from './open-ledger';
export { hasLiveWorker } from './worker-presence';
