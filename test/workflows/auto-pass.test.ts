import { autoPassRefusals, type AutoPassEvidence } from '../../src/workflows/auto-pass';

/** What the sandbox saw agent-written code try keeps the merge gate a person's, whatever else vouches for the agent. */
const vouched: AutoPassEvidence = {
  triage: { risk: 'LOW', confidence: 0.95, rationale: '', structured: true, predicted: { files: 1, lines: 5 } } as unknown as AutoPassEvidence['triage'],
  review: { verdict: 'APPROVE', findings: [], summary: '', scores: { strategicAlignment: 9, autonomyAppropriateness: 9, outputQuality: 9, resourceEfficiency: 9, learningApplication: 9 } } as unknown as AutoPassEvidence['review'],
  cascadeHigh: false,
  hostNetwork: false,
  unconfinedCode: false,
  attemptCount: 0,
};

test('sandbox attempts refuse the automatic merge, and only the merge', () => {
  expect(autoPassRefusals('merge', vouched)).toEqual([]);
  expect(autoPassRefusals('merge', { ...vouched, attemptCount: 3 })).toEqual([expect.stringMatching(/the sandbox saw agent-written code try 3 thing/)]);
  expect(autoPassRefusals('lld', { ...vouched, attemptCount: 3 })).toEqual([]);
});
