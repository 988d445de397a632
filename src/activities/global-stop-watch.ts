import type { GlobalStop } from '../ledger/types';

/** Why a watched call was aborted: the global stop, as the ledger recorded it. */
export class GlobalStopSet extends Error {
  constructor(readonly stop: GlobalStop) {
    super(`global stop set by ${stop.by ?? 'someone'}: ${stop.reason ?? 'no reason given'}`);
    this.name = 'GlobalStopSet';
  }
}

/**
 * Watches the ledger's global stop flag while agent work runs, so `warden stop --all` reaches a
 * running agent within one read instead of on its activity's next heartbeat (the only way
 * Temporal delivers an activity's cancellation). One loop per worker reads the flag every
 * `everyMs` while at least one watched call runs, and none while none does. A failed read is
 * skipped: cancellation through Temporal still stops the call.
 */
export class GlobalStopWatch {
  private readonly watchers = new Set<AbortController>();
  private looping = false;

  constructor(
    private readonly read: () => Promise<GlobalStop>,
    private readonly everyMs = 250,
  ) {}

  /** Runs `fn` with a signal that aborts (reason: GlobalStopSet) once the global stop is set. */
  async during<T>(fn: (stopSignal: AbortSignal) => Promise<T>): Promise<T> {
    const watcher = new AbortController();
    this.watchers.add(watcher);
    if (!this.looping) void this.loop();
    try {
      return await fn(watcher.signal);
    } finally {
      this.watchers.delete(watcher);
    }
  }

  private async loop(): Promise<void> {
    this.looping = true;
    try {
      while (this.watchers.size > 0) {
        await new Promise((resolve) => setTimeout(resolve, this.everyMs).unref());
        if (this.watchers.size === 0) break;
        const stop = await this.read().catch(() => undefined);
        if (!stop?.stopped) continue;
        for (const watcher of this.watchers) watcher.abort(new GlobalStopSet(stop));
      }
    } finally {
      this.looping = false;
    }
  }
}
