import type { CheckState, ForgeCheck } from '../shared/forge';

/**
 * One check per context where a forge reports a context twice (a commit status and a check run of
 * the same name on GitHub): the worst of them stands, so that a passing twin never hides a failure.
 */

const SEVERITY: Readonly<Record<CheckState, number>> = { success: 0, pending: 1, failure: 2, error: 3 };

export function worstPerContext(checks: readonly ForgeCheck[]): ForgeCheck[] {
  const worst = new Map<string, ForgeCheck>();
  for (const check of checks) {
    const seen = worst.get(check.context);
    if (seen === undefined || SEVERITY[check.state] > SEVERITY[seen.state]) worst.set(check.context, check);
  }
  return [...worst.values()];
}
