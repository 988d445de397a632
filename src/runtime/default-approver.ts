import { userInfo } from 'node:os';

/**
 * Who decides when nobody is named: `warden approve` without `--by`, and a notification's link
 * whose channel names no approver. The config's operator, else $WARDEN_USER, $USER, the OS user.
 */
export function defaultApprover(operator: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  return operator || env.WARDEN_USER || env.USER || osUser() || 'unknown';
}

/** The OS user's name; none when the user has no passwd entry (userInfo throws then, e.g. in a container). */
function osUser(): string | undefined {
  try {
    return userInfo().username;
  } catch {
    return undefined;
  }
}
