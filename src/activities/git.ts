import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../shared/errors';
import { launch } from './launcher';

/**
 * Commits made by Warden carry this identity, so they work on machines with no git config. And no
 * file-system monitor: a repository's config could name one, and git would run it on every status.
 */
export const WARDEN_GIT_IDENTITY: readonly string[] = ['-c', 'user.name=Warden', '-c', 'user.email=warden@localhost', '-c', 'commit.gpgsign=false', '-c', 'core.fsmonitor=false'];

export interface GitResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly code: number;
}

/** What a git call may add to its environment (a separate index, fixed commit dates). */
export interface GitOptions {
  readonly env?: Readonly<Record<string, string>>;
}

/** Runs git in `cwd` (from the launcher: see launcher.ts) and returns its output whatever the exit code. */
export async function gitRaw(cwd: string, args: readonly string[], options: GitOptions = {}): Promise<GitResult> {
  try {
    const { stdout, stderr } = await launch('git', [...WARDEN_GIT_IDENTITY, ...args], {
      cwd,
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, ...options.env, GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C' },
    });
    return { stdout, stderr, code: 0 };
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; code?: number | string };
    if (typeof e.code !== 'number') throw error; // git itself could not start
    return { stdout: e.stdout ?? '', stderr: e.stderr ?? '', code: e.code };
  }
}

/** Runs git in `cwd`; a non-zero exit becomes a retryable `GIT_FAILED` failure. */
export async function git(cwd: string, args: readonly string[], options: GitOptions = {}): Promise<string> {
  const result = await gitRaw(cwd, args, options);
  if (result.code !== 0) throw gitFailed(cwd, args, result);
  return result.stdout.trim();
}

/** The retryable `GIT_FAILED` failure of a git command that exited non-zero. */
export function gitFailed(cwd: string, args: readonly string[], result: GitResult): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.GitFailed,
    message: `git ${args.join(' ')} failed in ${cwd} (exit ${result.code}): ${result.stderr.trim().slice(-500)}`,
  });
}

/** True if `ref` names an existing commit in the repository at `cwd`. */
export async function refExists(cwd: string, ref: string): Promise<boolean> {
  return (await gitRaw(cwd, ['rev-parse', '--verify', '--quiet', `${ref}^{commit}`])).code === 0;
}

/** Runs `work` with a git index of its own (GIT_INDEX_FILE in a temporary folder): no worktree's index is touched. */
export async function withTemporaryIndex<T>(work: (options: GitOptions) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'warden-index-'));
  try {
    return await work({ env: { GIT_INDEX_FILE: path.join(dir, 'index') } });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Stages everything in the worktree and commits it; returns the new commit, or undefined if nothing changed. */
export async function commitAll(worktreePath: string, message: string): Promise<string | undefined> {
  await git(worktreePath, ['add', '-A']);
  const staged = await gitRaw(worktreePath, ['diff', '--cached', '--quiet']);
  if (staged.code === 0) return undefined; // nothing to commit: a retried activity lands here
  await git(worktreePath, ['commit', '--no-verify', '-q', '-m', message]);
  return git(worktreePath, ['rev-parse', 'HEAD']);
}

/** One file of a diff: its path and the lines added and deleted (binary files count 0). */
export interface FileChange {
  readonly path: string;
  readonly added: number;
  readonly deleted: number;
}

/**
 * What the branch checked out in `worktreePath` changed against where it left `baseBranch`,
 * file by file, Warden's own lineage folder excluded.
 */
export async function changesAgainstBase(worktreePath: string, baseBranch: string): Promise<FileChange[]> {
  const base = await git(worktreePath, ['merge-base', 'HEAD', `refs/heads/${baseBranch}`]);
  const numstat = await git(worktreePath, ['diff', '--numstat', base, 'HEAD', '--', '.', ':(exclude)docs/lineage']);
  return numstat
    .split('\n')
    .filter(Boolean)
    .map((row) => {
      const [added, deleted, file] = row.split('\t');
      return { path: file ?? '?', added: Number(added) || 0, deleted: Number(deleted) || 0 }; // binary files show "-"
    });
}

/** Worktrees of a repository: path → checked-out branch (full ref), from `git worktree list`. */
export async function listWorktrees(repoPath: string): Promise<Map<string, string | undefined>> {
  const out = await git(repoPath, ['worktree', 'list', '--porcelain']);
  const result = new Map<string, string | undefined>();
  let current: string | undefined;
  for (const line of out.split('\n')) {
    if (line.startsWith('worktree ')) {
      current = line.slice('worktree '.length);
      result.set(current, undefined);
    } else if (line.startsWith('branch ') && current) {
      result.set(current, line.slice('branch '.length));
    }
  }
  return result;
}
