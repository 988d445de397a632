/**
 * A sample repository with a Warden worktree of it, in a temporary folder removed after the test
 * file, and what git process counts and plain git calls such tests need.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { processTally, tallySince } from '../../src/activities/process-tally';
import { ensureWorktree } from '../../src/activities/worktree';
import { createSampleRepo } from '../../src/client/sample-repo';

/** Git as a person runs it, with an identity of its own. */
export function gitSync(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@localhost', ...args], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

/** Makes sample repositories with a worktree on `warden/<id>`, each in a folder removed after the file's tests. */
export function sampleWorktrees(prefix: string): (id: string) => Promise<{ readonly repo: string; readonly worktreePath: string }> {
  const roots: string[] = [];
  afterAll(() => {
    for (const root of roots) rmSync(root, { recursive: true, force: true });
  });
  return async (id) => {
    const root = mkdtempSync(path.join(tmpdir(), prefix));
    roots.push(root);
    const repo = createSampleRepo(path.join(root, 'repo'));
    const { worktreePath } = await ensureWorktree({ repoPath: repo, baseBranch: 'main', intentId: id, worktreeRoot: path.join(root, 'worktrees') });
    return { repo, worktreePath };
  };
}

/** What `work` returned, and how many git processes Warden started for it. */
export async function gitProcessesOf<T>(work: () => Promise<T>): Promise<{ readonly result: T; readonly git: number }> {
  const before = processTally();
  const result = await work();
  return { result, git: tallySince(before).launched.git ?? 0 };
}
