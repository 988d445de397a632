import { NEVER_MS, RateLimiter, TokenBucket } from '../../src/safety/token-bucket';

describe('TokenBucket', () => {
  it('starts full and refuses the request after the capacity', () => {
    const bucket = new TokenBucket({ capacity: 3, refillPerMinute: 60 });
    expect(bucket.take(1, 0)).toEqual({ ok: true });
    expect(bucket.take(1, 0)).toEqual({ ok: true });
    expect(bucket.take(1, 0)).toEqual({ ok: true });
    expect(bucket.take(1, 0)).toEqual({ ok: false, retryAfterMs: 1_000, exceedsCapacity: false });
  });

  it('refills on exactly the millisecond it should, not one before', () => {
    const bucket = new TokenBucket({ capacity: 1, refillPerMinute: 60 }); // one token per second
    expect(bucket.take(1, 0).ok).toBe(true);
    expect(bucket.take(1, 999)).toEqual({ ok: false, retryAfterMs: 1, exceedsCapacity: false });
    expect(bucket.take(1, 1_000)).toEqual({ ok: true });
  });

  it('computes the wait for several tokens and rounds it up', () => {
    const bucket = new TokenBucket({ capacity: 10, refillPerMinute: 7 });
    expect(bucket.take(10, 0).ok).toBe(true);
    const refused = bucket.take(1, 0);
    // 60 000 / 7 = 8571.43 ms per token
    expect(refused).toEqual({ ok: false, retryAfterMs: 8_572, exceedsCapacity: false });
    expect(bucket.take(1, 8_571).ok).toBe(false);
    expect(bucket.take(1, 8_572).ok).toBe(true);
  });

  it('does not take anything when it refuses', () => {
    const bucket = new TokenBucket({ capacity: 5, refillPerMinute: 60 });
    bucket.take(4, 0);
    expect(bucket.take(2, 0).ok).toBe(false);
    expect(bucket.take(1, 0).ok).toBe(true);
  });

  it('never holds more than its capacity', () => {
    const bucket = new TokenBucket({ capacity: 2, refillPerMinute: 60 });
    expect(bucket.available(10 * 60_000)).toBe(2);
    bucket.take(2, 0);
    expect(bucket.available(3_600_000)).toBe(2);
  });

  it('reports a request larger than the bucket as never fitting', () => {
    const bucket = new TokenBucket({ capacity: 100, refillPerMinute: 100 });
    expect(bucket.take(101, 0)).toEqual({ ok: false, retryAfterMs: NEVER_MS, exceedsCapacity: true });
    expect(bucket.take(100, 0).ok).toBe(true);
  });

  it('treats a clock going backwards as no time passing', () => {
    const bucket = new TokenBucket({ capacity: 1, refillPerMinute: 60 });
    bucket.take(1, 10_000);
    expect(bucket.take(1, 5_000).ok).toBe(false);
    expect(bucket.take(1, 10_999).ok).toBe(false);
    expect(bucket.take(1, 11_000).ok).toBe(true);
  });

  it('peek changes nothing', () => {
    const bucket = new TokenBucket({ capacity: 1, refillPerMinute: 1 });
    expect(bucket.peek(1, 0).ok).toBe(true);
    expect(bucket.peek(1, 0).ok).toBe(true);
    expect(bucket.take(1, 0).ok).toBe(true);
  });

  it('validates its options and counts', () => {
    expect(() => new TokenBucket({ capacity: 0, refillPerMinute: 1 })).toThrow(RangeError);
    expect(() => new TokenBucket({ capacity: 1, refillPerMinute: 0.5 })).toThrow(RangeError);
    expect(() => new TokenBucket({ capacity: 1, refillPerMinute: 1 }).take(-1, 0)).toThrow(RangeError);
    expect(() => new TokenBucket({ capacity: 1, refillPerMinute: 1 }).take(0.5, 0)).toThrow(RangeError);
  });

  it('state survives a JSON round trip', () => {
    const original = new TokenBucket({ capacity: 5, refillPerMinute: 30 });
    original.take(4, 1_000);
    const copy = new TokenBucket({ capacity: 5, refillPerMinute: 30 }, JSON.parse(JSON.stringify(original.toJSON())));
    for (const [n, at] of [[2, 1_500], [2, 3_000], [1, 3_001], [5, 60_000]] as const) {
      expect(copy.take(n, at)).toEqual(original.take(n, at));
    }
  });
});

describe('RateLimiter', () => {
  const config = {
    agents: { claude: { requestsPerMinute: 2 }, '*': { requestsPerMinute: 5 } },
    models: { 'model-a': { requestsPerMinute: 10, tokensPerMinute: 1_000 } },
  };

  it('limits requests per agent', () => {
    const limiter = new RateLimiter(config);
    expect(limiter.take({ agent: 'claude', model: 'model-a', tokens: 10, at: 0 }).ok).toBe(true);
    expect(limiter.take({ agent: 'claude', model: 'model-a', tokens: 10, at: 0 }).ok).toBe(true);
    const refused = limiter.take({ agent: 'claude', model: 'model-a', tokens: 10, at: 0 });
    expect(refused).toEqual({
      ok: false,
      retryAfterMs: 30_000,
      refusals: [{ scope: 'agent', key: 'claude', limit: 'requests', retryAfterMs: 30_000, exceedsCapacity: false }],
    });
    expect(limiter.take({ agent: 'claude', model: 'model-a', tokens: 10, at: 30_000 }).ok).toBe(true);
  });

  it('limits tokens per model across agents', () => {
    const limiter = new RateLimiter(config);
    expect(limiter.take({ agent: 'a1', model: 'model-a', tokens: 600, at: 0 }).ok).toBe(true);
    const refused = limiter.take({ agent: 'a2', model: 'model-a', tokens: 600, at: 0 });
    expect(refused.ok).toBe(false);
    if (!refused.ok) {
      expect(refused.refusals).toEqual([{ scope: 'model', key: 'model-a', limit: 'tokens', retryAfterMs: 12_000, exceedsCapacity: false }]);
    }
    expect(limiter.take({ agent: 'a2', model: 'model-a', tokens: 400, at: 0 }).ok).toBe(true);
  });

  it('takes nothing from any bucket when one refuses', () => {
    const limiter = new RateLimiter({ agents: { x: { requestsPerMinute: 1 } }, models: { m: { tokensPerMinute: 100 } } });
    expect(limiter.take({ agent: 'x', model: 'm', tokens: 200, at: 0 }).ok).toBe(false);
    // The agent's single request was not consumed by the refused call.
    expect(limiter.take({ agent: 'x', model: 'm', tokens: 100, at: 0 }).ok).toBe(true);
  });

  it('gives each agent without its own rule a bucket of its own from "*"', () => {
    const limiter = new RateLimiter(config);
    for (let i = 0; i < 5; i++) expect(limiter.take({ agent: 'gpt', model: 'other', tokens: 1, at: 0 }).ok).toBe(true);
    expect(limiter.take({ agent: 'gpt', model: 'other', tokens: 1, at: 0 }).ok).toBe(false);
    expect(limiter.take({ agent: 'codex', model: 'other', tokens: 1, at: 0 }).ok).toBe(true);
  });

  it('lets through what no rule covers', () => {
    const limiter = new RateLimiter({});
    for (let i = 0; i < 100; i++) expect(limiter.take({ agent: 'a', model: 'm', tokens: 1e6, at: 0 }).ok).toBe(true);
  });

  it('reports every refusing bucket and the longest wait', () => {
    const limiter = new RateLimiter({ agents: { x: { requestsPerMinute: 1 } }, models: { m: { requestsPerMinute: 1, tokensPerMinute: 10 } } });
    limiter.take({ agent: 'x', model: 'm', tokens: 10, at: 0 });
    const refused = limiter.take({ agent: 'x', model: 'm', tokens: 11, at: 0 });
    expect(refused.ok).toBe(false);
    if (!refused.ok) {
      expect(refused.refusals.map((r) => `${r.scope}:${r.limit}`)).toEqual(['agent:requests', 'model:requests', 'model:tokens']);
      expect(refused.retryAfterMs).toBe(NEVER_MS); // 11 tokens never fit a 10-token bucket
    }
  });

  it('honours burst sizes', () => {
    const limiter = new RateLimiter({ agents: { x: { requestsPerMinute: 60, requestBurst: 2 } } });
    expect(limiter.take({ agent: 'x', model: 'm', tokens: 0, at: 0 }).ok).toBe(true);
    expect(limiter.take({ agent: 'x', model: 'm', tokens: 0, at: 0 }).ok).toBe(true);
    expect(limiter.take({ agent: 'x', model: 'm', tokens: 0, at: 0 }).ok).toBe(false);
  });

  it('state survives a JSON round trip, including buckets restored but not yet used', () => {
    const original = new RateLimiter(config);
    original.take({ agent: 'claude', model: 'model-a', tokens: 900, at: 0 });
    const restored = new RateLimiter(config, JSON.parse(JSON.stringify(original.toJSON())));
    expect(restored.toJSON()).toEqual(original.toJSON());
    const requests = [
      { agent: 'claude', model: 'model-a', tokens: 200, at: 1_000 },
      { agent: 'claude', model: 'model-a', tokens: 50, at: 2_000 },
      { agent: 'claude', model: 'model-a', tokens: 50, at: 31_000 },
    ];
    for (const request of requests) expect(restored.take(request)).toEqual(original.take(request));
  });
});
