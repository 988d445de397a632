import { ApplicationFailure } from '@temporalio/common';
import type { StageResult } from '../../../activities';
import type { WorkerSafetyConfig } from '../../../config/schema';
import type { SharedLimits } from '../../../ledger/shared-limits';
import { SharedRateLimiter } from '../../../ledger/shared-rate-limiter';
import { agentModelConfig, LocalRateLimits, OwedTokenLimits } from '../../../safety/rate-limits';
import { FailureType } from '../../../shared/errors';
import { MIN_RETRY_DELAY_MS } from '../failures';
import type { AgentCall, SafetyLayer } from './safety-layer';

/**
 * Token buckets per agent and per model. A call takes one request; the tokens an answer used are
 * not known before it, so they are owed and charged at the next call of the same agent and model
 * (never more than a bucket holds). A refusal is one RATE_LIMIT_BLOCK event and a retryable
 * RATE_LIMITED whose `nextRetryDelay` is the time until the buckets have refilled. An agent whose
 * calls go through the model gateway is limited there, call by call. With `shared`, the buckets
 * are every worker's (rows of the ledger's database), so N workers admit what one would.
 */
export class RateLimitLayer implements SafetyLayer {
  private readonly limiter: OwedTokenLimits;

  constructor(rateLimits: WorkerSafetyConfig['rateLimits'], shared?: SharedLimits) {
    const config = agentModelConfig(rateLimits);
    this.limiter = new OwedTokenLimits(shared ? new SharedRateLimiter(shared.store, config, shared.scope) : new LocalRateLimits(config), rateLimits);
  }

  async admit(call: AgentCall): Promise<void> {
    if (call.viaGateway) return;
    const { agentId, modelId } = call.agent;
    // The buckets may be the ledger's (shared by every worker): an unreachable ledger is waited out, heartbeating.
    const admitted = await this.limiter.take(agentId, modelId, (take) => call.patiently('take from the rate buckets', take));
    if (!admitted.ok) {
      const waitMs = Math.max(MIN_RETRY_DELAY_MS, admitted.retryAfterMs);
      const which = admitted.refusals.map((r) => `${r.scope} ${r.key} ${r.limit}/min`).join(', ');
      await call.event('RATE_LIMIT_BLOCK', 'low', `rate limit: ${which} exhausted; the ${call.ref.stage ?? 'agent'} call waits ${waitMs} ms`, {
        suggestion: 'Nothing to do: the call is retried when the bucket has refilled. Raise worker.rateLimits if this is routine.',
        metadata: { retryAfterMs: waitMs, refusals: admitted.refusals },
      });
      throw ApplicationFailure.create({
        type: FailureType.RateLimited,
        message: `rate limited (${which}); retry in ${waitMs} ms`,
        nextRetryDelay: waitMs,
        details: [{ retryAfterMs: waitMs, refusals: admitted.refusals }],
      });
    }
  }

  /** The tokens the answer used are owed to the buckets. */
  async answered(call: AgentCall, result: StageResult): Promise<void> {
    if (call.viaGateway) return;
    this.limiter.owe(call.agent.agentId, call.agent.modelId, result.inputTokens + result.outputTokens);
  }
}
