import type pg from 'pg';

/**
 * Asks the ledger's PostgreSQL a trivial question on a timer and reports whether it answered, so
 * that an unreachable ledger is a metric (`warden_ledger_up`) an alert can read, not only the
 * retries of the writes that happen to be waiting on it.
 */
export interface LedgerProbe {
  stop(): void;
}

export interface LedgerProbeOptions {
  readonly pool: Pick<pg.Pool, 'query'>;
  /** Told the outcome of every probe. */
  readonly report: (up: boolean) => void;
  /** Between probes, and how long one may take before it counts as unanswered. */
  readonly everyMs?: number;
}

export const LEDGER_PROBE_EVERY_MS = 5_000;

export function startLedgerProbe(options: LedgerProbeOptions): LedgerProbe {
  const everyMs = options.everyMs ?? LEDGER_PROBE_EVERY_MS;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const probe = async (): Promise<void> => {
    let guard: NodeJS.Timeout | undefined;
    // A server that takes the connection and never answers is as unreachable as one that refuses it.
    const unanswered = new Promise<false>((resolve) => (guard = setTimeout(() => resolve(false), everyMs)));
    const answered = options.pool.query('SELECT 1').then(
      () => true,
      () => false,
    );
    const up = await Promise.race([answered, unanswered]);
    clearTimeout(guard);
    if (stopped) return;
    options.report(up);
    timer = setTimeout(() => void probe(), everyMs);
    timer.unref();
  };
  void probe();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
