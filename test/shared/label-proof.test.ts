import { generateKeyPairSync } from 'node:crypto';
import { publicKeyOf, signDecision, signLabel } from '../../src/client/approver-keys';
import { verifyDecisionProof } from '../../src/shared/decision-proof';
import { verifyLabelSignature, type LabelFields } from '../../src/shared/label-proof';

/** An outcome label signed by the CLI (`warden label`), checked as `warden eval` checks it. */

const { privateKey } = generateKeyPairSync('ed25519');
const publicKey = publicKeyOf(privateKey);
const fields: LabelFields = { intentId: 'i-1', label: 'risky', by: 'alice', reason: 'it dropped a table', source: 'label' };
const proof = signLabel(privateKey, fields);

test("the signature verifies under the labeller's key only, and names it", () => {
  expect(proof.publicKey).toBe(publicKey);
  expect(verifyLabelSignature(publicKey, fields, proof)).toBe(true);
  expect(verifyLabelSignature(publicKeyOf(generateKeyPairSync('ed25519').privateKey), fields, proof)).toBe(false);
});

test('every signed field counts: change any one and the signature fails', () => {
  const changes: Array<Partial<LabelFields>> = [{ intentId: 'i-2' }, { label: 'benign' }, { by: 'bob' }, { reason: 'another reason' }, { reason: undefined }, { source: 'revert' }];
  for (const change of changes) expect(verifyLabelSignature(publicKey, { ...fields, ...change }, proof)).toBe(false);
  expect(verifyLabelSignature(publicKey, fields, { ...proof, nonce: '0'.repeat(64) })).toBe(false);
});

test("a label's signature is not a decision's, nor the other way round", () => {
  const decision = signDecision(privateKey, 'i-1', { gate: 'merge', decision: 'reject', by: 'alice', reason: 'it dropped a table' }, '2026-11-26T00:00:00.000Z');
  expect(verifyLabelSignature(publicKey, fields, decision)).toBe(false);
  expect(verifyDecisionProof(publicKey, { intentId: 'i-1', gate: 'merge', decision: 'reject', by: 'alice', reason: 'it dropped a table' }, { ...proof, gateOpenedAt: proof.signedAt })).toBe(false);
  // A garbled signature is a refusal, not an error.
  expect(verifyLabelSignature(publicKey, fields, { ...proof, signature: 'zz' })).toBe(false);
});
