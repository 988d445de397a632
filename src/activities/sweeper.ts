import { existsSync } from 'node:fs';
import { readdir, readFile, realpath } from 'node:fs/promises';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import type { LedgerQueries } from '../ledger/ledger-queries';
import type { AuditStore } from '../ledger/audit-store';
import { FailureType } from '../shared/errors';
import { redactDeep, type Redactor } from '../shared/redact';
import { deterministicUuid } from '../ledger/event-id';
import type { SafetyEventInput } from '../ledger/types';
import { branchForIntent } from '../shared/ids';
import { parseDuration } from '../shared/duration';
import { DEFAULT_KEEP_FOR_RESUME } from '../shared/intent';
import { refExists } from './git';
import { dropExpiredResumeRefs, keepForResume } from './resume-ref';
import { sweepTrash, trashOf } from './trash';
import { removeWorktree } from './worktree';
import { recordNamedBy } from './worktree-records';

/*
 * The sweeper: what an intent leaves behind when it ends without its own cleanup. An intent
 * removes its worktree as it ends, whatever the ending; one that was terminated (the Web UI,
 * `temporal workflow terminate`) or timed out never runs that code. The sweeper finds the
 * worktrees of intents whose workflow is closed, removes them as the intent would have (the
 * lineage kept, the branch kept for a resume), empties the worktree trash, and writes one ledger
 * row per intent it cleaned, after an INTENT_TERMINATED row for one that was terminated. It also
 * drops the resume refs (src/activities/resume-ref.ts) whose retention has passed. A
 * worker sweeps when it starts, and installs the `warden-sweep` schedule, which sweeps every
 * 30 s (src/workers/sweep-schedule.ts).
 */

/** What Temporal says of an intent's workflow. */
export interface IntentWorkflowStatus {
  /** RUNNING, COMPLETED, FAILED, CANCELLED, TERMINATED, TIMED_OUT, CONTINUED_AS_NEW; NOT_FOUND when there is none. */
  readonly status: string;
  /** How it closed, when history says (e.g. "terminated by temporal-cli:root@host: reason"). */
  readonly how?: string;
  /** The run that closed: one ledger row per run swept. */
  readonly runId?: string;
  /** When it closed. */
  readonly closeTime?: Date;
}

/**
 * How long after its workflow closed an intent is swept. An activity learns that its workflow is
 * gone on its next heartbeat (a second or so) and stops; until then it may still write into the
 * worktree, and would make the folder again after the sweep.
 */
export const SWEEP_AFTER_CLOSE_MS = 10_000;

export type IntentStatusReader = (intentId: string) => Promise<IntentWorkflowStatus>;

export interface SweepDeps {
  readonly worktreeRoot: string;
  readonly lineageRoot: string;
  readonly statusOf: IntentStatusReader;
  readonly recordEvent: (event: SafetyEventInput) => Promise<unknown>;
  /** Repositories intents worked in (the ledger's): their resume refs past their date are dropped. */
  readonly repositories?: () => Promise<readonly string[]>;
  readonly logger: Logger;
  /** Default {@link SWEEP_AFTER_CLOSE_MS}. */
  readonly afterCloseMs?: number;
  readonly now?: () => number;
}

export interface SweptIntent {
  readonly intentId: string;
  readonly repoPath: string;
  readonly status: string;
  readonly lineageCopy?: string;
}

export interface SweepReport {
  readonly swept: readonly SweptIntent[];
  /** Worktrees of intents still running (theirs to clean), or closed too recently: the next sweep's. */
  readonly running: number;
  /** Worktrees whose intent this namespace does not know, or whose repository is gone: left alone, named. */
  readonly leftAlone: readonly string[];
  /** Resume refs dropped because their retention (lineage.keepForResume) had passed. */
  readonly droppedResumeRefs: readonly { readonly intentId: string; readonly repoPath: string }[];
}

/** Cleans what closed intents left in `worktreeRoot`. Each intent is cleaned once: a second sweep finds nothing of it. */
export async function sweepClosedIntents(deps: SweepDeps): Promise<SweepReport> {
  const swept: SweptIntent[] = [];
  const leftAlone: string[] = [];
  let running = 0;
  for (const worktreePath of await intentWorktrees(deps.worktreeRoot)) {
    const intentId = path.basename(worktreePath);
    const repoPath = await repositoryOf(worktreePath);
    const { status, how, runId, closeTime } = await deps.statusOf(intentId);
    const settling = closeTime !== undefined && (deps.now ?? Date.now)() - closeTime.getTime() < (deps.afterCloseMs ?? SWEEP_AFTER_CLOSE_MS);
    if (status === 'RUNNING' || settling) {
      running++;
      continue;
    }
    if (status === 'NOT_FOUND' || repoPath === undefined) {
      leftAlone.push(worktreePath);
      continue;
    }
    if (status === 'TERMINATED') {
      // The intent's own code never saw its end: this row is its ending, before the cleanup's.
      await deps.recordEvent({
        id: deterministicUuid('intent-terminated', `${intentId}/${runId ?? worktreePath}`),
        timestamp: closeTime ?? new Date(),
        eventType: 'INTENT_TERMINATED',
        severity: 'high',
        intentId,
        reason: `the intent's workflow was terminated from outside Warden${how ? ` (${how})` : ''}: nothing it was doing finished; its agent and tests were stopped`,
        suggestion: `warden status ${intentId} says where it stopped; warden resume ${intentId} --from STAGE continues from its branch`,
        metadata: { workflowStatus: status, ...(how ? { how } : {}), ...(runId ? { runId } : {}) },
      });
    }
    // Its own cleanup would have kept its commits for a resume: the default retention, the intent's setting being out of reach here.
    await keepForResume(repoPath, intentId, parseDuration(DEFAULT_KEEP_FOR_RESUME), new Date((deps.now ?? Date.now)()));
    const { lineageCopy } = await removeWorktree({ repoPath, intentId, worktreeRoot: deps.worktreeRoot, lineageRoot: deps.lineageRoot, deleteBranch: false });
    const branch = branchForIntent(intentId);
    const branchLeft = await refExists(repoPath, `refs/heads/${branch}`);
    const what = status.toLowerCase().replace(/_/g, ' ');
    await deps.recordEvent({
      id: deterministicUuid('intent-swept', `${intentId}/${runId ?? worktreePath}`),
      timestamp: new Date(),
      eventType: 'INTENT_SWEPT',
      severity: 'medium',
      intentId,
      reason: `the intent was ${what}${how ? ` (${how})` : ''} without its own cleanup: its worktree was removed${lineageCopy ? `, its lineage kept at ${lineageCopy}` : ''}${branchLeft ? `, its branch ${branch} kept` : ''}`,
      suggestion: branchLeft ? `warden resume ${intentId} --from STAGE continues from the branch; git branch -D ${branch} drops it` : undefined,
      metadata: { workflowStatus: status, worktreePath, repoPath, lineageCopy: lineageCopy ?? null, branchKept: branchLeft },
    });
    deps.logger.warn({ intentId, status, worktreePath }, 'swept the worktree of an intent that ended without its cleanup');
    swept.push({ intentId, repoPath, status, ...(lineageCopy ? { lineageCopy } : {}) });
  }
  await sweepTrash(trashOf(deps.worktreeRoot));
  const droppedResumeRefs = await dropExpired(deps, swept.map((s) => s.repoPath));
  return { swept, running, leftAlone, droppedResumeRefs };
}

/** Drops the resume refs past their date in every repository the ledger knows (and those just swept). */
async function dropExpired(deps: SweepDeps, sweptRepos: readonly string[]): Promise<{ intentId: string; repoPath: string }[]> {
  const repos = new Set([...sweptRepos, ...((await deps.repositories?.()) ?? [])]);
  const dropped: { intentId: string; repoPath: string }[] = [];
  for (const repoPath of repos) {
    if (!existsSync(path.join(repoPath, '.git'))) continue;
    for (const intentId of await dropExpiredResumeRefs(repoPath, new Date((deps.now ?? Date.now)()))) {
      deps.logger.info({ intentId, repoPath }, 'dropped the resume ref of an intent: its retention (lineage.keepForResume) had passed');
      dropped.push({ intentId, repoPath });
    }
  }
  return dropped;
}

/** Every intent worktree under the root: `<root>/<repo folder>/<intent id>`, the trash left out. */
async function intentWorktrees(root: string): Promise<string[]> {
  const trash = trashOf(root);
  const found: string[] = [];
  for (const repoFolder of await readdir(root, { withFileTypes: true }).catch(() => [])) {
    const folder = path.join(root, repoFolder.name);
    if (!repoFolder.isDirectory() || folder === trash) continue;
    for (const intent of await readdir(folder, { withFileTypes: true }).catch(() => [])) {
      if (intent.isDirectory() && existsSync(path.join(folder, intent.name, '.git'))) found.push(path.join(folder, intent.name));
    }
  }
  return found;
}

/** The repository a linked worktree belongs to, from git's records (its admin folder's `commondir`). */
async function repositoryOf(worktreePath: string): Promise<string | undefined> {
  const admin = await recordNamedBy(worktreePath);
  if (!admin) return undefined;
  const common = (await readFile(path.join(admin, 'commondir'), 'utf8').catch(() => '')).trim();
  const commonDir = await realpath(path.resolve(admin, common || '../..')).catch(() => undefined);
  if (!commonDir || path.basename(commonDir) !== '.git') return undefined;
  return path.dirname(commonDir);
}

/** The sweep as an activity (the `warden-sweep` schedule's workflow runs it), with the worker's ledger. */
export function createSweepActivities(deps: {
  readonly worktreeRoot: string;
  readonly lineageRoot: string;
  readonly logger: Logger;
  readonly redact: Redactor;
  readonly ledger: { readonly audit: Pick<AuditStore, 'recordSafetyEvent'>; readonly queries: Pick<LedgerQueries, 'intentRepositories'> };
  readonly intentStatus?: IntentStatusReader;
}) {
  return {
    async sweepClosedIntents(): Promise<SweepReport> {
      const statusOf = deps.intentStatus;
      if (!statusOf) {
        throw ApplicationFailure.create({ type: FailureType.InvalidIntent, message: 'this worker has no Temporal client to ask which intents are closed', nonRetryable: true });
      }
      return sweepClosedIntents({
        worktreeRoot: deps.worktreeRoot,
        lineageRoot: deps.lineageRoot,
        statusOf,
        // A termination reason is free text: it is scrubbed like everything else that reaches the ledger.
        recordEvent: (event) => deps.ledger.audit.recordSafetyEvent(redactDeep(event, deps.redact)),
        repositories: () => deps.ledger.queries.intentRepositories(),
        logger: deps.logger,
      });
    },
  };
}
