import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import type { StageResult } from '../../../activities';
import { activityLogger } from '../../../activities/log-context';
import type { Severity } from '../../../shared/safety-events';
import { normalizeUsd } from '../../../shared/money';
import { FailureType } from '../../../shared/errors';
import type { AgentCall, SafetyLayer } from './safety-layer';

const CASCADE_SEVERITY = { LOW: 'low', MEDIUM: 'medium', HIGH: 'high', CRITICAL: 'critical' } as const satisfies Record<string, Severity>;
const CASCADE_SUGGESTION = {
  LOW: 'Nothing to do now; a pattern of these from one agent is worth a look.',
  MEDIUM: "Read the stage's artifact before approving the next gate.",
  HIGH: 'A human must decide the next gate: do not auto-approve it. Read the artifact and check the work stays within the intent.',
  CRITICAL: 'The intent was halted. Read the artifact, then rewind or restart the intent with a narrower prompt.',
} as const;

/**
 * The cascade the stage found in the agent's answer: LOW…HIGH is one CASCADE_DETECTED event;
 * CRITICAL is recorded and halts the intent (a non-retryable SAFETY_HALT).
 */
export class CascadeLayer implements SafetyLayer {
  constructor(private readonly logger: Logger) {}

  async answered(call: AgentCall, result: StageResult): Promise<void> {
    const costUsd = normalizeUsd(result.costUsd);
    const cascade = result.safety?.cascade;
    if (!cascade || cascade.level === 'NONE') return;
    const stage = call.ref.stage ?? 'agent';
    const reason = `${stage} output reads as a ${cascade.level} cascade (score ${cascade.score.toFixed(2)}): ${cascade.patterns.slice(0, 3).join(' | ')}`;
    const eventId = await call.event('CASCADE_DETECTED', CASCADE_SEVERITY[cascade.level], reason.slice(0, 1000), {
      suggestion: CASCADE_SUGGESTION[cascade.level],
      metadata: {
        level: cascade.level,
        score: cascade.score,
        patterns: cascade.patterns,
        artifactPath: result.artifactPath,
        pattern: `cascade-${cascade.level.toLowerCase()}`,
        ...(result.safety?.judge ? { judge: result.safety.judge } : {}),
      },
    });
    if (cascade.level !== 'CRITICAL') return;
    activityLogger(this.logger).error({ cascade: cascade.level, score: cascade.score, eventId, costUsd }, 'critical cascade: halting the intent');
    // No details: the workflow writes a SafetyEvent from a SAFETY_HALT's details, and this one
    // is already written (its cost is in activity_runs).
    throw ApplicationFailure.create({
      type: FailureType.SafetyHalt,
      message: `CASCADE_DETECTED: critical cascade in ${stage} output (score ${cascade.score.toFixed(2)}); the intent is halted (event ${eventId})`,
      nonRetryable: true,
    });
  }
}
