import { createHash } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import type { State, Worker } from '@temporalio/worker';

/**
 * A host's name when the worker is not given one (`warden worker --host`): the machine's name and
 * a hash of the worker's worktree folder, so two workers with their own disks on one machine are
 * two hosts, and a restarted worker is the host it was.
 */
export function defaultHostName(worktreeRoot: string): string {
  const machine = os.hostname().replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 40) || 'host';
  return `${machine}-${createHash('sha256').update(path.resolve(worktreeRoot)).digest('hex').slice(0, 8)}`;
}

/**
 * One Warden worker: a Temporal worker on the shared task queue (workflows, and activities of
 * intents not placed yet) and one on this host's own queue (the stages of intents whose worktree
 * is here). Run and shut down together, like one worker: when either stops on an error, the other
 * is shut down and the error is the run's.
 */
export class WardenWorker {
  constructor(
    readonly shared: Worker,
    readonly host: Worker,
    /** This host's task queue. */
    readonly hostQueue: string,
  ) {}

  /** The identity both workers poll with. */
  get identity(): string {
    return this.shared.options.identity;
  }

  getState(): State {
    return this.shared.getState();
  }

  run(): Promise<void> {
    const stopping = (other: Worker) => (error: unknown) => {
      if (other.getState() === 'RUNNING') other.shutdown();
      throw error;
    };
    return Promise.all([this.shared.run().catch(stopping(this.host)), this.host.run().catch(stopping(this.shared))]).then(() => undefined);
  }

  shutdown(): void {
    for (const worker of [this.host, this.shared]) if (worker.getState() === 'RUNNING') worker.shutdown();
  }

  /** Runs until `work` settles, then shuts down and waits for both to stop; the worker's failure is thrown if it came first. */
  async runUntil<R>(work: Promise<R> | (() => Promise<R>)): Promise<R> {
    const running = this.run();
    const stoppedEarly = running.then(() => {
      throw new Error('the worker stopped before the work it ran for ended');
    });
    try {
      return await Promise.race([typeof work === 'function' ? work() : work, stoppedEarly]);
    } finally {
      this.shutdown();
      stoppedEarly.catch(() => undefined);
      await running;
    }
  }
}
