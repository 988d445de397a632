/**
 * Ctrl-C while a command follows an intent. The intent is durable and does not belong to the
 * command, so the first Ctrl-C (or SIGTERM) only asks the command to stop following: it then
 * stops what it started (its worker, an embedded server) and says how to go on. Later ones do
 * not cut that short, so no server is left behind without its owner.
 */

export interface Interrupts {
  /** Aborted at the first SIGINT or SIGTERM. */
  readonly signal: AbortSignal;
  /** Gives the signals back to their default handling. */
  dispose(): void;
}

/** How many commands in this process catch the signals now (see exitOnInterrupt). */
let catching = 0;

export function catchInterrupts(print: (line: string) => void): Interrupts {
  catching++;
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
      catching--;
    },
  };
}

/**
 * For the CLI process: a signal that no command catches ends it with 128 + the signal's number
 * through process.exit, so 'exit' handlers run (the embedded Temporal server, in a process group
 * of its own, is killed by one) rather than the process dying under them.
 */
export function exitOnInterrupt(): void {
  const onSignal = (name: NodeJS.Signals): void => {
    if (catching === 0) process.exit(name === 'SIGINT' ? 130 : 143);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

/** Resolves at the first SIGINT or SIGTERM; later ones, while the command stops, only print. */
export async function untilInterrupted(print: (line: string) => void): Promise<{ dispose(): void }> {
  const interrupts = catchInterrupts(print);
  await new Promise<void>((resolve) => interrupts.signal.addEventListener('abort', () => resolve(), { once: true }));
  return interrupts;
}
