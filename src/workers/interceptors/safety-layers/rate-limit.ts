import { ApplicationFailure } from '@temporalio/common';
import type { StageResult } from '../../../activities';
import type { WorkerSafetyConfig } from '../../../config/schema';
import type { SharedLimits } from '../../../ledger/shared-limits';
import { SharedRateLimiter } from '../../../ledger/shared-rate-limiter';
import { LocalRateLimits, type RateLimits } from '../../../safety/rate-limits';
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
  private readonly limiter: RateLimits;
  /** Tokens used by past calls, charged to the buckets at the next call of the same agent and model. */
  private readonly tokenDebt = new Map<string, number>();
  private readonly tokenCapacity: number;

  constructor(rateLimits: WorkerSafetyConfig['rateLimits'], shared?: SharedLimits) {
    const config = { agents: { '*': rateLimits.perAgent }, models: { '*': rateLimits.perModel } };
    this.limiter = shared ? new SharedRateLimiter(shared.store, config, shared.scope) : new LocalRateLimits(config);
    this.tokenCapacity = Math.min(rateLimits.perAgent.tokensPerMinute, rateLimits.perModel.tokensPerMinute);
  }

  async admit(call: AgentCall): Promise<void> {
    if (call.viaGateway) return;
    const { agentId, modelId } = call.agent;
    const key = debtKeyOf(call);
    const owed = Math.min(this.tokenDebt.get(key) ?? 0, this.tokenCapacity);
    // Taken off before the (shared, awaited) take so that two calls at once do not both pay it; given back if not paid.
    this.tokenDebt.set(key, (this.tokenDebt.get(key) ?? 0) - owed);
    const repay = (): void => void this.tokenDebt.set(key, (this.tokenDebt.get(key) ?? 0) + owed);
    // The buckets may be the ledger's (shared by every worker): an unreachable ledger is waited out, heartbeating.
    const admitted = await call.patiently('take from the rate buckets', () => this.limiter.take({ agent: agentId, model: modelId, tokens: owed })).catch((error: unknown) => {
      repay();
      throw error;
    });
    if (!admitted.ok) {
      repay();
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
    const key = debtKeyOf(call);
    this.tokenDebt.set(key, (this.tokenDebt.get(key) ?? 0) + result.inputTokens + result.outputTokens);
  }
}

function debtKeyOf(call: AgentCall): string {
  return JSON.stringify([call.agent.agentId, call.agent.modelId]);
}
