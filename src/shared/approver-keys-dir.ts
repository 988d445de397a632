import os from 'node:os';
import path from 'node:path';

/**
 * Where approvers' private keys live: `$WARDEN_APPROVER_KEYS`, else `warden/approvers` in the
 * user's config folder (`$XDG_CONFIG_HOME`, else `~/.config`). Outside every worktree; the
 * sandbox hides it (see sandbox.ts).
 */
export function approverKeysDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.WARDEN_APPROVER_KEYS) return path.resolve(env.WARDEN_APPROVER_KEYS);
  const config = env.XDG_CONFIG_HOME ? path.resolve(env.XDG_CONFIG_HOME) : path.join(env.HOME || os.homedir(), '.config');
  return path.join(config, 'warden', 'approvers');
}
