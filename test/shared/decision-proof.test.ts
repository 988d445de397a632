import { generateKeyPairSync, sign } from 'node:crypto';
import { publicKeyOf, signDecision } from '../../src/client/approver-keys';
import { decisionMessage, isPublicKey, proofShapeProblem, verifyDecisionProof, type SignedFields } from '../../src/shared/decision-proof';
import { parseDecision, MAX_BY_LENGTH } from '../../src/shared/decisions';

/** Signed by Node's crypto (the CLI), checked by the pure-JavaScript verifier (the workflow). */

const { privateKey } = generateKeyPairSync('ed25519');
const publicKey = publicKeyOf(privateKey);
const other = publicKeyOf(generateKeyPairSync('ed25519').privateKey);
const fields: SignedFields = { intentId: 'i-1', gate: 'merge', decision: 'approve-with-conditions', by: 'alice', conditions: ['keep the API'] };
const proof = signDecision(privateKey, 'i-1', { gate: 'merge', decision: 'approve-with-conditions', by: 'alice', conditions: ['keep the API'] }, '2026-11-26T00:00:00.000Z');

test("the CLI's signature verifies in the workflow's verifier, under the signer's key only", () => {
  expect(isPublicKey(publicKey)).toBe(true);
  expect(verifyDecisionProof(publicKey, fields, proof)).toBe(true);
  expect(verifyDecisionProof(other, fields, proof)).toBe(false);
});

test('every signed field counts: change any one and the signature fails', () => {
  const changes: Array<Partial<SignedFields>> = [
    { intentId: 'i-2' },
    { gate: 'security' },
    { decision: 'approve' },
    { by: 'bob' },
    { reason: 'why not' },
    { conditions: ['keep the API', 'and more'] },
    { conditions: undefined },
  ];
  for (const change of changes) expect(verifyDecisionProof(publicKey, { ...fields, ...change }, proof)).toBe(false);
  for (const key of ['nonce', 'signedAt', 'gateOpenedAt'] as const) {
    const altered = { ...proof, [key]: key === 'nonce' ? 'f'.repeat(64) : '2026-11-26T00:00:01.000Z' };
    expect(verifyDecisionProof(publicKey, fields, altered)).toBe(false);
  }
});

test('an empty reason and no reason sign differently', () => {
  const bytes = (reason?: string) => Buffer.from(decisionMessage({ ...fields, reason }, proof)).toString();
  expect(bytes('')).not.toBe(bytes(undefined));
  const signature = sign(null, decisionMessage({ ...fields, reason: '' }, proof), privateKey).toString('hex');
  expect(verifyDecisionProof(publicKey, fields, { ...proof, signature })).toBe(false);
});

test('malformed proofs and keys are refused by shape, and never throw', () => {
  expect(proofShapeProblem(proof)).toBeUndefined();
  expect(proofShapeProblem(null)).toBe('expected an object');
  expect(proofShapeProblem({ ...proof, nonce: 'xyz' })).toMatch(/^nonce/);
  expect(proofShapeProblem({ ...proof, signature: 'A'.repeat(128) })).toMatch(/^signature/);
  expect(proofShapeProblem({ ...proof, signedAt: 'yesterday' })).toMatch(/^signedAt/);
  expect(proofShapeProblem({ ...proof, gateOpenedAt: 'x'.repeat(10_000) })).toMatch(/^gateOpenedAt/);
  expect(isPublicKey('ed25519:xyz')).toBe(false);
  expect(verifyDecisionProof('ed25519:' + '0'.repeat(64), fields, proof)).toBe(false);
  expect(verifyDecisionProof(publicKey, fields, { ...proof, signature: '0'.repeat(128) })).toBe(false);
});

test('parseDecision keeps a well-formed proof, refuses a bad one, and caps the name', () => {
  const base = { gate: 'merge', decision: 'approve', by: 'alice' };
  expect(parseDecision({ ...base, proof }).ok && (parseDecision({ ...base, proof }) as { decision: { proof: unknown } }).decision.proof).toEqual(proof);
  expect(parseDecision({ ...base, proof: { ...proof, extra: 1 } })).toMatchObject({ ok: true, decision: { proof } });
  expect(parseDecision({ ...base, proof: 'signed, honestly' })).toEqual({ ok: false, problems: 'proof: expected an object' });
  expect(parseDecision({ ...base, by: 'a'.repeat(MAX_BY_LENGTH + 1) })).toEqual({ ok: false, problems: `by: at most ${MAX_BY_LENGTH} characters` });
});
