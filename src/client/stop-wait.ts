/**
 * How long a stop waits for a cancelled intent to close before it terminates it: the default of
 * `warden stop --wait`, in a module of its own so the command's help loads nothing else.
 */
export const STOP_WAIT_MS = 60_000;
