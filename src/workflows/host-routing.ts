import { ActivityFailure, TimeoutFailure } from '@temporalio/workflow';
import type { WardenActivities } from '../activities';

/** The kinds of an intent's activities that work in its worktree, and so run on the host that holds it. */
export const HOST_KINDS = ['git', 'agents', 'tests', 'forge', 'cleanup'] as const;
export type HostKind = (typeof HOST_KINDS)[number];

/** What a host-bound call does when the host that holds the worktree did not take it in time. */
export type OnHostLost = (kind: HostKind, lostQueue: string) => Promise<void>;

/**
 * Where an intent's worktree activities go. Until the worktree is made they go to the shared task
 * queue (any host); from then on to the queue of the host that made it (`placeOn`). Each kind's
 * activities are reached through a stand-in that reads the current queue at call time, so code
 * holding `run.activities.git` follows a move. With a `moveAfter` (config `placement`), a call that
 * no worker of that host takes within it (the host is gone) is handed to `onLost`, which moves the
 * intent, and is made again where it moved to. Without one a call waits for its host.
 */
export class HostRouting {
  private queue?: string;
  private readonly proxies = new Map<string, WardenActivities>();
  /** A move under way: calls that lose their host meanwhile wait for it rather than move again. */
  private moving?: Promise<void>;

  constructor(
    private readonly proxyFor: (kind: HostKind, taskQueue: string | undefined) => WardenActivities,
    private readonly onLost: OnHostLost,
  ) {}

  /** The queue of the host that holds the worktree, once there is one. */
  get hostQueue(): string | undefined {
    return this.queue;
  }

  placeOn(hostQueue: string | undefined): void {
    this.queue = hostQueue;
  }

  /** The activities of `kind` on the shared queue, whichever host holds the worktree. */
  anyHost(kind: HostKind): WardenActivities {
    return this.proxy(kind, undefined);
  }

  /** A stand-in for the activities of `kind` that calls them on the current host and follows moves. */
  route(kind: HostKind): WardenActivities {
    return new Proxy({} as WardenActivities, {
      get: (_target, name) => {
        // Not a thenable: an async function may return the stand-in.
        if (typeof name !== 'string' || name === 'then') return undefined;
        return async (...args: unknown[]) => {
          for (;;) {
            const queue = this.queue;
            try {
              const call = (this.proxy(kind, queue) as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[name]!;
              return await call(...args);
            } catch (error) {
              if (queue === undefined || !hostWasLost(error)) throw error;
              // Another call may have moved the intent meanwhile: then only try again there.
              if (this.queue === queue) {
                this.moving ??= this.onLost(kind, queue).finally(() => (this.moving = undefined));
                await this.moving;
              }
            }
          }
        };
      },
    });
  }

  private proxy(kind: HostKind, queue: string | undefined): WardenActivities {
    const key = `${kind}\u0000${queue ?? ''}`;
    let proxy = this.proxies.get(key);
    if (!proxy) {
      proxy = this.proxyFor(kind, queue);
      this.proxies.set(key, proxy);
    }
    return proxy;
  }
}

/** No worker of the host's queue took the activity within its schedule-to-start timeout. */
export function hostWasLost(error: unknown): boolean {
  return error instanceof ActivityFailure && error.cause instanceof TimeoutFailure && error.cause.timeoutType === 'SCHEDULE_TO_START';
}
