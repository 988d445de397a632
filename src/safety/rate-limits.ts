/**
 * The rate limits the model gateway and the rate-limit layer take from, at a clock of their own:
 * this process's buckets at `Date.now()` (LocalRateLimits, for a gateway or layer without a
 * ledger, as in unit tests) or buckets every worker shares at the database's clock
 * (src/ledger/shared-rate-limiter.ts). Both apply RateLimiter's arithmetic.
 *
 * NOT workflow-safe: reads `Date.now()`.
 */
import { RateLimiter, type RateLimitConfig, type RateLimitRequest, type RateLimitResult, type RateLimitRule } from './token-bucket';

/** A call to admit; the time is the limits' own. */
export type RateLimitCall = Omit<RateLimitRequest, 'at'>;

export interface RateLimits {
  /** Admits the call (taking 1 request and `tokens` tokens from each bucket that applies) or explains the wait. */
  take(call: RateLimitCall): Promise<RateLimitResult>;
}

/** One process's buckets. */
export class LocalRateLimits implements RateLimits {
  private readonly limiter: RateLimiter;

  constructor(config: RateLimitConfig) {
    this.limiter = new RateLimiter(config);
  }

  async take(call: RateLimitCall): Promise<RateLimitResult> {
    return this.limiter.take({ ...call, at: Date.now() });
  }
}

/** Per-agent and per-model limits, one bucket each per agent and per model: how the gateway and the rate-limit layer configure their buckets. */
export interface AgentModelLimits {
  readonly perAgent: RateLimitRule & { readonly tokensPerMinute: number };
  readonly perModel: RateLimitRule & { readonly tokensPerMinute: number };
}

/** The bucket config of `limits`: every agent and every model alike. */
export function agentModelConfig(limits: AgentModelLimits): RateLimitConfig {
  return { agents: { '*': limits.perAgent }, models: { '*': limits.perModel } };
}

/**
 * Rate limits for agent calls whose tokens are known only once the answer is in: a call takes one
 * request and the tokens its agent and model owe from earlier answers (never more than a bucket
 * holds); `owe` records what an answer used.
 */
export class OwedTokenLimits {
  private readonly debt = new Map<string, number>();
  private readonly capacity: number;

  constructor(
    private readonly limits: RateLimits,
    rules: AgentModelLimits,
  ) {
    this.capacity = Math.min(rules.perAgent.tokensPerMinute, rules.perModel.tokensPerMinute);
  }

  /** Takes for a call of `agent` on `model`; `around` runs the take (to wait out an unreachable shared store, say). */
  async take(agent: string, model: string, around: (take: () => Promise<RateLimitResult>) => Promise<RateLimitResult> = (take) => take()): Promise<RateLimitResult> {
    const key = debtKeyOf(agent, model);
    const owed = Math.min(this.debt.get(key) ?? 0, this.capacity);
    // Taken off before the (possibly shared, awaited) take so that two calls at once do not both pay it; given back if not paid.
    this.add(key, -owed);
    let result: RateLimitResult;
    try {
      result = await around(() => this.limits.take({ agent, model, tokens: owed }));
    } catch (error) {
      this.add(key, owed);
      throw error;
    }
    if (!result.ok) this.add(key, owed);
    return result;
  }

  /** An answer of `agent` on `model` used `tokens`: charged to the buckets at its next call. */
  owe(agent: string, model: string, tokens: number): void {
    this.add(debtKeyOf(agent, model), tokens);
  }

  private add(key: string, tokens: number): void {
    this.debt.set(key, (this.debt.get(key) ?? 0) + tokens);
  }
}

function debtKeyOf(agent: string, model: string): string {
  return JSON.stringify([agent, model]);
}
