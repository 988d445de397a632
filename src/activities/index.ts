import { withActivityKinds } from '../shared/activity-kinds';
import { GlobalStopWatch } from './global-stop-watch';
import { createIntentCheckActivities } from './intent-check';
import type { IntentRules } from '../config/intent-completion';
import { createLedgerActivities, type LedgerActivityDeps } from './ledger-activities';
import { createReviewPackageActivities } from './review-package';
import { createDocumentEditActivities } from './document-edits';
import { createStageActivities, type ActivityDeps } from './stage-activities';
import { createSweepActivities, type IntentStatusReader } from './sweeper';
import { NotificationOutbox } from '../ledger/notification-outbox';
import { createNotificationActivities, type NotificationDeps } from './notifications/delivery';
import { createForgeActivities, type ForgeActivityDeps } from './forge-activities';

export type { ActivityDeps, StageInput, StageResult, TestRunResult, IntentRef } from './stage-activities';
export type { LedgerAnchor, LedgerBatch, LedgerRow } from './ledger-activities';
export type { WorktreeRef } from './worktree';
export type { TestPlanCheck } from './test-plan-check';

/** Everything activities need, injected by the worker. */
export type WardenActivityDeps = ActivityDeps & LedgerActivityDeps & {
  /** Which intents are closed (the worker's Temporal client): the sweeper asks before it cleans. */
  readonly intentStatus?: IntentStatusReader;
  /** Where a gate's notification links to (default: no link). */
  readonly gateLink?: NotificationDeps['gateLink'];
  /** The forge adapters (src/forge) and the environment that holds their tokens. */
  readonly forge: ForgeActivityDeps;
  /** The worker's config, which every intent is completed from before it runs (see intent-completion.ts). */
  readonly intentRules?: IntentRules;
};

/** Every activity the Warden worker registers, built from injected dependencies. */
export function createActivities(deps: WardenActivityDeps) {
  const globalStop = new GlobalStopWatch(() => deps.ledger.globalStop.current());
  return withActivityKinds({
    ...createIntentCheckActivities({ ledger: deps.ledger, intentRules: deps.intentRules }),
    ...createStageActivities(deps, globalStop),
    ...createLedgerActivities(deps),
    ...createReviewPackageActivities(deps),
    ...createDocumentEditActivities(deps),
    ...createSweepActivities(deps),
    ...createForgeActivities(deps.forge),
    ...createNotificationActivities({ outbox: new NotificationOutbox(deps.ledger.pool), env: process.env, gateLink: deps.gateLink, ledger: deps.ledger, redact: deps.redact, fetch: deps.fetch }),
  });
}

/** The activity interface workflows import (as a type only). */
export type WardenActivities = ReturnType<typeof createActivities>;
