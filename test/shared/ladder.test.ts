import { applyRun, autoPassRefusal, EMPTY_METRICS, nextLevel, unmetRequirements, type LadderMetrics } from '../../src/shared/ladder';

const runs = (n: number, approved = true): LadderMetrics => {
  let m = EMPTY_METRICS;
  for (let i = 0; i < n; i++) m = applyRun(m, { success: true, humanApproved: approved });
  return m;
};

describe('metrics', () => {
  test('approval rate is an EMA with α = 0.1; runs without a person leave it alone', () => {
    const one = applyRun(EMPTY_METRICS, { success: true, humanApproved: true });
    expect(one.approvalRate).toBeCloseTo(0.1);
    expect(applyRun(one, { success: true }).approvalRate).toBeCloseTo(0.1);
    expect(applyRun(one, { success: false, humanApproved: false, falsePositive: true })).toMatchObject({ totalRuns: 2, successfulRuns: 1, falsePositives: 1 });
  });
});

describe('level changes', () => {
  const options = { allowLevelUp: true, pinned: false };
  test('L0 → L1 at the 10th run, not before', () => {
    expect(nextLevel(0, runs(9), { success: true }, options)).toBe(0);
    expect(unmetRequirements(1, runs(9))).toEqual(['runs 9 < 10']);
    expect(nextLevel(0, runs(10), { success: true }, options)).toBe(1);
  });

  test('L1 → L2 needs 50 runs and an approval rate ≥ 0.8', () => {
    // 49 approvals: rate 1 - 0.9^49 ≈ 0.994, but only 49 runs
    expect(nextLevel(1, runs(49), { success: true }, options)).toBe(1);
    expect(nextLevel(1, runs(50), { success: true }, options)).toBe(2);
    // 50 runs of which the last few were turned down: the rate falls under 0.8
    let m = runs(45);
    for (let i = 0; i < 5; i++) m = applyRun(m, { success: true, humanApproved: false });
    expect(m.approvalRate).toBeLessThan(0.8);
    expect(unmetRequirements(2, m)).toEqual([expect.stringMatching(/^approval rate 0\.\d+ < 0\.8$/)]);
  });

  test('failures on one repository drop a level only at the third in a row', () => {
    let m = runs(300);
    const fail = { success: false, repo: '/r' } as const;
    for (const expected of [3, 3]) {
      m = applyRun(m, fail);
      expect(nextLevel(3, m, fail, options)).toBe(expected);
    }
    m = applyRun(m, fail);
    expect(m.failureStreaks).toEqual({ '/r': 3 });
    expect(nextLevel(3, m, fail, options)).toBe(2);
    expect(applyRun(m, { success: true, repo: '/r' }).failureStreaks).toBeUndefined();
  });

  test('a failed or rejected run drops a level; level-up off or pinned never moves up', () => {
    expect(nextLevel(3, runs(300), { success: false }, options)).toBe(2);
    expect(nextLevel(3, runs(300), { success: true, humanApproved: false }, options)).toBe(2);
    expect(nextLevel(0, EMPTY_METRICS, { success: false }, options)).toBe(0);
    expect(nextLevel(0, runs(10), { success: true }, { allowLevelUp: false, pinned: false })).toBe(0);
    expect(nextLevel(2, runs(300), { success: false }, { allowLevelUp: true, pinned: true })).toBe(2);
  });

  test('a run whose code the sandbox saw trying things drops a level, even merged and approved; never below L0, never a pinned level', () => {
    expect(nextLevel(3, runs(300), { success: true, humanApproved: true, escapeAttempts: 1 }, options)).toBe(2);
    expect(nextLevel(0, runs(300), { success: true, escapeAttempts: 4 }, options)).toBe(0);
    expect(nextLevel(3, runs(300), { success: true, escapeAttempts: 4 }, { allowLevelUp: true, pinned: true })).toBe(3);
    expect(nextLevel(1, runs(50), { success: true, escapeAttempts: 0 }, options)).toBe(2);
    expect(nextLevel(1, runs(50), { success: true, escapeAttempts: 2 }, options)).toBe(0);
  });
});

describe('auto-pass policy', () => {
  const ok = { risk: 'LOW' as const, refusals: [] };
  test('L0–L1 nothing; L2 the LLD gate; L3 also merge; L4 every gate but the human-only ones', () => {
    for (const level of [0, 1] as const) expect(autoPassRefusal({ ...ok, level, gate: 'lld' })).toBe(`level L${level} does not auto-pass the lld gate`);
    expect(autoPassRefusal({ ...ok, level: 2, gate: 'lld' })).toBeUndefined();
    expect(autoPassRefusal({ ...ok, level: 2, gate: 'merge' })).toBe('level L2 does not auto-pass the merge gate');
    expect(autoPassRefusal({ ...ok, level: 3, gate: 'merge' })).toBeUndefined();
    expect(autoPassRefusal({ ...ok, level: 3, gate: 'blast-radius' })).toBe('level L3 does not auto-pass the blast-radius gate');
    expect(autoPassRefusal({ ...ok, level: 4, gate: 'blast-radius' })).toBeUndefined();
    for (const gate of ['production', 'security', 'cascade'] as const) expect(autoPassRefusal({ ...ok, level: 4, gate })).toBe(`the ${gate} gate always needs a person`);
  });
  test('only LOW risk, and only when every check holds', () => {
    expect(autoPassRefusal({ level: 4, gate: 'merge', risk: 'MEDIUM', refusals: [] })).toBe('risk is MEDIUM, not LOW');
    expect(autoPassRefusal({ level: 4, gate: 'merge', risk: 'LOW', refusals: ['review verdict BLOCK'] })).toBe('review verdict BLOCK');
  });
});
