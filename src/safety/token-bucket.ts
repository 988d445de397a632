/**
 * Token buckets: one bucket, and a keyed set with requests-per-minute and tokens-per-minute limits
 * per agent and per model.
 *
 * Workflow-safe: pure, no Node built-ins, no clocks (times are passed in), state is plain data.
 * Arithmetic is in integers — a bucket's level is kept in token·ms/min units — so a refill lands
 * on exactly the millisecond it should, with no float drift.
 *
 * Our own code because no maintained limiter takes the time from its caller: rate-limiter-flexible
 * 11 reads the system clock, arms a timer per key and answers through Promises (and counts in
 * fixed windows, not a continuously refilled bucket; its RateLimiterUnion consumes from the limits
 * that said yes even when another said no); limiter 4 reads the monotonic clock and waits on
 * timers. Neither could run in workflow code, restore from `toJSON`, or be tested at exact times.
 */

/** Size and refill rate of one bucket; both positive integers. */
export interface TokenBucketOptions {
  /** Most tokens the bucket holds: the burst size. */
  readonly capacity: number;
  /** Tokens added per minute, continuously (1 per 60 000/refillPerMinute ms). */
  readonly refillPerMinute: number;
}

/** Serialisable state of one bucket. */
export interface TokenBucketState {
  /** Level in token·ms/min units (tokens × 60 000), an integer. */
  readonly level: number;
  readonly updatedAt: number;
}

/** `take`'s answer. `retryAfterMs` is the wait until `n` tokens are there (never, if over capacity). */
export type TakeResult =
  | { readonly ok: true }
  | { readonly ok: false; readonly retryAfterMs: number; readonly exceedsCapacity: boolean };

const MS_PER_MINUTE = 60_000;

/** Wait reported for a request larger than the bucket: JSON-safe, unlike Infinity. */
export const NEVER_MS = Number.MAX_SAFE_INTEGER;

function positiveInteger(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value <= 0) throw new RangeError(`${name} must be a positive integer, got ${value}`);
  return value;
}

/**
 * A token bucket that starts full. `take(n, at)` either takes `n` tokens or says how long to wait;
 * a refusal takes nothing. Times that go backwards are treated as "no time passed".
 */
export class TokenBucket {
  private readonly capacity: number;
  private readonly refillPerMinute: number;
  private level: number;
  private updatedAt: number | undefined;

  constructor(options: TokenBucketOptions, state?: TokenBucketState) {
    this.capacity = positiveInteger('capacity', options.capacity);
    this.refillPerMinute = positiveInteger('refillPerMinute', options.refillPerMinute);
    this.level = state ? Math.min(state.level, this.full) : this.full;
    this.updatedAt = state?.updatedAt;
  }

  private get full(): number {
    return this.capacity * MS_PER_MINUTE;
  }

  /** Tokens available at `at` (fractional while refilling). */
  available(at: number): number {
    return this.levelAt(at) / MS_PER_MINUTE;
  }

  /** Would `take(n, at)` succeed? Changes nothing. */
  peek(n: number, at: number): TakeResult {
    const need = this.need(n);
    if (need > this.full) return { ok: false, retryAfterMs: NEVER_MS, exceedsCapacity: true };
    const level = this.levelAt(at);
    if (level >= need) return { ok: true };
    return { ok: false, retryAfterMs: Math.ceil((need - level) / this.refillPerMinute), exceedsCapacity: false };
  }

  /** Takes `n` tokens at `at` if they are there; otherwise takes nothing and returns the wait. */
  take(n: number, at: number): TakeResult {
    const result = this.peek(n, at);
    this.advance(at);
    if (result.ok) this.level -= this.need(n);
    return result;
  }

  /** Plain-data state, for workflow state or `continueAsNew`. */
  toJSON(): TokenBucketState {
    return { level: this.level, updatedAt: this.updatedAt ?? 0 };
  }

  private need(n: number): number {
    if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`token count must be a non-negative integer, got ${n}`);
    return n * MS_PER_MINUTE;
  }

  private levelAt(at: number): number {
    if (this.updatedAt === undefined || at <= this.updatedAt) return this.level;
    return Math.min(this.full, this.level + (at - this.updatedAt) * this.refillPerMinute);
  }

  private advance(at: number): void {
    if (this.updatedAt === undefined || at > this.updatedAt) {
      this.level = this.levelAt(at);
      this.updatedAt = at;
    }
  }
}

// ─── Keyed limits: per agent and per model ─────────────────────────────────────────────────────

/** Limits of one agent or one model. Either may be left out; burst defaults to one minute's worth. */
export interface RateLimitRule {
  readonly requestsPerMinute?: number;
  readonly tokensPerMinute?: number;
  readonly requestBurst?: number;
  readonly tokenBurst?: number;
}

/** Rules per agent id and per model id; `*` gives every id without its own rule a bucket of its own with these limits. */
export interface RateLimitConfig {
  readonly agents?: Readonly<Record<string, RateLimitRule>>;
  readonly models?: Readonly<Record<string, RateLimitRule>>;
}

/** One call to admit: who makes it, on which model, and how many tokens it may use at most. */
export interface RateLimitRequest {
  readonly agent: string;
  readonly model: string;
  readonly tokens: number;
  readonly at: number;
}

/** Which bucket refused a call. */
export interface RateLimitRefusal {
  readonly scope: 'agent' | 'model';
  readonly key: string;
  readonly limit: 'requests' | 'tokens';
  readonly retryAfterMs: number;
  readonly exceedsCapacity: boolean;
}

/** `RateLimiter.take`'s answer: ok, or the longest wait among the refusing buckets and all refusals. */
export type RateLimitResult =
  | { readonly ok: true }
  | { readonly ok: false; readonly retryAfterMs: number; readonly refusals: readonly RateLimitRefusal[] };

/** Serialisable state of a `RateLimiter`: bucket states by bucket id. */
export interface RateLimiterState {
  readonly buckets: Readonly<Record<string, TokenBucketState>>;
}

interface BucketRef {
  readonly id: string;
  readonly scope: 'agent' | 'model';
  readonly key: string;
  readonly limit: 'requests' | 'tokens';
  readonly options: TokenBucketOptions;
  readonly amount: number;
}

/**
 * Per-agent and per-model requests-per-minute and tokens-per-minute buckets, created on first use.
 * A call is admitted only if every applicable bucket has room, and then takes from all of them:
 * a refusal by one bucket takes nothing from the others.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, TokenBucket>();
  /** Restored bucket states, turned into buckets when first used. */
  private readonly saved: Record<string, TokenBucketState>;

  constructor(
    private readonly config: RateLimitConfig,
    state?: RateLimiterState,
  ) {
    this.saved = { ...(state?.buckets ?? {}) };
  }

  /** Admits the call (taking 1 request and `tokens` tokens) or explains the wait. */
  take(request: RateLimitRequest): RateLimitResult {
    const refs = this.refsFor(request);
    const refusals: RateLimitRefusal[] = [];
    for (const ref of refs) {
      const result = this.bucket(ref).peek(ref.amount, request.at);
      if (!result.ok) {
        refusals.push({ scope: ref.scope, key: ref.key, limit: ref.limit, retryAfterMs: result.retryAfterMs, exceedsCapacity: result.exceedsCapacity });
      }
    }
    if (refusals.length) {
      return { ok: false, retryAfterMs: Math.max(...refusals.map((r) => r.retryAfterMs)), refusals };
    }
    for (const ref of refs) this.bucket(ref).take(ref.amount, request.at);
    return { ok: true };
  }

  /** Ids of the buckets a call of `agent` on `model` takes from (none when no rule applies): what a shared store keys them by. */
  bucketIds(agent: string, model: string): string[] {
    return this.refsFor({ agent, model, tokens: 0, at: 0 }).map((ref) => ref.id);
  }

  /** Plain-data state of every bucket used so far. */
  toJSON(): RateLimiterState {
    const buckets: Record<string, TokenBucketState> = { ...this.saved };
    for (const [id, bucket] of this.buckets) buckets[id] = bucket.toJSON();
    return { buckets };
  }

  private refsFor(request: RateLimitRequest): BucketRef[] {
    const refs: BucketRef[] = [];
    const add = (scope: 'agent' | 'model', key: string, rule: RateLimitRule | undefined): void => {
      if (!rule) return;
      if (rule.requestsPerMinute !== undefined) {
        refs.push({
          id: JSON.stringify([scope, key, 'requests']),
          scope, key, limit: 'requests', amount: 1,
          options: { capacity: rule.requestBurst ?? rule.requestsPerMinute, refillPerMinute: rule.requestsPerMinute },
        });
      }
      if (rule.tokensPerMinute !== undefined) {
        refs.push({
          id: JSON.stringify([scope, key, 'tokens']),
          scope, key, limit: 'tokens', amount: request.tokens,
          options: { capacity: rule.tokenBurst ?? rule.tokensPerMinute, refillPerMinute: rule.tokensPerMinute },
        });
      }
    };
    add('agent', request.agent, lookup(this.config.agents, request.agent));
    add('model', request.model, lookup(this.config.models, request.model));
    return refs;
  }

  private bucket(ref: BucketRef): TokenBucket {
    let bucket = this.buckets.get(ref.id);
    if (!bucket) {
      bucket = new TokenBucket(ref.options, this.saved[ref.id]);
      this.buckets.set(ref.id, bucket);
    }
    return bucket;
  }
}

function lookup(rules: Readonly<Record<string, RateLimitRule>> | undefined, key: string): RateLimitRule | undefined {
  if (!rules) return undefined;
  if (Object.prototype.hasOwnProperty.call(rules, key)) return rules[key];
  return Object.prototype.hasOwnProperty.call(rules, '*') ? rules['*'] : undefined;
}
