import { renderReviewPackage, type ReviewPackage } from '../../src/shared/review-package';

const pkg: ReviewPackage = {
  intentId: 'i1',
  goal: 'add slugify',
  branch: 'warden/i1',
  baseBranch: 'main',
  agent: 'quiet',
  ladderLevel: 3,
  risk: { class: 'LOW', confidence: 0.9, rationale: '' },
  plan: '',
  predicted: { files: 1, lines: 5 },
  actual: { files: 1, lines: 5, added: 5, deleted: 0, spendUsd: '0' },
  diffSummary: [{ path: 'lib/strings.js', added: 5, deleted: 0 }],
  moreFiles: 0,
  tests: [],
  ledgerTrace: [],
};

test('what the sandbox saw is listed at the gate, with how many more there were', () => {
  const text = renderReviewPackage({ ...pkg, attempts: { listed: ['the impl agent (attempt 1): connected to port 7233 (Temporal frontend): refused'], total: 3 } });
  expect(text).toContain("**Tried in its sandbox (3; this gate is a person's):**");
  expect(text).toContain('- the impl agent (attempt 1): connected to port 7233 (Temporal frontend): refused');
  expect(text).toContain('- … and 2 more (warden audit lists each)');
  expect(renderReviewPackage(pkg)).not.toContain('Tried in its sandbox');
});
