import { existsSync } from 'node:fs';
import { lstat, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../shared/errors';
import { launch, type LaunchEncoding } from './launcher';
import { reachedThroughLoose, readLooseCommit } from './loose-reader';
import { refsNamedFromFiles } from './ref-files';

/**
 * Commits made by Warden carry this identity, so they work on machines with no git config. And no
 * file-system monitor: a repository's config could name one, and git would run it on every status.
 */
export const WARDEN_GIT_IDENTITY: readonly string[] = [
  '-c', 'user.name=Warden', '-c', 'user.email=warden@localhost',
  // author.* and committer.* in a config would win over user.*; a commit encoding would add a header.
  '-c', 'author.name=Warden', '-c', 'author.email=warden@localhost', '-c', 'committer.name=Warden', '-c', 'committer.email=warden@localhost',
  '-c', 'i18n.commitEncoding=UTF-8', '-c', 'commit.gpgsign=false', '-c', 'core.fsmonitor=false',
];

/** The same identity as a commit object names its author and committer (`Name <email>`). */
export const WARDEN_GIT_PERSON = 'Warden <warden@localhost>';

export interface GitResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly code: number;
}

/** What a git call may add to its environment (a separate index, fixed commit dates). */
export interface GitOptions {
  readonly env?: Readonly<Record<string, string>>;
  /** Git's standard input. */
  readonly input?: string;
  /** Output decoded byte for byte ('latin1'), for output that holds file contents with their sizes. */
  readonly encoding?: LaunchEncoding;
}

/** Runs git in `cwd` (from the launcher: see launcher.ts) and returns its output whatever the exit code. */
export async function gitRaw(cwd: string, args: readonly string[], options: GitOptions = {}): Promise<GitResult> {
  try {
    const { stdout, stderr } = await launch('git', [...WARDEN_GIT_IDENTITY, ...args], {
      cwd,
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, ...options.env, GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C' },
      ...(options.input !== undefined ? { input: options.input } : {}),
      ...(options.encoding ? { encoding: options.encoding } : {}),
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

/** A ref to point at `to`, only while it still names `from` (no `from`: only while it does not exist). */
export interface RefMove {
  readonly ref: string;
  readonly to: string;
  readonly from?: string;
}

/**
 * Moves refs in one `git update-ref --stdin` transaction: every move or none, each a
 * compare-and-swap, so that two writers never lose each other's commit unseen.
 */
export async function moveRefs(cwd: string, moves: readonly RefMove[], message: string): Promise<void> {
  if (moves.length === 0) return;
  const lines = moves.map((move) => (move.from === undefined ? `create ${move.ref} ${move.to}` : `update ${move.ref} ${move.to} ${move.from}`));
  await git(cwd, ['update-ref', '-m', message, '--stdin'], { input: `start\n${lines.join('\n')}\nprepare\ncommit\n` });
}

/** True if `ref` names an existing commit in the repository at `cwd`. */
export async function refExists(cwd: string, ref: string): Promise<boolean> {
  return (await gitRaw(cwd, ['rev-parse', '--verify', '--quiet', `${ref}^{commit}`])).code === 0;
}

/**
 * The contents of the blobs `specs` name (`<commit>:<path>`), as UTF-8 text, from one `git
 * cat-file --batch` where a `git show` each took one process; undefined for a name that is not a
 * blob there. `gitArgs`: what goes before `cat-file` (`--git-dir=…`).
 */
export async function readBlobs(cwd: string, specs: readonly string[], gitArgs: readonly string[] = []): Promise<Map<string, string | undefined>> {
  const found = new Map<string, string | undefined>();
  const asked = [...new Set(specs)].filter((spec) => !/[\r\n]/.test(spec));
  if (asked.length === 0) return found;
  const batch = await gitRaw(cwd, [...gitArgs, 'cat-file', '--batch'], { input: asked.map((spec) => `${spec}\n`).join(''), encoding: 'latin1' });
  if (batch.code !== 0) throw gitFailed(cwd, [...gitArgs, 'cat-file', '--batch'], batch);
  // Each answer: `<object> <type> <size>\n<size bytes>\n`, or `<spec> missing\n` (or ambiguous).
  const out = batch.stdout;
  let at = 0;
  for (const spec of asked) {
    const eol = out.indexOf('\n', at);
    if (eol < 0) break;
    const header = out.slice(at, eol).split(' ');
    at = eol + 1;
    const size = Number(header[2]);
    if (header.length !== 3 || !Number.isInteger(size)) {
      found.set(spec, undefined);
      continue;
    }
    const content = out.slice(at, at + size);
    at += size + 1;
    found.set(spec, header[1] === 'blob' ? Buffer.from(content, 'latin1').toString('utf8') : undefined);
  }
  return found;
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

/** A commit a ref names, with what Warden reads of it. */
export interface RefCommit {
  readonly commit: string;
  readonly tree: string;
  readonly parents: readonly string[];
  /** The committer date as `--date=raw` prints it (`<seconds> <zone>`). */
  readonly committerDate: string;
}

/**
 * The commits the full ref names `refs` name, with their trees, parents and dates: one
 * for-each-ref for all of them, where a check, a rev-parse and a log took three for each. A ref
 * that does not exist, or names anything but a commit, is not in the map.
 */
export async function refCommits(cwd: string, refs: readonly string[]): Promise<Map<string, RefCommit>> {
  const fromFiles = await refCommitsFromFiles(cwd, refs);
  if (fromFiles) return fromFiles;
  const listed = await git(cwd, ['for-each-ref', '--format=%(refname)%00%(objecttype)%00%(objectname)%00%(tree)%00%(parent)%00%(committerdate:raw)', ...refs]);
  const found = new Map<string, RefCommit>();
  for (const line of listed.split('\n')) {
    const [name, type, commit, tree, parents, committerDate] = line.split('\0');
    // A pattern also matches the refs below it (refs/heads/a matches refs/heads/a/b): only exact names count.
    if (!name || type !== 'commit' || !refs.includes(name) || !commit || !tree) continue;
    found.set(name, { commit, tree, parents: (parents ?? '').split(' ').filter(Boolean), committerDate: committerDate ?? '' });
  }
  return found;
}

/** A repository whose refs and loose objects Warden may read from their files (see {@link plainObjectFiles}). */
export interface ObjectFiles {
  readonly commonDir: string;
  readonly objectsDir: string;
  /** The refs asked for that exist, and the objects they name, as read from the files. */
  readonly refs: Readonly<Record<string, string>>;
}

/**
 * The common git dir, object store and the refs `refNames` (full ref names) of the checkout at
 * `cwd` (its top level), when git reads its refs and objects as they are stored; undefined where
 * git could read them otherwise or the files do not say: a git dir or object store named in the
 * environment, a shallow or grafted history or replace refs (which change what git reads of a
 * commit), or refs not kept as plain files. Only the refs named are read, so the cost does not
 * grow with the refs the repository holds. Read anew on every call, never kept.
 */
export async function plainObjectFiles(cwd: string, refNames: readonly string[]): Promise<ObjectFiles | undefined> {
  const gitDir = await gitDirOf(cwd);
  return gitDir ? objectFilesOf(gitDir, refNames) : undefined;
}

/** {@link plainObjectFiles} of the git dir `gitDir` (a linked worktree's: its common dir's). */
async function objectFilesOf(gitDir: string, refNames: readonly string[]): Promise<ObjectFiles | undefined> {
  if (['GIT_DIR', 'GIT_COMMON_DIR', 'GIT_OBJECT_DIRECTORY', 'GIT_ALTERNATE_OBJECT_DIRECTORIES', 'GIT_REPLACE_REF_BASE', 'GIT_GRAFT_FILE', 'GIT_SHALLOW_FILE', 'GIT_NO_REPLACE_OBJECTS'].some((name) => process.env[name] !== undefined)) return undefined;
  const commonDir = await commonDirOf(gitDir);
  if (existsSync(path.join(commonDir, 'shallow')) || existsSync(path.join(commonDir, 'info', 'grafts'))) return undefined;
  const refs = await refsNamedFromFiles(commonDir, refNames, false);
  if (!refs) return undefined;
  return { commonDir, objectsDir: path.join(commonDir, 'objects'), refs };
}

/** {@link refCommits} from the ref files and loose commits; undefined when git is to be asked. */
async function refCommitsFromFiles(cwd: string, refs: readonly string[]): Promise<Map<string, RefCommit> | undefined> {
  const files = await plainObjectFiles(cwd, refs);
  if (!files) return undefined;
  const found = new Map<string, RefCommit>();
  for (const ref of new Set(refs)) {
    const commit = files.refs[ref];
    if (!commit) continue;
    const fields = await readLooseCommit(files.objectsDir, commit);
    if (!fields) return undefined;
    if (fields !== 'not-commit') found.set(ref, { commit, ...fields });
  }
  return found;
}

/**
 * Whether the commit `ancestor` (a full ref name or an object name) is `descendant` or one of
 * its ancestors, as `git merge-base --is-ancestor` says: told from the loose commits Warden's
 * branch is made of where they reach it, else asked of git. Throws when git cannot tell (an
 * unknown commit).
 */
export async function isAncestor(cwd: string, ancestor: string, descendant: string): Promise<boolean> {
  const gitDir = await gitDirOf(cwd);
  if (gitDir && (await reachedInGitDir(gitDir, ancestor, descendant)) !== undefined) return true;
  const asked = await gitRaw(cwd, ['merge-base', '--is-ancestor', ancestor, descendant]);
  if (asked.code === 0 || asked.code === 1) return asked.code === 0;
  throw gitFailed(cwd, ['merge-base', '--is-ancestor', ancestor, descendant], asked);
}

/**
 * The best common ancestor of `a` and `b` (each a full ref name, an object name, or HEAD), as
 * `git merge-base` names it: `b` itself when the loose commits reached from `a` reach it, else
 * asked of git.
 */
export async function mergeBase(cwd: string, a: string, b: string): Promise<GitResult> {
  const gitDir = await gitDirOf(cwd);
  const reached = gitDir ? await reachedInGitDir(gitDir, b, a) : undefined;
  if (reached !== undefined) return { stdout: `${reached}\n`, stderr: '', code: 0 };
  return gitRaw(cwd, ['merge-base', a, b]);
}

/**
 * The commit `ancestor` names when the loose commits reached from `descendant` reach it, in the
 * repository of the git dir `gitDir` (HEAD: that git dir's); undefined when they do not tell.
 */
export async function reachedInGitDir(gitDir: string, ancestor: string, descendant: string): Promise<string | undefined> {
  const files = await objectFilesOf(gitDir, [ancestor, descendant].filter((name) => name.startsWith('refs/')));
  if (!files) return undefined;
  const commitOf = async (name: string): Promise<string | undefined> =>
    OBJECT_NAME.test(name) ? name : name === 'HEAD' ? headInGitDir(gitDir) : name.startsWith('refs/') ? files.refs[name] : undefined;
  const [from, to] = [await commitOf(descendant), await commitOf(ancestor)];
  if (!from || !to) return undefined;
  return (await reachedThroughLoose(files.objectsDir, from, to)) ? to : undefined;
}

const OBJECT_NAME = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/**
 * The commit checked out in `worktreePath`, read from git's own files the way git reads them:
 * the worktree's `.git`, its HEAD, and the loose file of the branch HEAD names (a loose ref wins
 * over packed-refs). Read anew on every call, never kept. Git is asked when any of it is not
 * plain (a packed ref, a ref store other than files, a HEAD naming something else).
 */
export async function headOf(worktreePath: string): Promise<string> {
  return (await headFromFiles(worktreePath)) ?? git(worktreePath, ['rev-parse', 'HEAD']);
}

/**
 * The git dir of the checkout at `top`, from its `.git`: that folder, or the one its `gitdir:`
 * file points to (a linked worktree); undefined when neither is there.
 */
export async function gitDirOf(top: string): Promise<string | undefined> {
  const dotGit = path.join(top, '.git');
  const stat = await lstat(dotGit).catch(() => undefined);
  if (stat?.isDirectory()) return dotGit;
  if (!stat?.isFile()) return undefined;
  const pointer = /^gitdir:\s*(.+?)\s*$/m.exec(await readFile(dotGit, 'utf8'))?.[1];
  return pointer ? path.resolve(top, pointer) : undefined;
}

/** The common git dir of the git dir `gitDir`: the one its `commondir` file names (a linked worktree's), else itself. */
export async function commonDirOf(gitDir: string): Promise<string> {
  const common = (await readFile(path.join(gitDir, 'commondir'), 'utf8').catch(() => undefined))?.trim();
  return common ? path.resolve(gitDir, common) : gitDir;
}

async function headFromFiles(worktreePath: string): Promise<string | undefined> {
  const gitDir = await gitDirOf(worktreePath);
  return gitDir ? headInGitDir(gitDir) : undefined;
}

/** The commit HEAD of the git dir `gitDir` names, from its files; undefined when they do not say plainly. */
async function headInGitDir(gitDir: string): Promise<string | undefined> {
  const head = (await readFile(path.join(gitDir, 'HEAD'), 'utf8').catch(() => '')).trim();
  if (OBJECT_NAME.test(head)) return head;
  // Branches live in the common git dir (a linked worktree's `commondir` names it).
  const branch = /^ref: (refs\/heads\/\S+)$/.exec(head)?.[1];
  if (!branch) return undefined;
  const commonDir = await commonDirOf(gitDir);
  const loose = (await readFile(path.join(commonDir, ...branch.split('/')), 'utf8').catch(() => '')).trim();
  return OBJECT_NAME.test(loose) ? loose : undefined;
}

/** One entry of `git diff --name-status -z`: its status (`M`, `A`, `R087`…) and path; `from` for a rename or copy. */
export interface NameStatus {
  readonly code: string;
  readonly path: string;
  readonly from?: string;
}

/** Parses `git diff --name-status -z` output (a rename or copy names two paths, old first). */
export function parseNameStatus(out: string): NameStatus[] {
  const entries: NameStatus[] = [];
  const parts = out.split('\0');
  for (let i = 0; i < parts.length && parts[i]; ) {
    const code = parts[i]!;
    if (code.startsWith('R') || code.startsWith('C')) {
      entries.push({ code, from: parts[i + 1]!, path: parts[i + 2]! });
      i += 3;
    } else {
      entries.push({ code, path: parts[i + 1]! });
      i += 2;
    }
  }
  return entries;
}

/** One file of a diff: its path and the lines added and deleted (binary files count 0). */
export interface FileChange {
  readonly path: string;
  readonly added: number;
  readonly deleted: number;
}

/**
 * What the branch checked out in `worktreePath` changed against where it left `baseBranch`,
 * file by file, Warden's own lineage folder excluded. `mergeBase`: that point, when the caller
 * found it in the same activity call.
 */
export async function changesAgainstBase(worktreePath: string, baseBranch: string, mergeBase?: string): Promise<FileChange[]> {
  const base = mergeBase ?? (await git(worktreePath, ['merge-base', 'HEAD', `refs/heads/${baseBranch}`]));
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
