import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { approverKeysDir } from '../shared/approver-keys-dir';
import { UserError } from '../shared/errors';

/** Where the decision-link secret lives: beside the approvers' keys, which the sandbox hides from every agent. */
export function linkSecretPath(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(approverKeysDir(env), 'link-secret');
}

/**
 * The secret that makes and checks decision links: `$WARDEN_LINK_SECRET` (at least 32
 * characters; give every worker and web app of a cluster the same), else the file at
 * linkSecretPath, made on first use (0600).
 */
export function readLinkSecret(env: NodeJS.ProcessEnv = process.env): Buffer {
  const given = env.WARDEN_LINK_SECRET;
  if (given !== undefined) {
    if (given.length < 32) throw new UserError('WARDEN_LINK_SECRET must be at least 32 characters (e.g. openssl rand -hex 32)');
    return Buffer.from(given, 'utf8');
  }
  const file = linkSecretPath(env);
  if (!existsSync(file)) {
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    // wx: two processes making it at once keep the first one's.
    try {
      writeFileSync(file, randomBytes(32).toString('hex'), { mode: 0o600, flag: 'wx' });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
  const mode = statSync(file).mode & 0o777;
  if (mode & 0o077) throw new UserError(`${file} can be read by others (mode ${mode.toString(8)}): chmod 600 it, and delete it to make a new one if it may have been seen`);
  chmodSync(file, 0o600);
  const text = readFileSync(file, 'utf8').trim();
  if (text.length < 32) throw new UserError(`${file} holds a secret shorter than 32 characters: delete it, and the next command makes a new one`);
  return Buffer.from(text, 'utf8');
}

/** The decision-link secret, or why there is none: then links can only show a gate, not decide it. */
export type LinkSecret = { readonly secret: Buffer; readonly missing?: undefined } | { readonly secret?: undefined; readonly missing: string };

/**
 * readLinkSecret, or why it failed (a read-only home, an unsafe file): a worker or web app still
 * runs without it, and says why its links cannot decide.
 */
export function linkSecretOrWhyNot(env: NodeJS.ProcessEnv = process.env): LinkSecret {
  try {
    return { secret: readLinkSecret(env) };
  } catch (error) {
    return { missing: `Warden has no secret to sign decision links with (${(error as Error).message})` };
  }
}
