import type { CircuitBreakerOptions, CircuitStateChange } from '../../src/safety/circuit-breaker';
import { CircuitBreakerRegistry, CircuitOpenError, DEFAULT_CIRCUIT_OPTIONS } from '../../src/safety/circuit-breaker';

const T0 = 1_700_000_000_000;
const E = 'anthropic/messages';

// The registry reads Date.now(), so the clock is jest's fake one.
beforeEach(() => jest.useFakeTimers({ now: T0, doNotFake: ['nextTick', 'queueMicrotask'] }));
afterEach(() => jest.useRealTimers());

function at(offsetMs: number): void {
  jest.setSystemTime(T0 + offsetMs);
}

interface Harness {
  readonly registry: CircuitBreakerRegistry;
  readonly changes: CircuitStateChange[];
  calls: number;
  ok(endpoint?: string): Promise<unknown>;
  fail(endpoint?: string): Promise<unknown>;
  /** Runs a string of 'S' (success) and 'F' (failure) calls in order; returns what each settled to. */
  pattern(calls: string, endpoint?: string): Promise<unknown[]>;
  transitions(): string[];
}

function harness(options: CircuitBreakerOptions = {}): Harness {
  const changes: CircuitStateChange[] = [];
  const registry = new CircuitBreakerRegistry({ ...options, onStateChange: (c) => changes.push(c) });
  const h: Harness = {
    registry,
    changes,
    calls: 0,
    ok: (endpoint = E) =>
      registry.execute(endpoint, () => {
        h.calls++;
        return 'ok';
      }),
    fail: (endpoint = E) =>
      registry
        .execute(endpoint, async () => {
          h.calls++;
          throw new Error('boom');
        })
        .catch((error: unknown) => error),
    async pattern(calls, endpoint = E) {
      const results: unknown[] = [];
      for (const c of calls) results.push(await (c === 'S' ? h.ok(endpoint) : h.fail(endpoint)));
      return results;
    },
    transitions: () => changes.map((c) => `${c.from}->${c.to}:${c.reason}`),
  };
  return h;
}

async function expectOpenError(promise: Promise<unknown>, state: 'OPEN' | 'HALF_OPEN', retryAfterMs: number): Promise<void> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CircuitOpenError);
  expect(error).toMatchObject({ endpoint: E, state, retryAfterMs, name: 'CircuitOpenError' });
}

/** Opens the circuit at `at(0)` with 5 consecutive failures. */
async function tripped(options: CircuitBreakerOptions = {}): Promise<Harness> {
  const h = harness(options);
  at(0);
  await h.pattern('FFFFF');
  expect(h.registry.state(E)).toBe('OPEN');
  return h;
}

describe('CircuitBreakerRegistry: CLOSED → OPEN', () => {
  it('uses the documented defaults', () => {
    expect(DEFAULT_CIRCUIT_OPTIONS).toMatchObject({ errorRateThreshold: 0.5, minimumCalls: 20, consecutiveFailures: 5, probes: 3, probeIntervalMs: 5_000 });
  });

  it('opens on exactly the 5th consecutive failure, not the 4th', async () => {
    const h = harness();
    await h.pattern('FFFF');
    expect(h.registry.state(E)).toBe('CLOSED');
    expect(h.changes).toEqual([]);
    await h.fail();
    expect(h.registry.state(E)).toBe('OPEN');
    expect(h.changes).toEqual([{ endpoint: E, from: 'CLOSED', to: 'OPEN', reason: 'consecutive-failures', detail: expect.stringContaining('5 consecutive'), at: T0 }]);
  });

  it('passes the failing call’s own error through, and a success resets the run', async () => {
    const h = harness();
    const results = await h.pattern('FFFFSFFFF');
    expect(results[0]).toEqual(new Error('boom'));
    expect(results[4]).toBe('ok');
    expect(h.registry.state(E)).toBe('CLOSED');
  });

  it('opens on ≥ 50 % errors at exactly the 20th call, not the 19th', async () => {
    const h = harness();
    await h.pattern('SF'.repeat(9) + 'S'); // 19 calls, 9 failures
    expect(h.registry.state(E)).toBe('CLOSED');
    await h.fail(); // 20 calls, 10 failures = 50 %
    expect(h.registry.state(E)).toBe('OPEN');
    expect(h.transitions()).toEqual(['CLOSED->OPEN:error-rate']);
    expect(h.changes[0].detail).toContain('10 of 20 calls failed');
  });

  it('needs 20 calls: a 74 % error rate over 19 calls does not open, the 20th call does', async () => {
    const h = harness();
    // 19 calls, 14 failures, never 5 in a row; the 19th is a failure, so the rate is evaluated.
    await h.pattern('FFFS'.repeat(4) + 'SFF');
    expect(h.registry.state(E)).toBe('CLOSED');
    await h.fail();
    expect(h.transitions()).toEqual(['CLOSED->OPEN:error-rate']);
  });

  it('does not open just under 50 %', async () => {
    const h = harness();
    await h.pattern('SF'.repeat(9) + 'SS' + 'F'); // 21 calls, 10 failures = 47.6 %
    expect(h.registry.state(E)).toBe('CLOSED');
  });

  it('counts only calls inside the rolling window (default 5 min, as the config)', async () => {
    const h = harness();
    at(0);
    await h.pattern('SF'.repeat(5));
    at(300_000); // the first ten calls are now outside the 5 min window
    await h.pattern('SF'.repeat(5));
    expect(h.registry.state(E)).toBe('CLOSED');

    const same = harness();
    at(0);
    await same.pattern('SF'.repeat(5));
    at(299_000);
    await same.pattern('SF'.repeat(5));
    expect(same.registry.state(E)).toBe('OPEN');
  });

  it('keeps the window a time window under sparse traffic', async () => {
    const h = harness();
    for (let i = 0; i < 20; i++) {
      at(i * 600_000); // one call every 10 minutes
      await (i % 2 ? h.fail() : h.ok());
    }
    expect(h.registry.state(E)).toBe('CLOSED');
  });

  it('honours custom thresholds', async () => {
    const h = harness({ consecutiveFailures: 2, minimumCalls: 4, errorRateThreshold: 0.75 });
    await h.pattern('F');
    expect(h.registry.state(E)).toBe('CLOSED');
    await h.pattern('F');
    expect(h.transitions()).toEqual(['CLOSED->OPEN:consecutive-failures']);
    const r = harness({ consecutiveFailures: 100, minimumCalls: 4, errorRateThreshold: 0.75 });
    await r.pattern('FSF'); // 2/3 — too few calls
    expect(r.registry.state(E)).toBe('CLOSED');
    await r.pattern('F'); // 3/4 = 75 %
    expect(r.transitions()).toEqual(['CLOSED->OPEN:error-rate']);
  });
});

describe('CircuitBreakerRegistry: OPEN', () => {
  it('fails fast without calling the endpoint, with the remaining cool-down', async () => {
    const h = await tripped();
    const before = h.calls;
    at(10_000);
    await expectOpenError(h.registry.execute(E, () => 'never'), 'OPEN', 20_000);
    expect(h.calls).toBe(before);
    expect(h.registry.retryAfterMs(E)).toBe(20_000);
  });

  it('admits nothing one millisecond before the cool-down ends, and a probe exactly at its end', async () => {
    const h = await tripped();
    at(29_999);
    await expectOpenError(h.registry.execute(E, () => 'never'), 'OPEN', 1);
    at(30_000);
    expect(h.registry.retryAfterMs(E)).toBe(0);
    let stateDuringProbe: string | undefined;
    await h.registry.execute(E, () => {
      stateDuringProbe = h.registry.state(E);
      return 'probe';
    });
    expect(stateDuringProbe).toBe('HALF_OPEN');
    expect(h.transitions()).toEqual(['CLOSED->OPEN:consecutive-failures', 'OPEN->HALF_OPEN:cool-down-elapsed']);
  });

  it('honours a custom cool-down', async () => {
    const h = await tripped({ coolDownMs: 1_000 });
    at(999);
    await expectOpenError(h.registry.execute(E, () => 'never'), 'OPEN', 1);
    at(1_000);
    await expect(h.registry.execute(E, () => 'probe')).resolves.toBe('probe');
  });
});

describe('CircuitBreakerRegistry: HALF_OPEN', () => {
  it('closes after 3 successful probes spaced 5 s apart, rejecting calls in between', async () => {
    const h = await tripped();
    at(30_000);
    await h.ok(); // probe 1
    expect(h.registry.state(E)).toBe('HALF_OPEN');
    await expectOpenError(h.registry.execute(E, () => 'early'), 'HALF_OPEN', 5_000);
    at(34_999);
    await expectOpenError(h.registry.execute(E, () => 'early'), 'HALF_OPEN', 1);
    at(35_000);
    await h.ok(); // probe 2
    expect(h.registry.state(E)).toBe('HALF_OPEN');
    at(40_000);
    await h.ok(); // probe 3
    expect(h.registry.state(E)).toBe('CLOSED');
    expect(h.transitions()).toEqual(['CLOSED->OPEN:consecutive-failures', 'OPEN->HALF_OPEN:cool-down-elapsed', 'HALF_OPEN->CLOSED:probes-succeeded']);
    expect(h.changes[2]).toMatchObject({ at: T0 + 40_000, detail: '3 probe(s) succeeded' });
    await expect(h.registry.execute(E, () => 'normal')).resolves.toBe('normal');
  });

  it('spaces probes from the end of the previous one', async () => {
    const h = await tripped();
    at(30_000);
    await h.registry.execute(E, () => {
      at(32_000); // the probe took 2 s
      return 'slow';
    });
    at(36_999);
    await expectOpenError(h.registry.execute(E, () => 'early'), 'HALF_OPEN', 1);
    at(37_000);
    await expect(h.registry.execute(E, () => 'probe 2')).resolves.toBe('probe 2');
  });

  it('runs one probe at a time: a concurrent call fails fast', async () => {
    const h = await tripped();
    at(30_000);
    let release!: () => void;
    const probe = h.registry.execute(E, () => new Promise<string>((resolve) => (release = () => resolve('probe'))));
    await expectOpenError(h.registry.execute(E, () => 'concurrent'), 'HALF_OPEN', 5_000);
    release();
    await expect(probe).resolves.toBe('probe');
  });

  it('reopens when the first probe fails, with a new cool-down from then', async () => {
    const h = await tripped();
    at(30_000);
    expect(await h.fail()).toEqual(new Error('boom'));
    expect(h.registry.state(E)).toBe('OPEN');
    at(59_999);
    await expectOpenError(h.registry.execute(E, () => 'never'), 'OPEN', 1);
    at(60_000);
    await h.ok();
    expect(h.transitions()).toEqual([
      'CLOSED->OPEN:consecutive-failures',
      'OPEN->HALF_OPEN:cool-down-elapsed',
      'HALF_OPEN->OPEN:probe-failed',
      'OPEN->HALF_OPEN:cool-down-elapsed',
    ]);
  });

  it('reopens when a later probe fails, and then needs all probes again', async () => {
    const h = await tripped();
    at(30_000);
    await h.ok();
    at(35_000);
    await h.ok();
    at(40_000);
    await h.fail(); // probe 3 fails
    expect(h.registry.state(E)).toBe('OPEN');
    expect(h.changes.at(-1)).toMatchObject({ from: 'HALF_OPEN', to: 'OPEN', reason: 'probe-failed', at: T0 + 40_000 });
    at(70_000);
    await h.ok();
    at(75_000);
    await h.ok();
    expect(h.registry.state(E)).toBe('HALF_OPEN');
    at(80_000);
    await h.ok();
    expect(h.registry.state(E)).toBe('CLOSED');
  });

  it('does not take a late answer to a call admitted while CLOSED as a probe; its late failure reopens', async () => {
    const h = harness({ probes: 1 });
    at(0);
    let answerLate!: () => void;
    const slowSuccess = h.registry.execute(E, () => new Promise<string>((resolve) => (answerLate = () => resolve('late'))));
    let failLate!: () => void;
    const slowFailure = h.registry.execute(E, () => new Promise<string>((_, reject) => (failLate = () => reject(new Error('late boom')))));
    await h.pattern('FFFFF');
    at(30_000);
    let release!: () => void;
    const probe = h.registry.execute(E, () => new Promise<string>((resolve) => (release = () => resolve('probe'))));
    expect(h.registry.state(E)).toBe('HALF_OPEN');
    answerLate();
    await expect(slowSuccess).resolves.toBe('late');
    expect(h.registry.state(E)).toBe('HALF_OPEN'); // one probe would have closed it
    failLate();
    await expect(slowFailure).rejects.toThrow('late boom');
    expect(h.registry.state(E)).toBe('OPEN');
    expect(h.changes.at(-1)).toMatchObject({ from: 'HALF_OPEN', to: 'OPEN', reason: 'probe-failed', at: T0 + 30_000 });
    release();
    await expect(probe).resolves.toBe('probe');
    expect(h.registry.state(E)).toBe('OPEN'); // the probe's own answer came after the circuit reopened
  });

  it('closes on the first success when one probe is configured', async () => {
    const h = await tripped({ probes: 1 });
    at(30_000);
    await h.ok();
    expect(h.registry.state(E)).toBe('CLOSED');
    expect(h.transitions().slice(1)).toEqual(['OPEN->HALF_OPEN:cool-down-elapsed', 'HALF_OPEN->CLOSED:probes-succeeded']);
  });

  it('starts from clean counts once closed again', async () => {
    const h = await tripped();
    for (const t of [30_000, 35_000, 40_000]) {
      at(t);
      await h.ok();
    }
    await h.pattern('FFFF');
    expect(h.registry.state(E)).toBe('CLOSED');
    await h.fail();
    expect(h.registry.state(E)).toBe('OPEN');
    expect(h.transitions().at(-1)).toBe('CLOSED->OPEN:consecutive-failures');
  });
});

describe('CircuitBreakerRegistry: classification, isolation, hooks', () => {
  it('rethrows errors that do not count, and counts them as healthy answers', async () => {
    class BadRequest extends Error {}
    const h = harness({ isFailure: (e) => !(e instanceof BadRequest) });
    for (let i = 0; i < 30; i++) {
      await expect(h.registry.execute(E, () => Promise.reject(new BadRequest('400')))).rejects.toBeInstanceOf(BadRequest);
    }
    expect(h.registry.state(E)).toBe('CLOSED');
    await h.pattern('FFFF');
    await expect(h.registry.execute(E, () => Promise.reject(new BadRequest('400')))).rejects.toBeInstanceOf(BadRequest);
    await h.pattern('FFFF');
    expect(h.registry.state(E)).toBe('CLOSED'); // the uncounted error broke the run of failures
  });

  it('counts an uncounted error during a probe as a successful probe', async () => {
    class BadRequest extends Error {}
    const h = await tripped({ isFailure: (e) => !(e instanceof BadRequest), probes: 1 });
    at(30_000);
    await expect(h.registry.execute(E, () => Promise.reject(new BadRequest('400')))).rejects.toBeInstanceOf(BadRequest);
    expect(h.registry.state(E)).toBe('CLOSED');
  });

  it('counts a call stopped before any answer neither way, and frees the probe slot it held', async () => {
    class Stopped extends Error {}
    const options = { isFailure: (e: unknown) => !(e instanceof Stopped), isUnanswered: (e: unknown) => e instanceof Stopped };
    const h = harness(options);
    await h.pattern('FFFF');
    await expect(h.registry.execute(E, () => Promise.reject(new Stopped('killed')))).rejects.toBeInstanceOf(Stopped);
    await h.pattern('F');
    expect(h.registry.state(E)).toBe('OPEN'); // the stopped call did not break the run of failures

    const probing = await tripped({ ...options, probes: 1 });
    at(30_000);
    await expect(probing.registry.execute(E, () => Promise.reject(new Stopped('killed')))).rejects.toBeInstanceOf(Stopped);
    expect(probing.registry.state(E)).toBe('HALF_OPEN'); // no answer: no passed probe
    await expect(probing.registry.execute(E, () => 'ok')).resolves.toBe('ok'); // its slot is free again
    expect(probing.registry.state(E)).toBe('CLOSED');
  });

  it('keeps endpoints apart', async () => {
    const h = harness();
    await h.pattern('FFFFF', 'a');
    expect(h.registry.state('a')).toBe('OPEN');
    expect(h.registry.state('b')).toBe('CLOSED');
    await expect(h.registry.execute('b', () => 'fine')).resolves.toBe('fine');
    expect(h.registry.endpoints()).toEqual(['a', 'b']);
    expect(h.registry.state('never-used')).toBe('CLOSED');
    expect(h.registry.retryAfterMs('never-used')).toBe(0);
  });

  it('survives a throwing onStateChange callback', async () => {
    const registry = new CircuitBreakerRegistry({
      onStateChange: () => {
        throw new Error('audit hook down');
      },
    });
    for (let i = 0; i < 5; i++) {
      await expect(registry.execute(E, () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    }
    expect(registry.state(E)).toBe('OPEN');
    await expect(registry.execute(E, () => 'x')).rejects.toBeInstanceOf(CircuitOpenError);
  });

  it('passes an AbortSignal to the call', async () => {
    const registry = new CircuitBreakerRegistry();
    const controller = new AbortController();
    let seen: AbortSignal | undefined;
    await registry.execute(E, (signal) => (seen = signal), controller.signal);
    expect(seen).toBeDefined();
    controller.abort();
    expect(seen?.aborted).toBe(true);
  });

  it('rejects nonsensical options', () => {
    expect(() => new CircuitBreakerRegistry({ errorRateThreshold: 0 })).toThrow(RangeError);
    expect(() => new CircuitBreakerRegistry({ errorRateThreshold: 1.5 })).toThrow(RangeError);
    expect(() => new CircuitBreakerRegistry({ minimumCalls: 0 })).toThrow(RangeError);
    expect(() => new CircuitBreakerRegistry({ probes: 1.5 })).toThrow(RangeError);
    expect(() => new CircuitBreakerRegistry({ coolDownMs: -1 })).toThrow(RangeError);
    expect(() => new CircuitBreakerRegistry({ windowMs: 500 })).toThrow(RangeError);
    expect(() => new CircuitBreakerRegistry({ errorRateThreshold: 1 })).not.toThrow();
  });
});
