import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import type { StageResult } from '../../../activities';
import { activityLogger } from '../../../activities/log-context';
import type { Ledger } from '../../../ledger/ledger';
import type { Finding } from '../../../safety/behaviour-monitor';
import { BehaviourWatch, recentAgentRuns } from '../../../safety/behaviour-watch';
import { normalizeUsd } from '../../../shared/money';
import { FailureType } from '../../../shared/errors';
import { messageOf } from '../failures';
import type { AgentCall, SafetyLayer } from './safety-layer';

/**
 * The behaviour monitor over every agent call of this worker (baselines seeded from the ledger's
 * past runs). Each attempt, answered or failed (not cancelled), and the circuit changes it saw
 * are fed to it; each finding is one ANOMALY_DETECTED event. A CRITICAL finding halts the intent
 * here (a non-retryable SAFETY_HALT without details: its event is written); HIGH ones reach the
 * workflow with the intent's next answer, which holds it at the anomaly gate.
 */
export class BehaviourLayer implements SafetyLayer {
  private readonly watch: BehaviourWatch;

  constructor(
    ledger: Ledger,
    private readonly logger: Logger,
  ) {
    this.watch = new BehaviourWatch(() => recentAgentRuns(ledger.pool));
  }

  /** Waits for the baselines; past runs that cannot be read leave them empty, never refusing the call. */
  async admit(_call: AgentCall): Promise<void> {
    await this.watch.ready((error) => activityLogger(this.logger).warn({ error: messageOf(error) }, 'could not read past agent runs; behaviour baselines start empty'));
  }

  async failed(call: AgentCall, _error: unknown): Promise<void> {
    if (!call.ctx.cancellationSignal.aborted) await this.observe(call, undefined);
  }

  /** Observes the answer, then hands the intent's pending findings to the workflow with it. */
  async answered(call: AgentCall, result: StageResult): Promise<StageResult> {
    await this.observe(call, result);
    const anomalies = this.watch.deliver(call.ref.intentId ?? call.ref.workflowId);
    return anomalies.length > 0 ? { ...result, safety: { ...result.safety, anomalies } } : result;
  }

  private async observe(call: AgentCall, result: StageResult | undefined): Promise<void> {
    const { ref, agent, input } = call;
    const intentId = ref.intentId ?? ref.workflowId;
    const now = Date.now();
    const findings: Finding[] = [
      ...this.watch.breakerChanges(call.circuitChanges, intentId),
      ...this.watch.agentCall({
        intentId,
        stage: input.stage,
        agentId: agent.agentId,
        modelId: agent.modelId,
        request: { feedback: input.feedback, conditions: input.conditions },
        outputHash: result?.safety?.outputHash,
        costUsd: result ? normalizeUsd(result.costUsd) : '0',
        latencyMs: now - ref.startedMs,
        at: now,
      }),
    ];
    for (const [i, finding] of findings.entries()) {
      activityLogger(this.logger).warn({ anomaly: finding.kind, severity: finding.severity, reason: finding.reason }, 'behaviour monitor finding');
      await call.event('ANOMALY_DETECTED', finding.severity, finding.reason.slice(0, 1000), {
        key: `monitor:${finding.kind}:${i}`,
        ...(finding.endpoint ? { breakerId: finding.endpoint } : {}),
        suggestion: finding.suggestion,
        metadata: { kind: finding.kind, monitor: 'behaviour', pattern: `anomaly-${finding.kind}` },
      });
    }
    const critical = findings.find((f) => f.severity === 'critical');
    if (critical) {
      throw ApplicationFailure.create({
        type: FailureType.SafetyHalt,
        message: `ANOMALY_DETECTED: critical ${critical.kind} in ${ref.stage ?? 'agent'}: ${critical.reason}`.slice(0, 2000),
        nonRetryable: true,
      });
    }
  }
}
