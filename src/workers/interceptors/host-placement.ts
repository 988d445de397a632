import type { Context } from '@temporalio/activity';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { ensureClone, fetchBase, fetchWork, finishOnRemote, pushMerge, pushWork } from '../../activities/host-clone';
import { worktreePathFor } from '../../activities/worktree';
import type { Intent } from '../../shared/intent';

export interface HostPlacementDeps {
  /** Where this host keeps its clones of the intents' remotes (under its Warden home). */
  readonly clonesRoot: string;
  readonly worktreeRoot: string;
}

/** Activities that need the remote's base branch as it is now. */
const FRESH_BASE = new Set(['prepareWorktree', 'rebaseOntoBase', 'mergeIntent', 'revertMerge']);

/** Activities that may move the intent branch: their commits are on the remote before the workflow hears of them. */
const MOVES_HEAD = new Set(['prepareWorktree', 'runAgentStage', 'runTests', 'applyDocumentEdits', 'revertMerge', 'rebaseOntoBase', 'checkMergeConditions', 'archiveLineage']);

interface IntentArgument {
  readonly intent: Intent;
  /** prepareWorktree on a host taking the intent over: the commit its last step left. */
  readonly resumeAt?: string;
  /** cleanupIntent: the branch goes too. */
  readonly deleteBranch?: boolean;
}

/**
 * For intents with `placement` (several hosts, no shared disk), every activity of the intent
 * works in this host's own clone of the remote: the intent's `repoPath`, a path on the machine
 * that started it, is replaced by the clone's before the activity sees it. Around the activity:
 * the base is fetched where it must be current, the intent branch is fetched where this host
 * takes the intent over, and what the activity committed is pushed before its result goes back,
 * so that any commit the workflow knows of is on the remote. A merge is pushed to the remote's
 * base; the cleanup deletes the work branch there.
 *
 * Innermost of the worker's interceptors: a refused activity (kill switch, budget) never clones.
 */
export function hostPlacementInterceptor(deps: HostPlacementDeps): ActivityInterceptorsFactory {
  return (ctx: Context) => ({
    inbound: {
      async execute(input, next) {
        const [first, ...rest] = input.args as [IntentArgument | undefined, ...unknown[]];
        const placement = isIntentArgument(first) ? first.intent.placement : undefined;
        if (!first || !placement) return next(input);
        const type = ctx.info.activityType;
        const clone = await ensureClone(deps.clonesRoot, placement);
        const intent: Intent = { ...first.intent, repoPath: clone };
        if (FRESH_BASE.has(type)) await fetchBase(clone, placement.remoteUrl, intent.baseBranch);
        if (type === 'prepareWorktree' && first.resumeAt) await fetchWork(clone, placement.remoteUrl, intent.id, first.resumeAt);
        const result: unknown = await next({ ...input, args: [{ ...first, intent }, ...rest] });
        if (MOVES_HEAD.has(type)) await pushWork(worktreePathFor(deps.worktreeRoot, clone, intent.id), placement.remoteUrl, intent.id);
        if (type === 'mergeIntent') await pushMerge(clone, placement.remoteUrl, intent.baseBranch, intent.id);
        if (type === 'cleanupIntent') await finishOnRemote(clone, placement.remoteUrl, intent.id, first.deleteBranch === true);
        return result;
      },
    },
  });
}

function isIntentArgument(value: unknown): value is IntentArgument {
  return typeof value === 'object' && value !== null && typeof (value as { intent?: unknown }).intent === 'object' && (value as { intent: unknown }).intent !== null;
}
