/**
 * A worktree's staged change committed in the worker, as `git commit` commits it after `git add
 * -A`: the index's tree (the trees its cache says are unchanged kept, the others written loose),
 * a commit on the branch HEAD names, written loose, the branch moved under git's lock file, and
 * the branch's and HEAD's reflogs told. Each agent step ends in such a commit, and `git commit`
 * was a process of its own.
 *
 * Git is asked instead (the answer is 'ask-git') wherever it would do more or otherwise: a hook
 * that runs on a commit or a ref update, hooks or reflogs configured away from their defaults,
 * a config that includes other files, a message git would clean up, an index with unmerged or
 * intent-to-add entries, a branch or HEAD that is not plain loose files, a HEAD commit not loose,
 * or anything `LooseObjectStore` leaves to git (an identity in the environment, a shared
 * repository, a commit encoding).
 */
import { existsSync } from 'node:fs';
import { mkdir, open, readFile, rename, rm, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { commonDirOf, git, gitDirOf, gitFailed, gitRaw, headOf, WARDEN_GIT_PERSON } from './git';
import { readIndex, type IndexEntry } from './index-file';
import { commitContent, LooseObjectStore } from './loose-objects';
import { readLooseCommit } from './loose-reader';
import { objectFormatOf } from './object-names';
import { ObjectPresence } from './object-presence';
import { userConfigFiles } from './user-config';

const OBJECT_NAME = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
/** Hooks `git commit --no-verify` still runs. */
const COMMIT_HOOKS = ['prepare-commit-msg', 'post-commit', 'reference-transaction', 'post-index-change'];
/**
 * Config that changes what a commit runs or writes: hooks elsewhere, includes, a split index, an
 * identity or encoding of its own, shared permissions, message clean-up, submodules ignored.
 */
const CONFIG_GIT_ACTS_ON = [
  /^\s*\[\s*(include|includeif|author|committer|hook)\b/im,
  /^\s*(\[[^\]]*\]\s*)?(hookspath|splitindex|precomposeunicode|commitencoding|sharedrepository|cleanup|commentchar|commentstring|ignoresubmodules|fsync\w*|compatobjectformat)\s*(=|$)/im,
];
/** Turned-off reflogs (git writes none then), a value quoted, empty or followed by a comment too. */
const NO_REFLOGS = /logallrefupdates\s*=\s*"?\s*(false|no|off|0)?\s*"?\s*([#;].*)?$/im;
const MODES_IN_TREES = new Set([0o100644, 0o100755, 0o120000]);
/** Environment that points git at other files than the worktree's own, or dates its commits. */
const REDIRECTING_ENVIRONMENT = [
  'GIT_DIR', 'GIT_WORK_TREE', 'GIT_INDEX_FILE', 'GIT_COMMON_DIR', 'GIT_OBJECT_DIRECTORY', 'GIT_ALTERNATE_OBJECT_DIRECTORIES', 'GIT_REFLOG_ACTION',
  'GIT_AUTHOR_DATE', 'GIT_COMMITTER_DATE', 'GIT_CONFIG_PARAMETERS', 'GIT_CONFIG_COUNT',
];
/** What an operation in progress leaves in the git dir: `git commit` would finish it (a merge's second parent, a pick's author). */
const OPERATIONS_IN_PROGRESS = ['MERGE_HEAD', 'CHERRY_PICK_HEAD', 'REVERT_HEAD', 'SQUASH_MSG', 'MERGE_MSG', 'sequencer', 'rebase-merge', 'rebase-apply'];

/**
 * Stages everything in the worktree and commits it; returns the new commit, or undefined if
 * nothing changed. Two git processes at most (`add -A`, and `commit` where {@link
 * commitIndexHere} leaves it to git): `git commit` itself says when nothing is staged (it exits
 * 1), and only then is the index asked, to tell that apart from a commit that failed.
 */
export async function commitAll(worktreePath: string, message: string): Promise<string | undefined> {
  await git(worktreePath, ['add', '-A']);
  const here = await commitIndexHere(worktreePath, message);
  if (here !== 'ask-git') return here;
  const args = ['commit', '--no-verify', '-q', '-m', message];
  const committed = await gitRaw(worktreePath, args);
  if (committed.code !== 0) {
    if ((await gitRaw(worktreePath, ['diff', '--cached', '--quiet'])).code === 0) return undefined; // nothing to commit: a retried activity lands here
    throw gitFailed(worktreePath, args, committed);
  }
  return headOf(worktreePath);
}

/**
 * Commits the index of the worktree at `worktreePath` with `message`: the new commit, undefined
 * when the index holds what HEAD's commit holds (nothing to commit), or 'ask-git'.
 */
export async function commitIndexHere(worktreePath: string, message: string, now: Date = new Date()): Promise<string | undefined | 'ask-git'> {
  if (REDIRECTING_ENVIRONMENT.some((name) => process.env[name] !== undefined)) return 'ask-git';
  // `git commit -m` strips trailing spaces and blank lines: a plain one-line message is kept as it is.
  if (!/^\S[^\n]*\S$|^\S$/.test(message)) return 'ask-git';
  const gitDir = await gitDirOf(worktreePath);
  if (!gitDir) return 'ask-git';
  const commonDir = await commonDirOf(gitDir);
  const branch = /^ref: (refs\/heads\/\S+)\n?$/.exec(await readFile(path.join(gitDir, 'HEAD'), 'utf8').catch(() => ''))?.[1];
  if (!branch || !(await plainSettings(commonDir, gitDir))) return 'ask-git';
  const refFile = path.join(commonDir, ...branch.split('/'));
  const head = (await readFile(refFile, 'utf8').catch(() => '')).trim();
  const format = objectFormatOf(head);
  if (!OBJECT_NAME.test(head) || !format) return 'ask-git';
  const store = await LooseObjectStore.of(worktreePath, format);
  const headCommit = store ? await readLooseCommit(store.objectsDir, head) : undefined;
  if (!store || !headCommit || headCommit === 'not-commit') return 'ask-git';

  // The index is git's while someone holds its lock, as for `git commit`.
  const indexLock = await open(path.join(gitDir, 'index.lock'), 'wx').catch(() => undefined);
  if (!indexLock) return 'ask-git';
  try {
    await indexLock.close();
    return await commitLockedIndex({ gitDir, commonDir, branch, refFile, head, headTree: headCommit.tree, store, message, now });
  } finally {
    await rm(path.join(gitDir, 'index.lock'), { force: true });
  }
}

/** The commit of {@link commitIndexHere}, made while it holds the index's lock. */
async function commitLockedIndex(c: {
  readonly gitDir: string;
  readonly commonDir: string;
  readonly branch: string;
  readonly refFile: string;
  readonly head: string;
  readonly headTree: string;
  readonly store: LooseObjectStore;
  readonly message: string;
  readonly now: Date;
}): Promise<string | undefined | 'ask-git'> {
  const { gitDir, commonDir, branch, refFile, head, store, message, now } = c;
  const index = readIndex(await readFile(path.join(gitDir, 'index')).catch(() => Buffer.alloc(0)));
  if (!index || index.objectBytes * 2 !== head.length) return 'ask-git';
  // A name that is not UTF-8 would not come back byte for byte from its decoded text.
  if (index.entries.some((entry) => entry.stage !== 0 || entry.intentToAdd || !MODES_IN_TREES.has(entry.mode) || entry.path.includes('\uFFFD'))) return 'ask-git';
  const tree = await writeIndexTree(store, index.entries, cachedTrees(index.extensions.get('TREE'), index.objectBytes));
  if (!tree) return 'ask-git';
  if (tree === c.headTree) return undefined;

  const seconds = Math.floor(now.getTime() / 1000);
  const date = `${seconds} ${zoneOf(now)}`;
  const commit = await store.write('commit', commitContent({ tree, parents: [head], message, when: date }));
  // Git squeezes each run of white space in a reflog's message to one space.
  const logLine = `${head} ${commit} ${WARDEN_GIT_PERSON} ${date}\tcommit: ${message.replace(/\s+/g, ' ')}\n`;
  const logs = [path.join(commonDir, 'logs', ...branch.split('/')), path.join(gitDir, 'logs', 'HEAD')];
  return (await moveBranch({ refFile, headFile: path.join(gitDir, 'HEAD'), branch, from: head, to: commit, logs, logLine })) ? commit : 'ask-git';
}

/**
 * Whether the repository's and the user's config, hooks and git dir leave a commit as plain as
 * this one: no hook a commit runs, hooks and reflogs where git keeps them by default, nothing
 * under way, no include.
 */
async function plainSettings(commonDir: string, gitDir: string): Promise<boolean> {
  for (const file of [path.join(commonDir, 'config'), path.join(gitDir, 'config.worktree'), ...userConfigFiles()]) {
    const text = await readFile(file, 'utf8').catch(() => '');
    if (CONFIG_GIT_ACTS_ON.some((pattern) => pattern.test(text)) || NO_REFLOGS.test(text)) return false;
    // Reflogs are not kept by default in a bare repository.
    if (/^\s*bare\s*=\s*true\s*$/im.test(text)) return false;
  }
  if (OPERATIONS_IN_PROGRESS.some((name) => existsSync(path.join(gitDir, name)))) return false;
  return !COMMIT_HOOKS.some((hook) => existsSync(path.join(commonDir, 'hooks', hook)));
}

/** Trees the index's cache (its TREE extension) names as unchanged: folder path ('' the top) → tree. */
function cachedTrees(extension: Buffer | undefined, objectBytes: number): Map<string, string> {
  const trees = new Map<string, string>();
  if (!extension) return trees;
  let at = 0;
  // Each node: its path component, NUL, its entry count (-1: changed), a space, its subtree count,
  // a newline, the tree's name when valid; then its subtrees, depth first.
  const node = (prefix: string): boolean => {
    const nul = extension.indexOf(0, at);
    const eol = nul < 0 ? -1 : extension.indexOf(0x0a, nul);
    if (eol < 0) return false;
    const component = extension.toString('utf8', at, nul);
    const [count, subtrees] = extension.toString('latin1', nul + 1, eol).split(' ').map(Number);
    if (!Number.isInteger(count) || !Number.isInteger(subtrees)) return false;
    at = eol + 1;
    const folder = prefix === '' && component === '' ? '' : prefix === '' ? component : `${prefix}/${component}`;
    if (count! >= 0) {
      if (at + objectBytes > extension.length) return false;
      trees.set(folder, extension.toString('hex', at, at + objectBytes));
      at += objectBytes;
    }
    for (let i = 0; i < subtrees!; i++) if (!node(folder)) return false;
    return true;
  };
  return node('') && at === extension.length ? trees : new Map();
}

interface Folder {
  readonly entries: Array<{ readonly key: Buffer; readonly mode: string; readonly name: string; readonly object?: string; readonly folder?: Folder }>;
  readonly path: string;
}

/**
 * The index's tree as `git write-tree` makes it: a tree the cache names is taken as it is while
 * the store holds it, the others written; undefined (git is asked) when an entry of a tree
 * written here names an object the store does not hold, as git would refuse it.
 */
async function writeIndexTree(store: LooseObjectStore, entries: readonly IndexEntry[], cached: ReadonlyMap<string, string>): Promise<string | undefined> {
  const root: Folder = { entries: [], path: '' };
  const folders = new Map<string, Folder>([['', root]]);
  const folderAt = (dir: string): Folder => {
    const known = folders.get(dir);
    if (known) return known;
    const slash = dir.lastIndexOf('/');
    const parent = folderAt(slash < 0 ? '' : dir.slice(0, slash));
    const name = dir.slice(slash + 1);
    const folder: Folder = { entries: [], path: dir };
    parent.entries.push({ key: Buffer.from(`${name}/`), mode: '40000', name, folder });
    folders.set(dir, folder);
    return folder;
  };
  for (const entry of entries) {
    const slash = entry.path.lastIndexOf('/');
    const name = entry.path.slice(slash + 1);
    folderAt(slash < 0 ? '' : entry.path.slice(0, slash)).entries.push({ key: Buffer.from(name), mode: entry.mode.toString(8), name, object: entry.object });
  }
  const presence = new ObjectPresence(store.objectsDir);
  const write = async (folder: Folder): Promise<string | undefined> => {
    const known = cached.get(folder.path);
    if (known && (await presence.holds(known))) return known;
    const sorted = [...folder.entries].sort((a, b) => Buffer.compare(a.key, b.key));
    const parts: Buffer[] = [];
    for (const entry of sorted) {
      const object = entry.folder ? await write(entry.folder) : entry.object!;
      if (!object || (!entry.folder && !(await presence.holds(object)))) return undefined;
      parts.push(Buffer.from(`${entry.mode} ${entry.name}\0`), Buffer.from(object, 'hex'));
    }
    return store.write('tree', Buffer.concat(parts));
  };
  return write(root);
}

/**
 * Moves the branch whose loose ref file is `refFile` from `from` to `to` as `git commit` does:
 * under `<ref>.lock` and the worktree's `HEAD.lock`, each made only if no one holds it, only
 * while the ref still names `from`, the reflogs told before the ref moves. False when a lock is
 * held, the ref moved, or a reflog cannot be written (git is asked then, and says why).
 */
async function moveBranch(move: {
  readonly refFile: string;
  readonly headFile: string;
  readonly branch: string;
  readonly from: string;
  readonly to: string;
  readonly logs: readonly string[];
  readonly logLine: string;
}): Promise<boolean> {
  const headLock = `${move.headFile}.lock`;
  const refLock = `${move.refFile}.lock`;
  const held: string[] = [];
  let moved = false;
  try {
    for (const lock of [headLock, refLock]) {
      const handle = await open(lock, 'wx').catch(() => undefined);
      if (!handle) return false;
      held.push(lock);
      try {
        if (lock === refLock) await handle.writeFile(`${move.to}\n`);
      } finally {
        await handle.close();
      }
    }
    // Read again under the locks: HEAD still on the branch, the branch still where it was.
    if ((await readFile(move.headFile, 'utf8').catch(() => '')).trim() !== `ref: ${move.branch}`) return false;
    if ((await readFile(move.refFile, 'utf8').catch(() => '')).trim() !== move.from) return false;
    // Every reflog opened before any is written: one that cannot be leaves the others untold.
    const logs: FileHandle[] = [];
    try {
      for (const log of move.logs) {
        await mkdir(path.dirname(log), { recursive: true });
        logs.push(await open(log, 'a'));
      }
      for (const log of logs) await log.appendFile(move.logLine);
    } finally {
      for (const log of logs) await log.close();
    }
    await rename(refLock, move.refFile);
    moved = true;
    return true;
  } catch {
    return false;
  } finally {
    for (const lock of held) if (!(moved && lock === refLock)) await rm(lock, { force: true });
  }
}

/** The local time zone at `when` as git writes it: `+hhmm` or `-hhmm`. */
function zoneOf(when: Date): string {
  const offset = -when.getTimezoneOffset();
  const abs = Math.abs(offset);
  return `${offset < 0 ? '-' : '+'}${String(Math.floor(abs / 60)).padStart(2, '0')}${String(abs % 60).padStart(2, '0')}`;
}
