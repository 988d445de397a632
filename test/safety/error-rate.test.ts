import { ErrorRateBreaker } from '../../src/safety/error-rate';

/** Records `ok` successes and `errors` failures, all at time `at`. */
function feed(breaker: ErrorRateBreaker, at: number, ok: number, errors: number): void {
  for (let i = 0; i < ok; i++) breaker.record(at, true);
  for (let i = 0; i < errors; i++) breaker.record(at, false);
}

describe('ErrorRateBreaker', () => {
  it('trips at exactly 25 % and not one error before', () => {
    const below = new ErrorRateBreaker();
    feed(below, 1_000, 16, 4); // 4/20 = 20 %
    expect(below.check(1_000)).toMatchObject({ verdict: 'warn', reason: 'ERROR_RATE_WARNING', calls: 20, errors: 4 });
    const at = new ErrorRateBreaker();
    feed(at, 1_000, 15, 5); // 5/20 = 25 %
    expect(at.check(1_000)).toMatchObject({ verdict: 'trip', reason: 'ERROR_RATE_CRITICAL', rate: 0.25, threshold: 0.25 });
  });

  it('warns at exactly 10 %, exactly (3/30 is not lost to 0.1 × 30 = 3.0000000000000004)', () => {
    const at = new ErrorRateBreaker();
    feed(at, 0, 27, 3);
    expect(at.check(0).verdict).toBe('warn');
    const below = new ErrorRateBreaker();
    feed(below, 0, 28, 3 - 1);
    feed(below, 0, 1, 0); // 2/31
    expect(below.check(0).verdict).toBe('ok');
  });

  it('says nothing below the minimum number of calls, even at 100 % errors', () => {
    const few = new ErrorRateBreaker();
    feed(few, 0, 0, 9);
    expect(few.check(0)).toMatchObject({ verdict: 'ok', calls: 9 });
    few.record(0, false);
    expect(few.check(0).verdict).toBe('trip');
    const custom = new ErrorRateBreaker({ minCalls: 3 });
    feed(custom, 0, 2, 1);
    expect(custom.check(0).verdict).toBe('trip');
  });

  it('forgets calls exactly one window later', () => {
    const breaker = new ErrorRateBreaker({ windowMs: 60_000 });
    feed(breaker, 0, 5, 5);
    feed(breaker, 30_000, 10, 0);
    expect(breaker.check(59_999)).toMatchObject({ verdict: 'trip', calls: 20, errors: 5 });
    // At 60 000 the errors recorded at 0 are out of the window.
    expect(breaker.check(60_000)).toMatchObject({ verdict: 'ok', calls: 10, errors: 0 });
  });

  it('does not count calls recorded after the checked time', () => {
    const breaker = new ErrorRateBreaker();
    feed(breaker, 10, 10, 0);
    feed(breaker, 20, 0, 10);
    expect(breaker.check(15)).toMatchObject({ calls: 10, errors: 0, verdict: 'ok' });
  });

  it('keeps one count per slice of the window, however many calls it saw', () => {
    const breaker = new ErrorRateBreaker({ windowMs: 60_000 });
    // 3,000 calls over two minutes, one in four an error: the last minute's are in the window.
    for (let i = 0; i < 3_000; i++) breaker.record(i * 40, i % 4 !== 0);
    const { counts } = breaker.toJSON();
    // 60 slices of a second; the newest slice's calls each on their own until a newer slice has calls.
    expect(counts.length).toBeLessThanOrEqual(60 + 25);
    expect(breaker.check(119_960)).toMatchObject({ calls: 1_500, errors: 375, verdict: 'trip' });
  });

  it('lets a call leave the window at most a slice early', () => {
    const breaker = new ErrorRateBreaker({ windowMs: 60_000, minCalls: 1 });
    breaker.record(1_500, false);
    // Alone in the newest slice, it keeps its own time.
    expect(breaker.check(61_499).errors).toBe(1);
    breaker.record(2_000, true);
    // Counted with its slice (1,000–1,999) once a newer slice has calls: it leaves at 61,000, not 61,500.
    expect(breaker.check(60_999)).toMatchObject({ calls: 2, errors: 1 });
    expect(breaker.check(61_000)).toMatchObject({ calls: 1, errors: 0 });
  });

  it('reads a state that kept each call', () => {
    const breaker = new ErrorRateBreaker({ windowMs: 60_000 }, { samples: [...Array.from({ length: 9 }, (_, i) => ({ at: i * 1_000, ok: true })), { at: 9_000, ok: false }] });
    expect(breaker.check(9_000)).toMatchObject({ calls: 10, errors: 1, verdict: 'warn' });
  });

  it('honours custom rates', () => {
    const breaker = new ErrorRateBreaker({ warningRate: 0.5, criticalRate: 0.9, minCalls: 10 });
    feed(breaker, 0, 5, 5);
    expect(breaker.check(0).verdict).toBe('warn');
  });

  it('state survives a JSON round trip and gives the same verdicts after', () => {
    const original = new ErrorRateBreaker({ windowMs: 10_000 });
    feed(original, 0, 7, 2);
    const copy = new ErrorRateBreaker({ windowMs: 10_000 }, JSON.parse(JSON.stringify(original.toJSON())));
    for (const breaker of [original, copy]) {
      feed(breaker, 5_000, 0, 3);
    }
    for (const at of [5_000, 9_999, 10_000, 14_999, 15_000]) {
      expect(copy.check(at)).toEqual(original.check(at));
    }
  });
});

describe('untilBelowCritical', () => {
  /** The definition: the first moment a sample leaves the window at which the verdict is no longer a trip. */
  function byDefinition(breaker: ErrorRateBreaker, now: number, windowMs: number): number {
    if (breaker.check(now).verdict !== 'trip') return 0;
    const exits = breaker.toJSON().counts.map((c) => c.at + windowMs).filter((t) => t > now).sort((a, b) => a - b);
    const drop = exits.find((t) => breaker.check(t).verdict !== 'trip');
    return (drop ?? now + windowMs) - now;
  }

  /** A small deterministic generator, so that a failure names its case. */
  function random(seed: number): () => number {
    let x = seed;
    return () => {
      x = (x * 1_103_515_245 + 12_345) % 2_147_483_648;
      return x / 2_147_483_648;
    };
  }

  it('gives the time the definition gives, for windows of every shape', () => {
    const windowMs = 1_000;
    let tripped = 0;
    for (let seed = 1; seed <= 300; seed++) {
      const next = random(seed);
      const breaker = new ErrorRateBreaker({ windowMs, minCalls: 1 + Math.floor(next() * 8), criticalRate: 0.2 + next() * 0.5, warningRate: 0.1 });
      const now = 5_000;
      const count = 1 + Math.floor(next() * 60);
      // Times before now, some equal, some out of order, a few after now (recorded by a clock ahead).
      for (let i = 0; i < count; i++) breaker.record(Math.round(now - next() * 1_200 + (next() < 0.1 ? 300 : 0)), next() < 0.6);
      if (breaker.check(now).verdict === 'trip') tripped += 1;
      expect([seed, breaker.untilBelowCritical(now)]).toEqual([seed, byDefinition(breaker, now, windowMs)]);
    }
    // The cases cover trips, not only windows that are fine.
    expect(tripped).toBeGreaterThan(50);
  });
});
