import type { RateLimitCall, RateLimits } from '../safety/rate-limits';
import { RateLimiter, type RateLimitConfig, type RateLimitResult, type TokenBucketState } from '../safety/token-bucket';
import { sharedLimitKey, type SharedLimitStore } from './shared-limits';

/**
 * Per-agent and per-model token buckets that every worker of a scope takes from: one row per
 * bucket. Each call locks the buckets it needs, restores a RateLimiter from their rows, takes at
 * the database's time and writes back what it took, so N workers admit what one would, and the
 * arithmetic (and the refusal with its retry-after) is RateLimiter's, the same as in memory.
 */
export class SharedRateLimiter implements RateLimits {
  /** Only for the bucket ids of a call: its buckets hold nothing. */
  private readonly ids: RateLimiter;

  constructor(
    private readonly store: SharedLimitStore,
    private readonly config: RateLimitConfig,
    private readonly scope: string,
  ) {
    this.ids = new RateLimiter(config);
  }

  async take(call: RateLimitCall): Promise<RateLimitResult> {
    const ids = this.ids.bucketIds(call.agent, call.model);
    if (ids.length === 0) return { ok: true };
    const keys = ids.map((id) => sharedLimitKey(this.scope, 'rate', id));
    return this.store.update<RateLimitResult>(keys, (states, now) => {
      const saved: Record<string, TokenBucketState> = {};
      ids.forEach((id, i) => {
        const state = states.get(keys[i]!);
        if (state !== undefined) saved[id] = state as TokenBucketState;
      });
      const limiter = new RateLimiter(this.config, { buckets: saved });
      const result = limiter.take({ ...call, at: now });
      // A refusal takes nothing: the rows stay as they are.
      if (!result.ok) return { result };
      const after = limiter.toJSON().buckets;
      return { result, write: new Map(ids.map((id, i) => [keys[i]!, after[id]])) };
    });
  }
}
