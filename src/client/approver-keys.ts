import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { UserError } from '../shared/errors';
import { decisionMessage, PUBLIC_KEY_PREFIX, type DecisionProof } from '../shared/decision-proof';
import type { Decision } from '../shared/decisions';
import { labelMessage, type LabelFields } from '../shared/label-proof';

/*
 * Approvers' key pairs: the private key stays in the approver's config folder (mode 0600); the
 * public key goes into Warden's config under `approvers`. `warden approve` & co. sign with it.
 */

const NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,99}$/;

export function approverKeyPath(dir: string, name: string): string {
  if (!NAME.test(name)) throw new UserError(`an approver name is letters, digits, dots, dashes, underscores or @ (at most 100), not "${name}"`);
  return path.join(dir, `${name}.key`);
}

/** Creates `name`'s key pair in `dir` (0700) as `<name>.key` (0600); returns the public key line for the config. */
export function initApproverKey(dir: string, name: string, options: { readonly force?: boolean } = {}): { readonly keyPath: string; readonly publicKey: string } {
  const keyPath = approverKeyPath(dir, name);
  if (existsSync(keyPath) && !options.force) {
    throw new UserError(`${keyPath} exists already: that is ${name}'s key. Use --force to replace it (decisions signed with the old key will then be refused once the config lists the new one)`);
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const { privateKey } = generateKeyPairSync('ed25519');
  writeFileSync(keyPath, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  chmodSync(keyPath, 0o600);
  return { keyPath, publicKey: publicKeyOf(privateKey) };
}

/** `name`'s private key, or undefined when there is none. A key others can read is refused. */
export function readApproverKey(dir: string, name: string): KeyObject | undefined {
  const keyPath = approverKeyPath(dir, name);
  if (!existsSync(keyPath)) return undefined;
  const mode = statSync(keyPath).mode & 0o777;
  if (mode & 0o077) throw new UserError(`${keyPath} can be read by others (mode ${mode.toString(8)}): chmod 600 it, and consider the key exposed`);
  try {
    return createPrivateKey(readFileSync(keyPath, 'utf8'));
  } catch (error) {
    throw new UserError(`${keyPath} is not a private key: ${(error as Error).message}`);
  }
}

/** The config's form of a key's public half: `ed25519:` and its 32 bytes in hex. */
export function publicKeyOf(key: KeyObject): string {
  // An Ed25519 SPKI ends with the 32 bytes of the key itself.
  const der = (key.type === 'private' ? createPublicKey(key) : key).export({ type: 'spki', format: 'der' });
  return `${PUBLIC_KEY_PREFIX}${der.subarray(der.length - 32).toString('hex')}`;
}

/** Signs `decision` for this opening of the gate (its `requestedAt`) of `intentId`. */
export function signDecision(key: KeyObject, intentId: string, decision: Decision, gateOpenedAt: string, now: Date = new Date()): DecisionProof {
  const unsigned = { nonce: randomBytes(32).toString('hex'), signedAt: now.toISOString(), gateOpenedAt };
  const message = decisionMessage(
    { intentId, gate: decision.gate, decision: decision.decision, by: decision.by, reason: decision.reason, conditions: decision.conditions, document: decision.document },
    unsigned,
  );
  return { ...unsigned, signature: sign(null, message, key).toString('hex') };
}

/** Signs an outcome label (`warden label`) with the labeller's key. */
export function signLabel(key: KeyObject, fields: LabelFields, now: Date = new Date()): { readonly nonce: string; readonly signedAt: string; readonly signature: string; readonly publicKey: string } {
  const unsigned = { nonce: randomBytes(32).toString('hex'), signedAt: now.toISOString() };
  return { ...unsigned, signature: sign(null, labelMessage(fields, unsigned), key).toString('hex'), publicKey: publicKeyOf(key) };
}
