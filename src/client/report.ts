import { formatUsd } from '../shared/format';
import path from 'node:path';
import type { RunIntentResult } from './run-intent';

/** Exit code of `warden run` stopped by Ctrl-C while its intent goes on (130 is kept for a cancelled intent). */
export const EXIT_STOPPED_FOLLOWING = 3;

/**
 * Prints how a followed intent ended and returns the exit code: 0 merged (or detached),
 * 1 rejected or failed, 130 cancelled, 3 when Ctrl-C stopped the following (the intent goes on).
 */
export function reportResult(result: RunIntentResult, printJson: ((value: unknown) => void) | undefined, print: (line: string) => void): number {
  if (result.detached && result.interrupted) {
    if (printJson) printJson(result);
    else for (const line of result.next) print(line);
    return EXIT_STOPPED_FOLLOWING;
  }
  if (printJson) printJson(result);
  if (result.detached) {
    if (!printJson) print(`follow it with: warden status ${result.intentId}`);
    return 0;
  }
  switch (result.kind) {
    case 'completed': {
      const { outcome } = result;
      if (outcome.status === 'merged') {
        if (!printJson) {
          print(`merged ${outcome.mergedCommit}${outcome.pullRequestUrl ? ` through ${outcome.pullRequestUrl}` : ''} (spend ${formatUsd(outcome.spendUsd)})`);
          if (outcome.lineagePath) print(`lineage: ${outcome.lineagePath}`);
          if (outcome.lineageRef) print(`lineage ref: ${outcome.lineageRef} (git show ${outcome.lineageRef}:FILE in the repository)`);
        }
        return 0;
      }
      if (!printJson) print(`rejected: ${outcome.reason ?? 'no reason given'}; nothing was merged${outcome.lineagePath ? `; lineage kept at ${outcome.lineagePath}` : ''}`);
      return 1;
    }
    case 'failed':
      if (!printJson) print(`failed: ${result.message}; nothing was merged${result.state?.lineagePath ? `; lineage kept at ${path.resolve(result.state.lineagePath)}` : ''}`);
      return 1;
    case 'cancelled':
      if (!printJson) print('cancelled; nothing was merged');
      return 130;
  }
}
