import { ActivityCancellationType, type ActivityOptions, proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { WardenActivities } from '../activities';
import type { IntentLimitsConfig } from '../shared/limit-settings';
import { parseDuration } from '../shared/duration';
import { NON_RETRYABLE_FAILURES } from '../shared/errors';

/**
 * How one intent calls its activities, by kind of work: each kind has its own timeouts and
 * retries. Bookkeeping (ledger writes, ladder reads, the final cleanup) is short and idempotent,
 * so it runs as local activities on the worker that runs the workflow: no server round trip each.
 */
export interface IntentActivities {
  /** Ledger writes and ladder reads; retried with backoff until PostgreSQL is back, so no event is lost. */
  readonly ledger: WardenActivities;
  /** The same ledger writes as ordinary activities, for those that signals drive (see `LedgerRoute`). */
  readonly ledgerQueued: WardenActivities;
  /** Git bookkeeping and mechanical checks (worktree, documents, change size, archive, merge). */
  readonly git: WardenActivities;
  /** The final worktree cleanup, which runs after cancellation too (see `intentActivities` for where). */
  readonly cleanup: WardenActivities;
  /** Agent calls: they heartbeat, and a stopped intent waits until the agent's process is dead. */
  readonly agents: WardenActivities;
  /** Test runs: bounded by the test timeout, heartbeating, waited for when cancelled. */
  readonly tests: WardenActivities;
  /** Calls to the team's forge: a few tries where a retry may help (unreachable, 5xx), then the intent hears of it. */
  readonly forge: WardenActivities;
}

/** Where an intent's worktree activities go, once a host holds the worktree (see host-routing.ts). */
export interface HostTarget {
  readonly taskQueue?: string;
  /** How long a call may wait for that host before the intent moves (config `placement.moveAfter`). */
  readonly moveAfter?: string;
}

/**
 * The activity proxies of an intent with these limits: each kind's, for the shared task queue or
 * for one host's (`target`). The final cleanup is a local activity until a host holds the
 * worktree, and an ordinary activity on that host's queue from then on.
 */
export function intentActivities(limits: IntentLimitsConfig, target: HostTarget = {}): IntentActivities {
  const where: Partial<ActivityOptions> = {
    ...(target.taskQueue ? { taskQueue: target.taskQueue } : {}),
    ...(target.taskQueue && target.moveAfter ? { scheduleToStartTimeout: parseDuration(target.moveAfter) } : {}),
  };
  const ledgerOptions: ActivityOptions = { startToCloseTimeout: '30s', retry: { initialInterval: '1s', maximumInterval: '10s', backoffCoefficient: 2 } };
  // Git bookkeeping is idempotent, so it may retry freely.
  const gitOptions: ActivityOptions = {
    startToCloseTimeout: '2m',
    retry: { maximumAttempts: 5, initialInterval: '1s', nonRetryableErrorTypes: [...NON_RETRYABLE_FAILURES] },
  };
  return {
    ledger: proxyLocalActivities<WardenActivities>(ledgerOptions),
    ledgerQueued: proxyActivities<WardenActivities>(ledgerOptions),
    git: proxyActivities<WardenActivities>({ ...gitOptions, ...where }),
    cleanup: target.taskQueue ? proxyActivities<WardenActivities>({ ...gitOptions, ...where }) : proxyLocalActivities<WardenActivities>(gitOptions),
    agents: proxyActivities<WardenActivities>({
      ...where,
      startToCloseTimeout: parseDuration(limits.stageTimeout),
      heartbeatTimeout: '10s',
      cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
      // Five tries, backing off to a minute: an open circuit or an empty token bucket asks for a
      // later retry (nextRetryDelay) and should not cost the intent its stage.
      retry: { maximumAttempts: 5, initialInterval: '2s', maximumInterval: '1m', nonRetryableErrorTypes: [...NON_RETRYABLE_FAILURES] },
    }),
    forge: proxyActivities<WardenActivities>({
      ...where,
      startToCloseTimeout: '1m',
      retry: { maximumAttempts: 4, initialInterval: '2s', maximumInterval: '20s', nonRetryableErrorTypes: [...NON_RETRYABLE_FAILURES] },
    }),
    tests: proxyActivities<WardenActivities>({
      ...where,
      startToCloseTimeout: parseDuration(limits.testTimeout) + 60_000,
      heartbeatTimeout: '10s',
      cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
      // A test run that fails or times out is a result, not an error: what is retried is the
      // run itself cut off (its worker died, a heartbeat was lost), which should not cost the
      // intent its impl attempt. Five tries, as for agent calls.
      retry: { maximumAttempts: 5, initialInterval: '2s', maximumInterval: '1m', nonRetryableErrorTypes: [...NON_RETRYABLE_FAILURES] },
    }),
  };
}
