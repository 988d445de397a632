import { ed25519 } from '@noble/curves/ed25519';
import { utf8ToBytes } from '@noble/hashes/utils';
import { isPublicKey, PUBLIC_KEY_PREFIX } from './decision-proof';

/*
 * An outcome label (`warden label`) signed like a gate decision: by the labeller's approver key,
 * over what was labelled, so a keyed approver's label in the ledger is theirs and not a name typed
 * by someone else. Its own fixed first field: a label's signature can never pass for a decision's.
 */

/** The labelled fields the signature covers. */
export interface LabelFields {
  readonly intentId: string;
  readonly label: string;
  readonly by: string;
  readonly reason?: string;
  readonly source: string;
}

/** The exact bytes signed: a fixed label, then the fields as JSON in a fixed order (no reason is `null`). */
export function labelMessage(fields: LabelFields, proof: { readonly nonce: string; readonly signedAt: string }): Uint8Array {
  return utf8ToBytes(JSON.stringify(['warden-label-v1', fields.intentId, fields.label, fields.by, fields.reason ?? null, fields.source, proof.nonce, proof.signedAt]));
}

/** True when `signature` (hex) is `publicKey`'s signature of the label. Never throws. */
export function verifyLabelSignature(publicKey: string, fields: LabelFields, proof: { readonly nonce: string; readonly signedAt: string; readonly signature: string }): boolean {
  if (!isPublicKey(publicKey)) return false;
  try {
    return ed25519.verify(proof.signature, labelMessage(fields, proof), publicKey.slice(PUBLIC_KEY_PREFIX.length));
  } catch {
    return false;
  }
}
