import { askAtGate, renderPendingGate, type Asker } from '../../src/client/gate-prompt';
import type { PendingGate } from '../../src/shared/state';

const pending: PendingGate = {
  gate: 'merge',
  requestedAt: '2026-11-21T10:00:00.000Z',
  timeoutAt: '2026-11-22T10:00:00.000Z',
  prompt: 'Merge warden/x into main?',
  whyNotAutomatic: 'level L1 does not auto-pass the merge gate',
  package: {
    intentId: 'x',
    goal: 'Add slugify',
    branch: 'warden/x',
    baseBranch: 'main',
    agent: 'scripted',
    ladderLevel: 1,
    risk: { class: 'LOW', confidence: 0.9, rationale: 'one pure function' },
    plan: '# Low-level design\n- lib/strings.js: add slugify',
    predicted: { files: 1, lines: 10 },
    actual: { files: 1, lines: 12, added: 11, deleted: 1, spendUsd: '0.051000' },
    diffSummary: [{ path: 'lib/strings.js', added: 11, deleted: 1 }],
    moreFiles: 0,
    tests: [{ attempt: 1, passed: false, summary: '1 failed, 1 passed' }, { attempt: 2, passed: true, summary: '2 passed' }],
    review: { verdict: 'APPROVE', findings: [{ severity: 'low', category: 'style', message: 'document non-ASCII' }], summary: 'matches the design' },
    testPlan: [
      { requirement: 'digits kept', test: 'slugify keeps digits', file: 'lib/strings.test.js', existing: false, status: 'ran' },
      { requirement: 'capitalize unchanged', test: 'capitalize works', file: 'test/strings.test.js', existing: true, status: 'unverified' },
    ],
    ledgerTrace: ['2026-11-21T09:59:00.000Z RISK_ASSESSED [triage]: risk LOW'],
  },
};

/** Answers the prompt's questions in order, keeping what was asked. */
function scripted(...answers: string[]): Asker & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    async question(text: string) {
      asked.push(text);
      const next = answers.shift();
      if (next === undefined) throw new Error(`no answer left for ${text}`);
      return next;
    },
  };
}

test('the summary shows what is proposed, the risk, the spend, the tests, the review and how to answer', () => {
  const text = renderPendingGate('x', pending);
  for (const part of ['x waits at the merge gate', 'Not passed automatically: level L1', 'Risk: LOW, confidence 90% — one pure function', 'files 1 → 1, lines 10 → 12 (+11 −1), spend $0.051000', '- lib/strings.js (+11 −1)', 'attempt 2: passed (2 passed)', 'Review: APPROVE — matches the design', '[low/style] document non-ASCII', 'RISK_ASSESSED', 'warden approve x']) {
    expect(text).toContain(part);
  }
  for (const part of ['Test plan (spec):', '- ran: `slugify keeps digits` in lib/strings.test.js — digits kept', '- unverified: `capitalize works` in test/strings.test.js (existing) — capitalize unchanged']) {
    expect(text).toContain(part);
  }
});

test.each([
  [['a'], { gate: 'merge', decision: 'approve' }],
  [['r', 'not yet'], { gate: 'merge', decision: 'reject', reason: 'not yet' }],
  [['r', ''], { gate: 'merge', decision: 'reject', reason: 'rejected at the prompt' }],
  [['c', 'keep the API; no new deps'], { gate: 'merge', decision: 'approve-with-conditions', conditions: ['keep the API', 'no new deps'] }],
  [['d'], { gate: 'merge', decision: 'defer' }],
  [['maybe', 'c', ' ', 'a'], { gate: 'merge', decision: 'approve' }],
])('answers %p → %p', async (answers, expected) => {
  const printed: string[] = [];
  const asker = scripted(...answers);
  expect(await askAtGate(asker, 'x', pending, (l) => printed.push(l))).toEqual(expected);
  expect(printed[0]).toContain('Merge warden/x into main?');
});
