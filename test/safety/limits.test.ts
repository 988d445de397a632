import {
  DEFAULT_BLAST_RADIUS_CAP,
  DEFAULT_STAGE_ATTEMPT_CAPS,
  DEFAULT_TOTAL_ATTEMPT_CAP,
  UNLIMITED,
  checkBlastRadius,
  checkBudget,
  checkCompleteness,
  checkCooldown,
  checkIterations,
  checkPredictedBlastRadius,
  checkStagnation,
  checkTimeLimit,
  formatMs,
  isBudgetExhausted,
  worstOf,
} from '../../src/safety/limits';
import type { BudgetInput, LimitCheck } from '../../src/safety/limits';
import { InvalidMoneyError } from '../../src/shared/money';

describe('checkIterations', () => {
  it('has the seed defaults', () => {
    expect(DEFAULT_STAGE_ATTEMPT_CAPS).toMatchObject({ impl: 5, review: 3, completeness: 3, triage: 3, lld: 3, spec: 3 });
    expect(DEFAULT_TOTAL_ATTEMPT_CAP).toBe(20);
  });

  it.each([
    ['impl', 5],
    ['review', 3],
    ['completeness', 3],
    ['triage', 3],
    ['lld', 3],
    ['spec', 3],
  ])('%s: attempt %i is allowed, the next one trips', (stage, cap) => {
    const last = checkIterations({ stage, stageAttempts: cap - 1, totalAttempts: 0 });
    expect(last.verdict).not.toBe('trip');
    expect(last.current).toBe(cap);
    const over = checkIterations({ stage, stageAttempts: cap, totalAttempts: 0 });
    expect(over).toMatchObject({ verdict: 'trip', reason: 'MAX_ITERATIONS_EXCEEDED', current: cap + 1, threshold: cap });
    expect(over.suggestion).not.toBe('');
  });

  it('is ok well below the cap and warns from 80 %', () => {
    expect(checkIterations({ stage: 'impl', stageAttempts: 0, totalAttempts: 0 }).verdict).toBe('ok');
    expect(checkIterations({ stage: 'impl', stageAttempts: 2, totalAttempts: 2 }).verdict).toBe('ok'); // attempt 3 of 5
    expect(checkIterations({ stage: 'impl', stageAttempts: 3, totalAttempts: 3 })).toMatchObject({ verdict: 'warn', reason: 'APPROACHING_ITERATION_LIMIT', current: 4 });
  });

  it('trips on the intent total exactly when the next attempt would exceed it', () => {
    expect(checkIterations({ stage: 'review', stageAttempts: 0, totalAttempts: 19 }).verdict).toBe('warn');
    expect(checkIterations({ stage: 'review', stageAttempts: 0, totalAttempts: 20 })).toMatchObject({
      verdict: 'trip',
      reason: 'MAX_ITERATIONS_EXCEEDED',
      current: 21,
      threshold: 20,
    });
    expect(checkIterations({ stage: 'review', stageAttempts: 0, totalAttempts: 9, totalCap: 10 }).verdict).not.toBe('trip');
    expect(checkIterations({ stage: 'review', stageAttempts: 0, totalAttempts: 10, totalCap: 10 }).verdict).toBe('trip');
  });

  it('takes custom caps, then caps.default, then built-ins', () => {
    expect(checkIterations({ stage: 'impl', stageAttempts: 9, totalAttempts: 0, caps: { impl: 10 } }).verdict).not.toBe('trip');
    expect(checkIterations({ stage: 'impl', stageAttempts: 10, totalAttempts: 0, caps: { impl: 10 } }).verdict).toBe('trip');
    expect(checkIterations({ stage: 'deploy', stageAttempts: 7, totalAttempts: 0, caps: { default: 8 } }).verdict).not.toBe('trip');
    expect(checkIterations({ stage: 'deploy', stageAttempts: 8, totalAttempts: 0, caps: { default: 8 } }).verdict).toBe('trip');
    expect(checkIterations({ stage: 'review', stageAttempts: 3, totalAttempts: 0, caps: { impl: 10 } }).verdict).toBe('trip');
    expect(checkIterations({ stage: 'unknown-stage', stageAttempts: 3, totalAttempts: 0 }).threshold).toBe(3);
    // "constructor" is not a cap inherited from Object.prototype.
    expect(checkIterations({ stage: 'constructor', stageAttempts: 3, totalAttempts: 0 }).verdict).toBe('trip');
  });

  it('reports the stage on a tie and the worse of the two otherwise', () => {
    const both = checkIterations({ stage: 'impl', stageAttempts: 5, totalAttempts: 20 });
    expect(both.detail).toContain('stage impl');
    const totalOnly = checkIterations({ stage: 'impl', stageAttempts: 0, totalAttempts: 20 });
    expect(totalOnly.detail).toContain('intent');
  });
});

describe('worstOf', () => {
  const c = (verdict: LimitCheck['verdict'], detail: string): LimitCheck => ({ verdict, detail, suggestion: '', current: 0, threshold: 0 });
  it('picks trip over warn over ok, first on ties', () => {
    expect(worstOf(c('ok', 'a'), c('warn', 'b'), c('trip', 'c'), c('trip', 'd')).detail).toBe('c');
    expect(worstOf(c('warn', 'a'), c('warn', 'b')).detail).toBe('a');
    expect(worstOf(c('ok', 'a')).detail).toBe('a');
  });
});

describe('checkStagnation (two-strike rule)', () => {
  const run = (passed: number, failed: number, failingTests?: string[]) => ({ passed, failed, failingTests });

  it('trips on the second identical result, not the first', () => {
    expect(checkStagnation([run(3, 22)]).verdict).toBe('ok');
    expect(checkStagnation([run(3, 22), run(3, 22)])).toMatchObject({ verdict: 'trip', reason: 'STAGNATION_DETECTED', current: 2, threshold: 2 });
  });

  it('compares the set of failing test names, ignoring order and duplicates', () => {
    expect(checkStagnation([run(1, 2, ['a', 'b']), run(1, 2, ['b', 'a', 'a'])]).verdict).toBe('trip');
    expect(checkStagnation([run(1, 2, ['a', 'b']), run(1, 2, ['a', 'c'])]).verdict).toBe('ok');
  });

  it('sees progress in the pass count or the failure count', () => {
    expect(checkStagnation([run(3, 22), run(4, 21)]).verdict).toBe('ok');
    expect(checkStagnation([run(3, 22), run(3, 21)]).verdict).toBe('ok');
  });

  it('falls back to counts when names are missing on either side', () => {
    expect(checkStagnation([run(3, 1), run(3, 1, ['x'])]).verdict).toBe('trip');
  });

  it('only looks at the latest results', () => {
    expect(checkStagnation([run(1, 5), run(1, 5), run(2, 4)]).verdict).toBe('ok');
    expect(checkStagnation([run(1, 5), run(2, 4), run(2, 4)]).verdict).toBe('trip');
  });

  it('compares only known results: runs whose counts could not be read are like no other', () => {
    const unknown = (green: boolean) => ({ green, failingTests: [] });
    // a passing command that prints no counts is green, however often it repeats
    expect(checkStagnation([unknown(true), unknown(true)])).toMatchObject({ verdict: 'ok', detail: expect.stringMatching(/no counts/) });
    // a failing one is unknown, not "0 passed, 0 failed": two of them say nothing about progress
    expect(checkStagnation([unknown(false), unknown(false)]).verdict).toBe('ok');
    expect(checkStagnation([run(1, 2), unknown(false)]).verdict).toBe('ok');
    expect(checkStagnation([unknown(false), run(1, 2)]).verdict).toBe('ok');
    expect(checkStagnation([unknown(false), run(1, 2), run(1, 2)]).verdict).toBe('trip');
    // only one count known is not a known result either
    expect(checkStagnation([{ failed: 2 }, { failed: 2 }]).verdict).toBe('ok');
  });

  it('never calls a run whose command passed stagnation, whatever its counts', () => {
    expect(checkStagnation([{ passed: 0, failed: 0, green: true }, { passed: 0, failed: 0, green: true }]).verdict).toBe('ok');
    expect(checkStagnation([{ passed: 3, failed: 1, green: false }, { passed: 3, failed: 1, green: false }]).verdict).toBe('trip');
  });

  it('never calls a green run stagnation, but does call repeated crashes with no counts one', () => {
    expect(checkStagnation([run(10, 0), run(10, 0)]).verdict).toBe('ok');
    expect(checkStagnation([run(0, 0), run(0, 0)]).verdict).toBe('trip');
  });

  it('honours a custom strike count', () => {
    expect(checkStagnation([run(1, 1), run(1, 1)], 3).verdict).toBe('ok');
    expect(checkStagnation([run(1, 1), run(1, 1), run(1, 1)], 3).verdict).toBe('trip');
    expect(checkStagnation([]).verdict).toBe('ok');
  });
});

describe('checkBudget', () => {
  const budget = (spentUsd: string, nextCallMaxUsd: string, limitUsd: string | null, warnAt?: number): ReturnType<typeof checkBudget> =>
    checkBudget({ spentUsd, nextCallMaxUsd, limitUsd, warnAt });

  it('allows a call that brings spend exactly to the limit, and trips one micro-dollar above', () => {
    expect(budget('4.000000', '1.000000', '5').verdict).not.toBe('trip');
    expect(budget('4.000000', '1.000001', '5')).toMatchObject({ verdict: 'trip', reason: 'BUDGET_EXCEEDED', projectedUsd: '5.000001', remainingUsd: '1.000000' });
    expect(budget('5', '0', '5').verdict).not.toBe('trip');
    expect(budget('5', '0.000001', '5').verdict).toBe('trip');
  });

  it('warns once spend reaches 80 % of the limit, not one micro-dollar before', () => {
    expect(budget('3.999999', '0', '5').verdict).toBe('ok');
    expect(budget('4.000000', '0', '5')).toMatchObject({ verdict: 'warn', reason: 'BUDGET_WARNING' });
    expect(budget('4.5', '0.1', '5').verdict).toBe('warn');
    expect(budget('0.89', '0', '1', 0.9).verdict).toBe('ok');
    expect(budget('0.9', '0', '1', 0.9).verdict).toBe('warn');
  });

  it('is exact where floats are not', () => {
    // 0.1 + 0.2 > 0.3 in floats; here the call fits exactly.
    expect(budget('0.1', '0.2', '0.3').verdict).not.toBe('trip');
  });

  it('treats null as explicitly unlimited', () => {
    expect(budget('1000000', '5000', null)).toMatchObject({ verdict: 'ok', limitUsd: null, remainingUsd: null, threshold: UNLIMITED });
  });

  it('fails closed when the limit is missing from untyped input', () => {
    const input = { spentUsd: '0', nextCallMaxUsd: '0.01' } as unknown as BudgetInput;
    expect(checkBudget(input)).toMatchObject({ verdict: 'trip', reason: 'BUDGET_NOT_CONFIGURED' });
  });

  it('with a zero budget allows only free calls', () => {
    expect(budget('0', '0', '0').verdict).toBe('ok');
    expect(budget('0', '0.000001', '0').verdict).toBe('trip');
  });

  it('reports exact amounts and rejects malformed ones', () => {
    const result = budget('1.5', '0.25', '10');
    expect(result).toMatchObject({ spentUsd: '1.500000', projectedUsd: '1.750000', limitUsd: '10.000000', remainingUsd: '8.500000', current: 1.75, threshold: 10 });
    expect(() => budget('1.5', 'lots', '10')).toThrow(InvalidMoneyError);
  });

  it('results survive a JSON round trip', () => {
    for (const result of [budget('1', '1', '5'), budget('4', '2', '5'), budget('1', '1', null)]) {
      expect(JSON.parse(JSON.stringify(result))).toEqual(result);
    }
  });

  it('isBudgetExhausted: at or over the limit, never when unlimited', () => {
    expect(isBudgetExhausted('4.999999', '5')).toBe(false);
    expect(isBudgetExhausted('5', '5.000000')).toBe(true);
    expect(isBudgetExhausted('9999', null)).toBe(false);
  });
});

describe('checkBlastRadius', () => {
  const predicted = { files: 4, lines: 200 };

  it('passes exactly 1.5× the prediction and trips one above', () => {
    expect(checkBlastRadius({ predicted, actual: { files: 6, lines: 300 } }).verdict).toBe('warn');
    expect(checkBlastRadius({ predicted, actual: { files: 7, lines: 300 } })).toMatchObject({ verdict: 'trip', reason: 'BLAST_RADIUS_EXCEEDED', current: 7, threshold: 6 });
    expect(checkBlastRadius({ predicted, actual: { files: 6, lines: 301 } })).toMatchObject({ verdict: 'trip', current: 301, threshold: 300 });
  });

  it('is ok within the prediction and warns above it', () => {
    expect(checkBlastRadius({ predicted, actual: { files: 4, lines: 200 } }).verdict).toBe('ok');
    expect(checkBlastRadius({ predicted, actual: { files: 5, lines: 10 } })).toMatchObject({ verdict: 'warn', reason: 'BLAST_RADIUS_WARNING' });
  });

  it('passes exactly the hard cap and trips one above, whatever the prediction', () => {
    const big = { files: 100, lines: 5000 };
    expect(DEFAULT_BLAST_RADIUS_CAP).toEqual({ files: 10, lines: 2000 }); // seed 000: more than 10 files per commit alerts
    expect(checkBlastRadius({ predicted: big, actual: { files: 10, lines: 2000 } }).verdict).toBe('ok');
    expect(checkBlastRadius({ predicted: big, actual: { files: 11, lines: 10 } })).toMatchObject({ verdict: 'trip', current: 11, threshold: 10 });
    expect(checkBlastRadius({ predicted: big, actual: { files: 1, lines: 2001 } })).toMatchObject({ verdict: 'trip', current: 2001, threshold: 2000 });
  });

  it('honours a custom factor and cap', () => {
    expect(checkBlastRadius({ predicted, actual: { files: 8, lines: 400 }, factor: 2 }).verdict).toBe('warn');
    expect(checkBlastRadius({ predicted, actual: { files: 9, lines: 400 }, factor: 2 }).verdict).toBe('trip');
    expect(checkBlastRadius({ predicted, actual: { files: 4, lines: 200 }, hardCap: { files: 3, lines: 1000 } }).verdict).toBe('trip');
  });

  it('trips any change when nothing was predicted', () => {
    expect(checkBlastRadius({ predicted: { files: 0, lines: 0 }, actual: { files: 0, lines: 0 } }).verdict).toBe('ok');
    expect(checkBlastRadius({ predicted: { files: 0, lines: 0 }, actual: { files: 1, lines: 1 } }).verdict).toBe('trip');
  });

  it('checkPredictedBlastRadius: exactly the cap passes', () => {
    expect(checkPredictedBlastRadius({ files: 10, lines: 2000 }).verdict).toBe('ok');
    expect(checkPredictedBlastRadius({ files: 11, lines: 2000 }).verdict).toBe('trip');
    expect(checkPredictedBlastRadius({ files: 10, lines: 2001 }).verdict).toBe('trip');
  });

  it('after an approval, measures against the approved size, and still against the hard cap', () => {
    const cap = { files: 10, lines: 2000 };
    const approved = { files: 4, lines: 300 }; // a person let a 1.5× overrun of the prediction through
    expect(checkBlastRadius({ predicted, actual: { files: 4, lines: 300 }, hardCap: cap, approved }).verdict).toBe('ok');
    expect(checkBlastRadius({ predicted, actual: { files: 6, lines: 450 }, hardCap: cap, approved }).verdict).toBe('warn');
    expect(checkBlastRadius({ predicted, actual: { files: 4, lines: 451 }, hardCap: cap, approved })).toMatchObject({ verdict: 'trip', detail: '451 lines changed, over 1.5× the 300 approved' });
    // the hard cap holds after the approval: 11 files is within 1.5× of an approved 8, but over 10
    expect(checkBlastRadius({ predicted, actual: { files: 11, lines: 300 }, hardCap: cap, approved: { files: 8, lines: 300 } })).toMatchObject({ verdict: 'trip', current: 11, threshold: 10 });
  });

  it('after approving a size over the hard cap, that size is the cap until the change grows past it', () => {
    const cap = { files: 10, lines: 2000 };
    const approved = { files: 30, lines: 100 };
    expect(checkBlastRadius({ predicted: approved, actual: { files: 30, lines: 100 }, hardCap: cap, approved }).verdict).toBe('ok');
    expect(checkBlastRadius({ predicted: approved, actual: { files: 31, lines: 100 }, hardCap: cap, approved })).toMatchObject({ verdict: 'trip', threshold: 30 });
  });
});

describe('checkCompleteness (anti-stub gate cap)', () => {
  it('trips when the refusals reach the cap (seed 002: max 3 BLOCK iterations, then END)', () => {
    expect(checkCompleteness(0).verdict).toBe('ok');
    expect(checkCompleteness(2).verdict).toBe('ok');
    expect(checkCompleteness(3)).toMatchObject({ verdict: 'trip', reason: 'MAX_ITERATIONS_EXCEEDED', current: 3, threshold: 3 });
    expect(checkCompleteness(3).detail).toBe('completeness gate: 3 refusal(s) (stubs or test tampering) reached the cap of 3');
    expect(checkCompleteness(3).suggestion).toMatch(/limits\.attempts\.completeness/);
  });

  it('honours a custom cap', () => {
    expect(checkCompleteness(1, 2).verdict).toBe('ok');
    expect(checkCompleteness(2, 2).verdict).toBe('trip');
  });
});

describe('checkCooldown', () => {
  it('trips until exactly the cooldown has passed (default 60 s)', () => {
    expect(checkCooldown(1_000, 1_000 + 59_999)).toMatchObject({ verdict: 'trip', reason: 'COOLDOWN_ACTIVE', waitMs: 1 });
    expect(checkCooldown(1_000, 1_000 + 60_000)).toMatchObject({ verdict: 'ok', waitMs: 0 });
    expect(checkCooldown(1_000, 1_000)).toMatchObject({ verdict: 'trip', waitMs: 60_000 });
  });

  it('passes with no previous dispatch or a zero cooldown', () => {
    expect(checkCooldown(undefined, 5).verdict).toBe('ok');
    expect(checkCooldown(1_000, 1_000, 0).verdict).toBe('ok');
  });

  it('honours a custom cooldown', () => {
    expect(checkCooldown(0, 4_999, 5_000).verdict).toBe('trip');
    expect(checkCooldown(0, 5_000, 5_000).verdict).toBe('ok');
  });

  it('never asks to wait longer than the cooldown when the clock went backwards', () => {
    expect(checkCooldown(10_000, 5_000, 60_000)).toMatchObject({ verdict: 'trip', waitMs: 60_000 });
  });
});

describe('checkTimeLimit', () => {
  it('trips at exactly the limit, warns from 90 %', () => {
    expect(checkTimeLimit('impl', 0, 899, 1000).verdict).toBe('ok');
    expect(checkTimeLimit('impl', 0, 900, 1000)).toMatchObject({ verdict: 'warn', reason: 'TIME_WARNING' });
    expect(checkTimeLimit('impl', 0, 999, 1000).verdict).toBe('warn');
    expect(checkTimeLimit('impl', 0, 1000, 1000)).toMatchObject({ verdict: 'trip', reason: 'TIME_LIMIT_EXCEEDED', current: 1000 });
  });

  it('says the times for people', () => {
    expect(checkTimeLimit('stage impl', 0, 3_600_000, 3_600_000).detail).toBe('stage impl has worked 1 h, its limit is 1 h');
    expect([formatMs(500), formatMs(3_000), formatMs(90_000), formatMs(1_800_000), formatMs(5_400_000)]).toEqual(['500 ms', '3 s', '1 min 30 s', '30 min', '1 h 30 min']);
  });
});
