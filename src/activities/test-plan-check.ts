import { existsSync, lstatSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { judgeTestPlan, readTestPlan, type PlannedTestResult } from '../safety/test-plan';
import { changesAgainstBase } from './git';
import { latestArtifact } from './lineage';
import { readTestStatuses } from './test-results';

/** Most planned tests a check reports (the ledger row and the review package are bounded). */
export const MAX_PLANNED_TESTS = 30;

/** What the check of the spec's test plan after impl found (see src/safety/test-plan.ts). */
export interface TestPlanCheck {
  /** False when the spec has no test plan (no table with a File column): nothing was checked. */
  readonly planned: boolean;
  readonly ok: boolean;
  /** Each planned test and how it stands, the first MAX_PLANNED_TESTS of them. */
  readonly tests: readonly PlannedTestResult[];
  /** One line per broken promise, for impl's next attempt. */
  readonly problems: readonly string[];
  /** The spec the plan was read from, relative to the worktree. */
  readonly specPath?: string;
}

/** Largest test file read: a planned test's name is looked for in its first bytes only. */
const MAX_TEST_FILE_BYTES = 2 * 1024 * 1024;

/**
 * Checks the latest spec's test plan against the worktree after impl: each planned test is in its
 * file, that file is part of the change (unless the plan marks it existing), and the test run
 * logged at `testLogPath` printed it as run, not skipped. Reads only.
 */
export async function checkTestPlanIn(r: {
  readonly worktreePath: string;
  readonly intentId: string;
  readonly baseBranch: string;
  readonly testLogPath?: string;
  /** The change's files against the base, when the caller listed them in the same activity call. */
  readonly changedFiles?: readonly string[];
}): Promise<TestPlanCheck> {
  const specPath = await latestArtifact(r.worktreePath, r.intentId, 'spec');
  const plan = specPath ? readTestPlan(readFileSync(path.join(r.worktreePath, specPath), 'utf8')) : [];
  if (plan.length === 0) return { planned: false, ok: true, tests: [], problems: [], ...(specPath ? { specPath } : {}) };
  const changedFiles = r.changedFiles ?? (await changesAgainstBase(r.worktreePath, r.baseBranch)).map((c) => c.path);
  const log = r.testLogPath ? readInside(r.worktreePath, r.testLogPath) : undefined;
  const verdict = judgeTestPlan(plan, { read: (file) => readInside(r.worktreePath, file), changedFiles, statuses: readTestStatuses(log ?? '') });
  return { planned: true, ok: verdict.ok, tests: verdict.tests.slice(0, MAX_PLANNED_TESTS), problems: verdict.problems, specPath };
}

/** A file's text when `relative` names a regular file inside the worktree (never outside, never .git, never through a symlink). */
function readInside(worktreePath: string, relative: string): string | undefined {
  const target = path.resolve(worktreePath, relative);
  const rel = path.relative(worktreePath, target);
  if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel) || rel.split(path.sep)[0] === '.git') return undefined;
  if (!existsSync(target) || !lstatSync(target).isFile()) return undefined;
  return readFileSync(target, 'utf8').slice(0, MAX_TEST_FILE_BYTES);
}
