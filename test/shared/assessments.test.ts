import { readDesignReviewAssessment, readReviewAssessment, readTriageAssessment } from '../../src/shared/assessment-parsing';
import { confidenceRefusal, criticalSecurityFindings, judgeRefusal, UNANSWERED_REVIEW, UNANSWERED_TRIAGE } from '../../src/shared/assessments';

const fenced = (value: unknown): string => `Some words first.\n\n\`\`\`json\n${JSON.stringify(value)}\n\`\`\`\n`;

describe('triage assessment', () => {
  test('a valid JSON block is read and validated, defaults filled in', () => {
    const a = readTriageAssessment(fenced({ risk: 'HIGH', confidence: 0.92, predicted: { files: 3, lines: 40 } }));
    expect(a).toEqual({ risk: 'HIGH', confidence: 0.92, affectedPaths: [], rationale: '', predicted: { files: 3, lines: 40 }, structured: true });
  });

  test('an invalid block says what is wrong; the risk named in the text is kept, confidence is 0', () => {
    const a = readTriageAssessment(`Risk: HIGH\n${fenced({ risk: 'SEVERE', confidence: 2, predicted: { files: 1, lines: 5 } })}`);
    expect(a).toMatchObject({ risk: 'HIGH', confidence: 0, structured: false, predicted: { files: 1, lines: 5 } });
    expect(a.problems).toMatch(/risk: .*confidence: /);
  });

  test('no block and no named risk: MEDIUM, unsure; broken JSON is reported', () => {
    expect(readTriageAssessment('looks fine to me')).toEqual({ risk: 'MEDIUM', confidence: 0, affectedPaths: [], rationale: '', structured: false });
    expect(readTriageAssessment('{"risk": LOW}').problems).toMatch(/does not parse/);
  });
});

describe('review assessment', () => {
  test('verdict, findings and scores from the block', () => {
    const finding = { severity: 'critical', category: 'Security', message: 'token logged' };
    const r = readReviewAssessment(fenced({ verdict: 'BLOCK', findings: [finding, { severity: 'low', category: 'style', message: 'name' }] }));
    expect(r).toMatchObject({ verdict: 'BLOCK', structured: true });
    expect(criticalSecurityFindings(r)).toEqual([finding]);
  });

  test('without a block only a leading APPROVE approves', () => {
    expect(readReviewAssessment('APPROVE\n\nlooks right')).toMatchObject({ verdict: 'APPROVE', structured: false, findings: [] });
    expect(readReviewAssessment('I would not APPROVE this')).toMatchObject({ verdict: 'BLOCK', structured: false });
  });
});

describe('design review assessment', () => {
  test('a valid block gives the verdict and findings', () => {
    const a = readDesignReviewAssessment('BLOCK\n```json\n{"verdict": "BLOCK", "summary": "no tests", "findings": [{"severity": "high", "category": "tests", "message": "nothing tests slugify"}]}\n```');
    expect(a).toEqual({ verdict: 'BLOCK', summary: 'no tests', findings: [{ severity: 'high', category: 'tests', message: 'nothing tests slugify' }], structured: true });
  });
  test('without a block: the verdict the answer starts with, else REQUEST_CHANGES (the person decides, the author is not sent back)', () => {
    expect(readDesignReviewAssessment('request_changes: the spec misses a case').verdict).toBe('REQUEST_CHANGES');
    expect(readDesignReviewAssessment('BLOCK — wrong files').verdict).toBe('BLOCK');
    expect(readDesignReviewAssessment('ok')).toMatchObject({ verdict: 'REQUEST_CHANGES', structured: false });
    expect(readDesignReviewAssessment('```json\n{"verdict": "MAYBE"}\n```')).toMatchObject({ verdict: 'REQUEST_CHANGES', structured: false, problems: expect.stringMatching(/verdict/) });
  });
});

test("the workflow's stand-ins for a missing answer are what an empty answer reads as", () => {
  expect(readTriageAssessment('')).toEqual(UNANSWERED_TRIAGE);
  expect(readReviewAssessment('')).toEqual(UNANSWERED_REVIEW);
});

describe('judge rule (average ≥ 4.0, no score ≤ 1, autonomy appropriateness > 2)', () => {
  const scores = { strategicAlignment: 4, autonomyAppropriateness: 4, outputQuality: 4, resourceEfficiency: 4, learningApplication: 4 };
  test('at the threshold it allows; just under it refuses', () => {
    expect(judgeRefusal(scores)).toBeUndefined();
    expect(judgeRefusal({ ...scores, learningApplication: 3.9 })).toBe('judge average 3.98 < 4.0');
  });
  test('a score of 1 refuses even with a high average; autonomy 2 refuses', () => {
    expect(judgeRefusal({ strategicAlignment: 5, autonomyAppropriateness: 5, outputQuality: 5, resourceEfficiency: 5, learningApplication: 1 })).toBe('a judge score is 1 (critical failure)');
    expect(judgeRefusal({ strategicAlignment: 5, autonomyAppropriateness: 2, outputQuality: 5, resourceEfficiency: 5, learningApplication: 5 })).toBe('autonomy appropriateness 2 ≤ 2');
    expect(judgeRefusal(undefined)).toBe('no judge scores');
  });
});

describe('confidence gates: LOW 0.5, MEDIUM 0.7, HIGH 0.9', () => {
  test.each([
    ['LOW', 0.5, undefined],
    ['LOW', 0.49, 'confidence 49% < 50% for LOW risk'],
    ['MEDIUM', 0.7, undefined],
    ['MEDIUM', 0.69, 'confidence 69% < 70% for MEDIUM risk'],
    ['HIGH', 0.9, undefined],
    ['HIGH', 0.89, 'confidence 89% < 90% for HIGH risk'],
    ['PROHIBITED', 1, 'PROHIBITED risk'],
  ] as const)('%s at %p', (risk, confidence, expected) => {
    expect(confidenceRefusal({ risk, confidence })).toBe(expected);
  });
});
