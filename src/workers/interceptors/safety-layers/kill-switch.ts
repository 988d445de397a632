import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import { activityLogger } from '../../../activities/log-context';
import type { Ledger } from '../../../ledger/ledger';
import { FailureType } from '../../../shared/errors';
import { failureTypeOf, messageOf } from '../failures';
import { killSwitchOn, type KillSwitchOn, type KillSwitchOptions } from '../ledger-patience';
import { StartedWork, type AgentCall, type SafetyLayer } from './safety-layer';

/**
 * The kill switches: a stopped system starts no new agent work. Before the call, WARDEN_ENABLED,
 * the emergency stop file and the ledger's global stop flag are read → non-retryable KILL_SWITCH
 * and one INTENT_STOPPED event. A running agent stopped by the global stop flag (it fails with
 * KILL_SWITCH) gets its INTENT_STOPPED event here too.
 */
export class KillSwitchLayer implements SafetyLayer {
  private readonly stopFile: string;
  private readonly looks = new StartedWork<KillSwitchOn | undefined>();

  constructor(private readonly deps: { readonly ledger: Ledger; readonly logger: Logger; readonly killSwitch: KillSwitchOptions }) {
    this.stopFile = path.resolve(deps.killSwitch.emergencyStopFile);
  }

  look(call: AgentCall): void {
    this.looks.start(call, () => this.read(call));
  }

  async admit(call: AgentCall): Promise<void> {
    const stop = await (this.looks.take(call) ?? this.read(call));
    if (!stop) return;
    activityLogger(this.deps.logger).warn({ killSwitch: stop.source, reason: stop.reason }, 'kill switch is on: refusing to start agent work');
    const eventId = await call.event('INTENT_STOPPED', 'high', `kill switch (${stop.source}): ${stop.reason}; the ${call.ref.stage ?? 'agent'} call was not started`, {
      suggestion: stop.suggestion,
      metadata: { killSwitch: stop.source },
    });
    throw ApplicationFailure.create({
      type: FailureType.KillSwitch,
      message: `kill switch (${stop.source}): ${stop.reason}`,
      nonRetryable: true,
      details: [{ eventId, source: stop.source }],
    });
  }

  private read(call: AgentCall): Promise<KillSwitchOn | undefined> {
    return killSwitchOn(this.deps.killSwitch.enabled, this.stopFile, () => call.patiently('read the global stop flag', () => this.deps.ledger.globalStop.current()));
  }

  async failed(call: AgentCall, error: unknown): Promise<void> {
    if (failureTypeOf(error) !== FailureType.KillSwitch) return;
    activityLogger(this.deps.logger).warn({ killSwitch: 'global_stop' }, 'kill switch is on: stopped the running agent');
    await call.event('INTENT_STOPPED', 'high', `${messageOf(error)} (${call.ref.stage ?? 'agent'} stage)`, {
      suggestion: 'Once it is safe: warden unlock --reason TEXT, then resume the intent.',
      metadata: { killSwitch: 'global_stop', midRun: true },
    });
  }
}
