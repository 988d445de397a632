import { execFileSync } from 'node:child_process';

/** What git prints in `cwd`, trimmed; undefined when it fails (not a repository, no such ref). */
export function gitOut(cwd: string, args: readonly string[]): string | undefined {
  try {
    return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return undefined;
  }
}
