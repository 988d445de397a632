import { ApplicationFailure } from '@temporalio/common';
import type { StageResult } from '../../../activities';
import type { WorkerSafetyConfig } from '../../../config/schema';
import { RateLimiter } from '../../../safety/token-bucket';
import { FailureType } from '../../../shared/errors';
import { MIN_RETRY_DELAY_MS } from '../failures';
import type { AgentCall, SafetyLayer } from './safety-layer';

/**
 * Token buckets per agent and per model. A call takes one request; the tokens an answer used are
 * not known before it, so they are owed and charged at the next call of the same agent and model
 * (never more than a bucket holds). A refusal is one RATE_LIMIT_BLOCK event and a retryable
 * RATE_LIMITED whose `nextRetryDelay` is the time until the buckets have refilled. An agent whose
 * calls go through the model gateway is limited there, call by call.
 */
export class RateLimitLayer implements SafetyLayer {
  private readonly limiter: RateLimiter;
  /** Tokens used by past calls, charged to the buckets at the next call of the same agent and model. */
  private readonly tokenDebt = new Map<string, number>();
  private readonly tokenCapacity: number;

  constructor(rateLimits: WorkerSafetyConfig['rateLimits']) {
    this.limiter = new RateLimiter({ agents: { '*': rateLimits.perAgent }, models: { '*': rateLimits.perModel } });
    this.tokenCapacity = Math.min(rateLimits.perAgent.tokensPerMinute, rateLimits.perModel.tokensPerMinute);
  }

  async admit(call: AgentCall): Promise<void> {
    if (call.viaGateway) return;
    const { agentId, modelId } = call.agent;
    const key = debtKeyOf(call);
    const owed = Math.min(this.tokenDebt.get(key) ?? 0, this.tokenCapacity);
    const admitted = this.limiter.take({ agent: agentId, model: modelId, tokens: owed, at: Date.now() });
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
    this.tokenDebt.set(key, (this.tokenDebt.get(key) ?? 0) - owed);
  }

  /** The tokens the answer used are owed to the buckets. */
  async answered(call: AgentCall, result: StageResult): Promise<void> {
    if (call.viaGateway) return;
    const key = debtKeyOf(call);
    this.tokenDebt.set(key, (this.tokenDebt.get(key) ?? 0) + result.inputTokens + result.outputTokens);
  }
}

function debtKeyOf(call: AgentCall): string {
  return JSON.stringify([call.agent.agentId, call.agent.modelId]);
}
