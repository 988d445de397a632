import { ed25519 } from '@noble/curves/ed25519';
import { utf8ToBytes } from '@noble/hashes/utils';

/*
 * The proof a gate decision carries: an Ed25519 signature by the approver's key over what was
 * decided, where, and when. The workflow checks it (the update's handler, deterministic: pure
 * computation), so a free-text name is no longer enough to decide a gate. Pure JavaScript
 * (@noble/curves) because it runs inside the workflow sandbox, where node:crypto is not.
 */

/** Hex of a 32-byte Ed25519 public key, as the config lists it after `ed25519:`. */
export const PUBLIC_KEY_PREFIX = 'ed25519:';
const HEX = /^[0-9a-f]*$/;

/** What a signed decision adds to its payload. */
export interface DecisionProof {
  /** 32 random bytes, hex: each signature decides once. */
  readonly nonce: string;
  /** ISO time of signing (the approver's clock). */
  readonly signedAt: string;
  /** The pending gate's `requestedAt`: the signature is for this opening of the gate only. */
  readonly gateOpenedAt: string;
  /** Ed25519 signature (64 bytes, hex) over {@link decisionMessage}. */
  readonly signature: string;
}

/** The decided fields the signature covers. */
export interface SignedFields {
  readonly intentId: string;
  readonly gate: string;
  readonly decision: string;
  readonly by: string;
  readonly reason?: string;
  readonly conditions?: readonly string[];
  readonly document?: string;
}

/**
 * The exact bytes signed: a fixed label, then the fields as JSON in a fixed order. Absent
 * optional fields are `null`, so "no reason" cannot be turned into an empty one.
 */
export function decisionMessage(fields: SignedFields, proof: Pick<DecisionProof, 'nonce' | 'signedAt' | 'gateOpenedAt'>): Uint8Array {
  const ordered = [
    'warden-decision-v2',
    fields.intentId,
    fields.gate,
    fields.decision,
    fields.by,
    fields.reason ?? null,
    fields.conditions ?? null,
    fields.document ?? null,
    proof.nonce,
    proof.signedAt,
    proof.gateOpenedAt,
  ];
  return utf8ToBytes(JSON.stringify(ordered));
}

/** Whether `text` is a public key as the config writes it (`ed25519:` + 64 hex digits). */
export function isPublicKey(text: string): boolean {
  return text.startsWith(PUBLIC_KEY_PREFIX) && text.length === PUBLIC_KEY_PREFIX.length + 64 && HEX.test(text.slice(PUBLIC_KEY_PREFIX.length));
}

/** Structural problems of a proof, or undefined: lengths and alphabets, before any curve math. */
export function proofShapeProblem(raw: unknown): string | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return 'expected an object';
  const proof = raw as Record<string, unknown>;
  const hex = (field: string, length: number) => typeof proof[field] === 'string' && (proof[field] as string).length === length && HEX.test(proof[field] as string);
  if (!hex('nonce', 64)) return 'nonce: expected 64 hex digits';
  if (!hex('signature', 128)) return 'signature: expected 128 hex digits';
  for (const field of ['signedAt', 'gateOpenedAt']) {
    const value = proof[field];
    if (typeof value !== 'string' || value.length > 40 || Number.isNaN(Date.parse(value))) return `${field}: expected an ISO time`;
  }
  return undefined;
}

/** True when `proof.signature` is `publicKey`'s signature of the decision. Never throws. */
export function verifyDecisionProof(publicKey: string, fields: SignedFields, proof: DecisionProof): boolean {
  if (!isPublicKey(publicKey)) return false;
  try {
    return ed25519.verify(proof.signature, decisionMessage(fields, proof), publicKey.slice(PUBLIC_KEY_PREFIX.length));
  } catch {
    return false;
  }
}
