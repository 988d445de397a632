import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { git, gitRaw } from '../../activities/git';
import type { IntentState } from '../../shared/state';

/**
 * Where a gate page reads an intent's change from: its worktree when that is on this machine,
 * else the work branch its host pushed to the repository's remote (config `placement`), fetched
 * into a cache of the web app's own. So a web app on any host shows the whole change.
 */
export interface ChangeReader {
  /** A file of the intent's branch, relative to the repository's root; undefined when it has none. */
  read(relative: string): Promise<string | undefined>;
  /** The change against `baseBranch`, without the lineage; undefined when it cannot be read. */
  diff(baseBranch: string): Promise<string | undefined>;
}

const DIFF_ARGS = ['diff', '--no-color', '--no-ext-diff'];
const WITHOUT_LINEAGE = ['--', '.', ':(exclude)docs/lineage'];

/** The reader for `state`, or undefined when its change is neither here nor pushed. */
export async function changeReaderFor(state: IntentState, cacheDir: string): Promise<ChangeReader | undefined> {
  if (state.worktreePath && existsSync(state.worktreePath)) return worktreeReader(state.worktreePath);
  if (state.pushedWork) return pushedReader(state.pushedWork, cacheDir).catch(() => undefined);
  return undefined;
}

function worktreeReader(worktreePath: string): ChangeReader {
  return {
    async read(relative) {
      const file = path.join(worktreePath, relative);
      return existsSync(file) && statSync(file).isFile() ? readFileSync(file, 'utf8') : undefined;
    },
    async diff(baseBranch) {
      return git(worktreePath, [...DIFF_ARGS, `${baseBranch}...HEAD`, ...WITHOUT_LINEAGE]).catch(() => undefined);
    },
  };
}

async function pushedReader(pushed: NonNullable<IntentState['pushedWork']>, cacheDir: string): Promise<ChangeReader> {
  const repo = path.join(cacheDir, `${createHash('sha256').update(pushed.remoteUrl).digest('hex').slice(0, 16)}.git`);
  if (!existsSync(path.join(repo, 'HEAD'))) {
    await mkdir(repo, { recursive: true });
    await git(repo, ['init', '-q', '--bare']);
  }
  const work = `refs/warden/view/${pushed.branch}`;
  await git(repo, ['fetch', '-q', '--no-tags', pushed.remoteUrl, `+refs/heads/${pushed.branch}:${work}`]);
  return {
    async read(relative) {
      const shown = await gitRaw(repo, ['show', `${work}:${relative}`]);
      return shown.code === 0 ? shown.stdout : undefined;
    },
    async diff(baseBranch) {
      const base = `refs/warden/view-base/${baseBranch}`;
      const fetched = await gitRaw(repo, ['fetch', '-q', '--no-tags', pushed.remoteUrl, `+refs/heads/${baseBranch}:${base}`]);
      if (fetched.code !== 0) return undefined;
      return git(repo, [...DIFF_ARGS, `${base}...${work}`, ...WITHOUT_LINEAGE]).catch(() => undefined);
    },
  };
}
