import { homedir } from 'node:os';
import path from 'node:path';

/**
 * The Warden home: WARDEN_HOME, else ~/.warden, one per user, so tools and state are found from
 * any folder. Relative values are taken from `cwd`.
 */
export function wardenHomeOf(env: NodeJS.ProcessEnv = process.env, cwd: string = process.cwd()): string {
  return path.resolve(cwd, env.WARDEN_HOME || path.join(env.HOME || homedir(), '.warden'));
}
