/**
 * Ctrl-C while a command follows an intent. The intent is durable and does not belong to the
 * command, so the first Ctrl-C (or SIGTERM) only asks the command to stop following: it then
 * stops what it started (its worker, an embedded server) and says how to go on. Later ones do
 * not cut that short, so no server is left behind without its owner.
 */

import type { RunIntentResult } from './run-intent';

/** Exit code of `warden run` stopped by Ctrl-C while its intent goes on (130 is kept for a cancelled intent). */
export const EXIT_STOPPED_FOLLOWING = 3;

export interface Interrupts {
  /** Aborted at the first SIGINT or SIGTERM. */
  readonly signal: AbortSignal;
  /** Gives the signals back to their default handling. */
  dispose(): void;
}

export function catchInterrupts(print: (line: string) => void): Interrupts {
  const controller = new AbortController();
  const onSignal = (name: NodeJS.Signals): void => {
    if (!controller.signal.aborted) {
      controller.abort(new Error(`interrupted (${name})`));
      return;
    }
    print('stopping: waiting for the worker and any server this command started to stop');
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    signal: controller.signal,
    dispose() {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}

/**
 * Reports a run whose following Ctrl-C stopped and returns its exit code; undefined for any
 * other result (report.ts reports those).
 */
export function reportStoppedFollowing(
  result: RunIntentResult,
  printJson: ((value: unknown) => void) | undefined,
  print: (line: string) => void,
): number | undefined {
  if (!result.detached || !result.interrupted) return undefined;
  if (printJson) printJson(result);
  else for (const line of result.next) print(line);
  return EXIT_STOPPED_FOLLOWING;
}
