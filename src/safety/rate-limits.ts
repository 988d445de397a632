/**
 * The rate limits the model gateway and the rate-limit layer take from, at a clock of their own:
 * this process's buckets at `Date.now()` (LocalRateLimits, for a gateway or layer without a
 * ledger, as in unit tests) or buckets every worker shares at the database's clock
 * (src/ledger/shared-rate-limiter.ts). Both apply RateLimiter's arithmetic.
 *
 * NOT workflow-safe: reads `Date.now()`.
 */
import { RateLimiter, type RateLimitConfig, type RateLimitRequest, type RateLimitResult } from './token-bucket';

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
