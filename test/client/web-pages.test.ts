import { gatePage, inboxPage, messagePage } from '../../src/client/web/pages';
import type { ReviewPackage } from '../../src/shared/review-package';
import type { IntentState } from '../../src/shared/state';

/**
 * The web app shows goals, diffs, documents and reviews that agents and repositories wrote:
 * every such text reaches the page escaped, in element text and in attributes alike.
 */

const HOSTILE = `<script>alert(1)</script><img src=x onerror=alert(2)>"'&\x1b[31m`;
const ESCAPED = '&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;&quot;&#39;&amp;\x1b[31m';

const pkg: ReviewPackage = {
  intentId: HOSTILE,
  goal: HOSTILE,
  branch: HOSTILE,
  baseBranch: HOSTILE,
  environment: HOSTILE,
  agent: HOSTILE,
  ladderLevel: 1,
  risk: { class: 'LOW', confidence: 0.5, rationale: HOSTILE },
  plan: HOSTILE,
  predicted: { files: 1, lines: 2 },
  actual: { files: 1, lines: 2, added: 1, deleted: 1, spendUsd: HOSTILE },
  diffSummary: [{ path: HOSTILE, added: 1, deleted: 1 }],
  moreFiles: 0,
  tests: [{ attempt: 1, passed: true, summary: HOSTILE }],
  review: { verdict: 'APPROVE', findings: [{ severity: 'low', category: HOSTILE, message: HOSTILE, path: HOSTILE }] as never, summary: HOSTILE },
  ledgerTrace: [HOSTILE],
};

const state = {
  goal: HOSTILE,
  status: HOSTILE,
  spendUsd: HOSTILE,
  decisions: [],
  attempts: { impl: 1 },
  pendingGate: { gate: 'merge', prompt: HOSTILE, requestedAt: HOSTILE, timeoutAt: HOSTILE, package: pkg, document: { checks: HOSTILE, attempts: 1 } },
} as unknown as IntentState;

/** No hostile markup survives: neither the tags nor a quote that would close an attribute. */
function expectEscaped(html: string): void {
  expect(html).not.toContain('<script>');
  expect(html).not.toContain('<img');
  expect(html).not.toContain(`"'&`);
  expect(html).toContain(ESCAPED);
}

test('a gate page escapes the goal, prompt, review package, diff and documents', () => {
  const html = gatePage({
    intentId: HOSTILE,
    gate: 'merge',
    state,
    as: { approver: HOSTILE, via: 'link', signed: false, expiresAt: HOSTILE },
    hidden: { [HOSTILE]: HOSTILE },
    action: HOSTILE,
    documents: [{ name: HOSTILE, text: HOSTILE }],
    diff: `+${HOSTILE}\n-${HOSTILE}\n ${HOSTILE}`,
    editableText: HOSTILE,
    mergeChecks: true,
  });
  expectEscaped(html);
  // Every value that came in went out escaped: as many escaped copies as the page shows.
  expect(html.split(ESCAPED).length - 1).toBeGreaterThanOrEqual(25);
});

test('a view-only gate page, the inbox and message pages escape theirs', () => {
  expectEscaped(gatePage({ intentId: 'i', gate: 'merge', state, viewOnly: { why: HOSTILE, commands: { approve: HOSTILE, reject: HOSTILE } }, hidden: {}, action: '/x', documents: [], mergeChecks: false }));
  expectEscaped(inboxPage([{ intentId: HOSTILE, gate: HOSTILE, prompt: HOSTILE, ageMinutes: 1, timeoutAt: HOSTILE, page: HOSTILE } as never]));
  expectEscaped(messagePage(HOSTILE, HOSTILE, false, HOSTILE));
});

test("a design gate's page shows the design reviewer's verdict and findings, escaped", () => {
  const review = { verdict: 'BLOCK', reviewer: HOSTILE, model: 'gpt-4.1', summary: HOSTILE, findings: [{ severity: 'high', category: 'tests', message: HOSTILE, path: HOSTILE }], total: 3 };
  const lld = { ...state, pendingGate: { gate: 'lld', prompt: 'Approve?', requestedAt: 'now', timeoutAt: 'later', document: { checks: 'passed', attempts: 2, review } } } as unknown as IntentState;
  const html = gatePage({ intentId: 'i', gate: 'lld', state: lld, hidden: {}, action: '/x', documents: [], mergeChecks: false });
  expectEscaped(html);
  expect(html).toContain(`<tr><th>Design review</th><td>BLOCK by ${ESCAPED} (gpt-4.1) — ${ESCAPED}<ul><li>[high/tests] ${ESCAPED} (${ESCAPED})</li></ul>… and 2 more</td></tr>`);
});
