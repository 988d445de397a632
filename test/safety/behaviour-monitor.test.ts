import type { Finding, Observation } from '../../src/safety/behaviour-monitor';
import { BehaviourMonitor, DEFAULT_MONITOR_CONFIG, emptyMonitorState } from '../../src/safety/behaviour-monitor';

/** An observation with defaults: a cheap, quick, unique action. */
let counter = 0;
function obs(overrides: Partial<Observation> = {}): Observation {
  counter += 1;
  return { at: counter * 120_000, scope: 'intent-1', stage: 'impl', agent: 'claude', action: `act-${counter}`, outputHash: `out-${counter}`, costUsd: '0', latencyMs: 1_000, ...overrides };
}

function kinds(findings: readonly Finding[]): string[] {
  return findings.map((f) => `${f.kind}:${f.severity}`);
}

/** Feeds observations and returns the findings of each. */
function run(monitor: BehaviourMonitor, observations: readonly Observation[]): Finding[][] {
  return observations.map((o) => monitor.observe(o));
}

describe('BehaviourMonitor: loop', () => {
  const same = (i: number): Observation => obs({ at: i * 120_000, action: 'npm test', outputHash: 'h1' });

  it('reports 5 identical request+answer in a row as a HIGH loop (seed 000) and 10 as CRITICAL, not before', () => {
    const monitor = new BehaviourMonitor();
    const results = run(monitor, Array.from({ length: 12 }, (_, i) => same(i)));
    const loopAt = results.map((f, i) => [i + 1, kinds(f).filter((k) => k.startsWith('loop'))] as const).filter(([, k]) => k.length);
    expect(loopAt).toEqual([
      [5, ['loop:high']],
      [10, ['loop:critical']],
    ]);
    expect(results[4][0].reason).toContain('5 times');
    expect(results[4][0].suggestion).not.toBe('');
    expect(results[4][0]).toMatchObject({ scope: 'intent-1', stage: 'impl', agent: 'claude' });
  });

  it('keeps intents apart: the same answer in two intents is no loop', () => {
    const monitor = new BehaviourMonitor();
    const findings = run(monitor, Array.from({ length: 8 }, (_, i) => obs({ at: i * 120_000, scope: `intent-${i % 2}`, action: 'x', outputHash: 'y' }))).flat();
    expect(findings).toEqual([]);
  });

  it('a failed attempt (no answer) breaks no loop and makes none', () => {
    const monitor = new BehaviourMonitor();
    const findings = run(monitor, Array.from({ length: 12 }, (_, i) => obs({ at: i * 120_000, action: 'x', outputHash: undefined }))).flat();
    expect(findings).toEqual([]);
  });

  it('re-arms after the run is broken', () => {
    const monitor = new BehaviourMonitor();
    run(monitor, Array.from({ length: 5 }, (_, i) => same(i)));
    monitor.observe(obs({ at: 7 * 120_000, action: 'edit', outputHash: 'x' }));
    const again = run(monitor, Array.from({ length: 5 }, (_, i) => same(8 + i)));
    // The second HIGH loop of the same intent is CRITICAL: a person already let it go on once.
    expect(kinds(again[4])).toContain('loop:critical');
    expect(again[4][0].reason).toMatch(/HIGH anomaly number 2 of this intent/);
    expect(again.slice(0, 4).flat().filter((f) => f.kind === 'loop')).toHaveLength(0);
  });

  it('does not trip on legitimate polling: the same status check, slowly, with changing output', () => {
    const monitor = new BehaviourMonitor();
    const findings = run(
      monitor,
      Array.from({ length: 60 }, (_, i) => obs({ at: i * 30_000, action: 'gh run view 42 --json status', outputHash: `status-${i}`, latencyMs: 800 + (i % 3) * 10 })),
    ).flat();
    expect(findings).toEqual([]);
  });

  it('keeps agents and stages apart', () => {
    const monitor = new BehaviourMonitor();
    const interleaved: Observation[] = [];
    for (let i = 0; i < 5; i++) {
      interleaved.push(obs({ at: i * 120_000, scope: 'i-a', agent: 'a', action: 'x', outputHash: 'y' }));
      interleaved.push(obs({ at: i * 120_000 + 1, scope: 'i-b', agent: 'b', action: 'x', outputHash: 'y' }));
      interleaved.push(obs({ at: i * 120_000 + 2, scope: 'i-b', agent: 'b', stage: 'review', action: 'x', outputHash: 'y' }));
    }
    const findings = run(monitor, interleaved).flat().filter((f) => f.kind === 'loop');
    expect(findings.map((f) => [f.agent, f.stage, f.severity])).toEqual([
      ['a', 'impl', 'high'],
      ['b', 'impl', 'high'],
      ['b', 'review', 'critical'], // the second HIGH of intent i-b
    ]);
  });

  it('honours a custom threshold', () => {
    const monitor = new BehaviourMonitor({ loopThreshold: 2 });
    const results = run(monitor, Array.from({ length: 4 }, (_, i) => same(i)));
    expect(results.map((f) => kinds(f).filter((k) => k.startsWith('loop')))).toEqual([[], ['loop:high'], [], ['loop:critical']]);
  });
});

describe('BehaviourMonitor: alternation', () => {
  const a = (i: number) => obs({ at: i * 120_000, action: 'apply patch', outputHash: 'p' });
  const b = (i: number) => obs({ at: i * 120_000, action: 'revert patch', outputHash: 'r' });

  it('reports A-B-A-B at the 4th step (medium) and the 8th (high), not before', () => {
    const monitor = new BehaviourMonitor();
    const results = run(monitor, [a(0), b(1), a(2), b(3), a(4), b(5), a(6), b(7)]);
    const alt = results.map((f) => kinds(f).filter((k) => k.startsWith('alternation')));
    expect(alt).toEqual([[], [], [], ['alternation:medium'], [], [], [], ['alternation:high']]);
  });

  it('ignores a legitimate edit/test loop whose outputs change', () => {
    const monitor = new BehaviourMonitor();
    const steps: Observation[] = [];
    for (let i = 0; i < 10; i++) {
      steps.push(obs({ at: i * 240_000, action: 'edit', outputHash: `diff-${i}` }));
      steps.push(obs({ at: i * 240_000 + 60_000, action: 'npm test', outputHash: `result-${i}` }));
    }
    expect(run(monitor, steps).flat()).toEqual([]);
  });

  it('needs strict alternation: A-B-A-C is not', () => {
    const monitor = new BehaviourMonitor();
    const c = obs({ at: 4 * 120_000, action: 'other', outputHash: 'o' });
    expect(run(monitor, [a(0), b(1), a(2), c]).flat()).toEqual([]);
  });
});

describe('BehaviourMonitor: escalating cost', () => {
  const paid = (i: number, costUsd: string) => obs({ at: i * 120_000, costUsd });

  it('reports 5 strictly rising costs (seed 000) as MEDIUM, and as HIGH once the last is 2× the first', () => {
    const monitor = new BehaviourMonitor();
    const results = run(monitor, [paid(0, '0.10'), paid(1, '0.11'), paid(2, '0.12'), paid(3, '0.13'), paid(4, '0.14'), paid(5, '0.20')]);
    expect(results.map(kinds)).toEqual([[], [], [], [], ['escalating-cost:medium'], ['escalating-cost:high']]);
    expect(results[4][0].reason).toContain('0.100000');
  });

  it('does not report 4 rising costs, however steep', () => {
    const monitor = new BehaviourMonitor();
    expect(run(monitor, [paid(0, '0.01'), paid(1, '1'), paid(2, '100'), paid(3, '1000')]).flat()).toEqual([]);
  });

  it('restarts on a non-increase, reports each level once per run, ignores unpaid actions', () => {
    const monitor = new BehaviourMonitor();
    const findings = run(monitor, [
      paid(0, '0.10'),
      paid(1, '0.20'),
      paid(2, '0.20'), // equal: the run restarts here
      paid(3, '0.30'),
      obs({ at: 4 * 120_000, costUsd: '0' }), // unpaid: not an attempt
      paid(5, '0.35'),
      paid(6, '0.38'),
      paid(7, '0.40'), // 5 rising from 0.20 and 2× it → HIGH at once
      paid(8, '0.50'), // same run: no second report
    ]).map(kinds);
    expect(findings.flat()).toEqual(['escalating-cost:high']);
    expect(findings[7]).toEqual(['escalating-cost:high']);
  });
});

describe('BehaviourMonitor: rapid actions', () => {
  it('reports 5 actions in a row each less than 5 s after the previous (seed 000), as MEDIUM only', () => {
    const monitor = new BehaviourMonitor();
    const results = run(monitor, Array.from({ length: 30 }, (_, i) => obs({ at: 1_000_000 + i * 4_999 })));
    expect(results.slice(0, 4).flat()).toEqual([]);
    expect(kinds(results[4])).toEqual(['rapid-actions:medium']);
    expect(results.slice(5).flat()).toEqual([]); // once per run: fast agents are not held for it
  });

  it('a gap of 5 s breaks the run and re-arms the rule', () => {
    const monitor = new BehaviourMonitor();
    const times = [0, 1_000, 2_000, 3_000, 8_000, 9_000, 10_000, 11_000, 12_000];
    const results = run(monitor, times.map((at) => obs({ at })));
    expect(results.map(kinds).flat()).toEqual(['rapid-actions:medium']);
    expect(kinds(results[8])).toEqual(['rapid-actions:medium']);
  });

  it('counts per stage: a fast agent going through the stages one after another is not rapid', () => {
    const monitor = new BehaviourMonitor();
    const stages = ['triage', 'lld', 'spec', 'impl', 'review', 'triage', 'lld', 'spec', 'impl', 'review'];
    const findings = run(monitor, stages.map((stage, i) => obs({ at: i * 1_000, stage }))).flat();
    expect(findings).toEqual([]);
  });

  it('counts per intent: many intents of one agent, each at a normal pace, are not rapid', () => {
    const monitor = new BehaviourMonitor();
    const findings = run(monitor, Array.from({ length: 40 }, (_, i) => obs({ at: i * 1_000, scope: `intent-${i % 8}` }))).flat();
    expect(findings).toEqual([]);
  });
});

describe('BehaviourMonitor: outliers', () => {
  const latency = (i: number, latencyMs: number) => obs({ at: i * 120_000, latencyMs });

  it('judges nothing before 10 samples', () => {
    const monitor = new BehaviourMonitor();
    const results = run(monitor, [...Array.from({ length: 9 }, (_, i) => latency(i, 1_000 + (i % 2) * 100)), latency(9, 100_000)]);
    expect(results.flat()).toEqual([]);
  });

  it('reports a latency beyond 3 standard deviations once the baseline has 10 samples', () => {
    // Baseline 1000/1400 alternating: mean 1200, std 200 (the 5 % floor, 60, does not bind).
    const baseline = (): BehaviourMonitor => {
      const monitor = new BehaviourMonitor();
      run(monitor, Array.from({ length: 10 }, (_, i) => latency(i, 1_000 + (i % 2) * 400)));
      return monitor;
    };
    expect(baseline().observe(latency(10, 1_799))).toEqual([]); // z ≈ 2.995
    expect(kinds(baseline().observe(latency(10, 1_801)))).toEqual(['latency-outlier:medium']); // z ≈ 3.005
    // One-sided: a quicker call is no runaway.
    expect(kinds(baseline().observe(latency(10, 1)))).toEqual([]);
    // A slow call is recorded, never held for a person: MEDIUM even beyond 6 standard deviations.
    expect(kinds(baseline().observe(latency(10, 2_401)))).toEqual(['latency-outlier:medium']);
  });

  it('reports a cost outlier per stage and agent, ignoring unpaid actions', () => {
    const monitor = new BehaviourMonitor();
    run(monitor, Array.from({ length: 12 }, (_, i) => obs({ at: i * 120_000, costUsd: i % 2 ? '0.011' : '0.009' })));
    // A test run in the same stage costs nothing and is not an outlier.
    expect(monitor.observe(obs({ costUsd: '0' }))).toEqual([]);
    // Another agent has no baseline yet.
    expect(monitor.observe(obs({ agent: 'gpt', costUsd: '5' }))).toEqual([]);
    // Cheaper than usual is no anomaly.
    expect(monitor.observe(obs({ costUsd: '0.000001' }))).toEqual([]);
    const finding = monitor.observe(obs({ costUsd: '0.5' }));
    expect(kinds(finding)).toEqual(['cost-outlier:high']);
    expect(finding[0].reason).toContain('$0.500000');
  });

  it('shares baselines across intents, so a new intent is judged from its first attempt; seeded runs count', () => {
    const monitor = new BehaviourMonitor();
    for (let i = 0; i < 10; i++) monitor.seed({ stage: 'impl', agent: 'claude', costUsd: i % 2 ? '0.011' : '0.009', latencyMs: 1_000 + (i % 2) * 400 });
    expect(monitor.baselineSamples('impl', 'claude')).toBe(10);
    const first = monitor.observe(obs({ scope: 'brand-new-intent', costUsd: '0.5', latencyMs: 1_200 }));
    expect(kinds(first)).toEqual(['cost-outlier:high']);
    expect(first[0]).toMatchObject({ scope: 'brand-new-intent', stage: 'impl' });
    // A failed attempt's latency says how soon it failed: it is neither judged nor learnt.
    expect(monitor.observe(obs({ scope: 'other', outputHash: undefined, latencyMs: 10 }))).toEqual([]);
    expect(monitor.baselineSamples('impl', 'claude')).toBe(11);
  });

  it('does not hair-trigger on a constant baseline', () => {
    const monitor = new BehaviourMonitor();
    run(monitor, Array.from({ length: 20 }, (_, i) => latency(i, 1_000)));
    expect(monitor.observe(latency(20, 1_100))).toEqual([]); // within the 5 % floor × 3
    expect(kinds(monitor.observe(latency(21, 1_200)))).toEqual(['latency-outlier:medium']);
  });

  it('follows a drifting baseline (EWMA) instead of alarming forever', () => {
    const monitor = new BehaviourMonitor();
    run(monitor, Array.from({ length: 20 }, (_, i) => latency(i, 1_000 + (i % 2) * 50)));
    const shifted = run(monitor, Array.from({ length: 40 }, (_, i) => latency(20 + i, 2_000 + (i % 2) * 50)));
    expect(shifted.slice(-10).flat()).toEqual([]);
  });
});

describe('BehaviourMonitor: breaker oscillation', () => {
  it('allows 3 OPEN↔CLOSED flips in 10 minutes and reports the 4th', () => {
    const monitor = new BehaviourMonitor();
    const states = ['OPEN', 'HALF_OPEN', 'CLOSED', 'OPEN', 'HALF_OPEN', 'CLOSED'] as const;
    const results = states.map((state, i) => monitor.observeBreaker('anthropic', state, i * 60_000));
    expect(results.flat()).toHaveLength(1);
    expect(results[5][0]).toMatchObject({ kind: 'breaker-oscillation', severity: 'high', endpoint: 'anthropic' });
    expect(results.slice(0, 5).flat()).toEqual([]);
  });

  it('ignores HALF_OPEN→OPEN (a failed probe is not a flip) and repeated states', () => {
    const monitor = new BehaviourMonitor();
    const sequence = ['OPEN', 'HALF_OPEN', 'OPEN', 'HALF_OPEN', 'OPEN', 'OPEN', 'HALF_OPEN', 'CLOSED'] as const;
    expect(sequence.flatMap((state, i) => monitor.observeBreaker('e', state, i * 1_000))).toEqual([]);
  });

  it('forgets flips older than the window', () => {
    const monitor = new BehaviourMonitor();
    const flips = ['OPEN', 'CLOSED', 'OPEN', 'CLOSED'] as const;
    // Spread over 40 minutes: never more than 3 within 10.
    expect(flips.flatMap((state, i) => monitor.observeBreaker('e', state, i * 4 * 60_000))).toEqual([]);
  });

  it('seen by an intent that already had a HIGH finding, oscillation is CRITICAL', () => {
    const monitor = new BehaviourMonitor({ loopThreshold: 1 });
    expect(kinds(monitor.observe(obs({ scope: 'i', action: 'x', outputHash: 'y' })))).toEqual(['loop:high']);
    const flips = ['OPEN', 'CLOSED', 'OPEN', 'CLOSED'].flatMap((s, i) => monitor.observeBreaker('e', s as 'OPEN' | 'CLOSED', i, 'i'));
    expect(kinds(flips)).toEqual(['breaker-oscillation:critical']);
    expect(flips[0]).toMatchObject({ scope: 'i', endpoint: 'e' });
  });

  it('keeps endpoints apart', () => {
    const monitor = new BehaviourMonitor();
    const a = ['OPEN', 'CLOSED'].flatMap((s, i) => monitor.observeBreaker('a', s as 'OPEN' | 'CLOSED', i));
    const b = ['OPEN', 'CLOSED'].flatMap((s, i) => monitor.observeBreaker('b', s as 'OPEN' | 'CLOSED', i));
    expect([...a, ...b]).toEqual([]);
  });
});

describe('BehaviourMonitor: memory', () => {
  it('forgets the least recently seen intent beyond maxScopes, never the baselines', () => {
    const monitor = new BehaviourMonitor({ maxScopes: 2 });
    monitor.observe(obs({ scope: 'a', at: 1 }));
    monitor.observe(obs({ scope: 'b', at: 2 }));
    monitor.observe(obs({ scope: 'a', at: 3 }));
    monitor.observe(obs({ scope: 'c', at: 4 }));
    expect(Object.keys(monitor.snapshot().scopes).sort()).toEqual(['a', 'c']);
    expect(monitor.baselineSamples('impl', 'claude')).toBe(4);
  });
});

describe('BehaviourMonitor: state', () => {
  /** A deterministic, varied stream exercising every rule. */
  function scenario(): Observation[] {
    const list: Observation[] = [];
    let seed = 7;
    const next = (): number => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
    for (let i = 0; i < 300; i++) {
      const r = next();
      list.push({
        at: 1_000_000 + i * (r < 0.2 ? 500 : 20_000),
        scope: r < 0.6 ? 'intent-a' : 'intent-b',
        stage: r < 0.5 ? 'impl' : 'review',
        agent: r < 0.7 ? 'claude' : 'gpt',
        action: r < 0.3 ? 'npm test' : `act-${Math.floor(r * 4)}`,
        outputHash: r < 0.35 ? 'same' : `o-${Math.floor(r * 3)}`,
        costUsd: (Math.floor(r * 50_000) / 1_000_000).toFixed(6),
        latencyMs: r < 0.05 ? 60_000 : 800 + Math.floor(r * 400),
      });
    }
    return list;
  }

  it('is plain JSON, and a JSON round trip gives identical future findings', () => {
    const events = scenario();
    const original = new BehaviourMonitor();
    events.slice(0, 150).forEach((o) => original.observe(o));
    ['OPEN', 'CLOSED', 'OPEN'].forEach((s, i) => original.observeBreaker('x', s as 'OPEN' | 'CLOSED', 1_000_000 + i));

    const json = JSON.stringify(original.snapshot());
    const restored = new BehaviourMonitor({}, JSON.parse(json));
    expect(restored.snapshot()).toEqual(original.snapshot());

    const rest = events.slice(150);
    const fromOriginal = rest.map((o) => original.observe(o));
    const fromRestored = rest.map((o) => restored.observe(o));
    expect(fromRestored).toEqual(fromOriginal);
    expect(fromOriginal.flat().length).toBeGreaterThan(0); // the scenario does produce findings
    expect(restored.observeBreaker('x', 'CLOSED', 1_000_010)).toEqual(original.observeBreaker('x', 'CLOSED', 1_000_010));
    expect(JSON.stringify(restored.snapshot())).toBe(JSON.stringify(original.snapshot()));
  });

  it('does not share state with the object it was built from or the snapshots it hands out', () => {
    const state = emptyMonitorState();
    const monitor = new BehaviourMonitor({}, state);
    monitor.observe(obs());
    expect(state).toEqual(emptyMonitorState());
    const snap = monitor.snapshot();
    monitor.observe(obs());
    expect(snap).not.toEqual(monitor.snapshot());
  });

  it('has the seed defaults', () => {
    expect(DEFAULT_MONITOR_CONFIG).toMatchObject({ loopThreshold: 5, escalationMinAttempts: 5, rapidMinActions: 5, rapidMaxGapMs: 5_000, outlierZ: 3, outlierMinSamples: 10 });
  });
});
