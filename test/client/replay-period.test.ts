import type { ReplayComparison } from '../../src/client/replay-comparison';
import { formatPeriod, verdictOf, type PeriodEntry } from '../../src/client/replay-period';

/** How `warden replay --since` sorts a replayed intent, and the table it prints. */

function comparison(overrides: Partial<ReplayComparison>): ReplayComparison {
  return {
    intentId: 'a',
    replayId: 'replay-1-a',
    outcome: { then: 'merged', now: 'merged' },
    stages: [],
    gates: { then: [{ gate: 'merge', decision: 'approve' }], now: [{ gate: 'merge', stage: 'review', decision: 'approve', wouldOpen: false }] },
    merged: true,
    wouldMerge: true,
    changed: false,
    ...overrides,
  };
}

test('merged then and not now is stopped; a new gate is gated; a divergence says nothing of the config; the rest pass', () => {
  expect(verdictOf(comparison({}))).toBe('pass');
  expect(verdictOf(comparison({ outcome: { then: 'merged', now: 'failed' }, wouldMerge: false, error: 'the blast radius …' }))).toBe('stopped');
  expect(verdictOf(comparison({ gates: { then: [], now: [{ gate: 'lld', stage: 'lld', decision: 'approve', wouldOpen: true }] } }))).toBe('gated');
  expect(verdictOf(comparison({ outcome: { then: 'merged', now: 'failed' }, wouldMerge: false, error: 'diverged at stage impl attempt 1 call 2: …' }))).toBe('diverged');
  // Failed then and now: the config changes nothing for it.
  expect(verdictOf(comparison({ outcome: { then: 'failed', now: 'failed' }, merged: false, wouldMerge: false, error: 'tests failed' }))).toBe('pass');
});

test('the table lists each verdict with its intents by id and why', () => {
  const entries: PeriodEntry[] = [
    { intentId: 'i-1', verdict: 'pass', outcome: { then: 'merged', now: 'merged' }, wouldOpen: [] },
    { intentId: 'i-2', verdict: 'gated', outcome: { then: 'merged', now: 'merged' }, wouldOpen: [{ gate: 'lld', stage: 'lld' }] },
    { intentId: 'i-3', verdict: 'stopped', outcome: { then: 'merged', now: 'failed' }, wouldOpen: [], error: 'blast radius exceeded' },
  ];
  expect(formatPeriod(entries, new Date('2026-11-01T00:00:00Z'))).toEqual([
    '3 intent(s) recorded since 2026-11-01T00:00:00.000Z, replayed against the config given',
    '',
    'would now be stopped (merged then, not now): 1',
    '  i-3  blast radius exceeded',
    'would now wait at a gate the original did not open: 1',
    '  i-2  lld gate at lld',
    'pass as before: 1',
    '  i-1  merged',
    'could not be replayed (the recording has no answer for a request): 0',
  ]);
});
