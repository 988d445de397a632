/**
 * The target repository's working-tree files (tracked, and untracked but not ignored: what `git
 * ls-files --cached --others --exclude-standard` lists) before an agent step and after it, for
 * the outside-write check (change-inspection.ts).
 *
 * Before the step: one `git status` (untracked, ignored, and the files that differ from the
 * index) and the index file read directly (every tracked path), plus the stat data of what
 * decides that listing: every folder git would look into, the index, every `.gitignore`.
 *
 * After the step the listing can only differ if one of those changed: a file appears in or leaves
 * the listing only by an entry added, removed or renamed in a folder git looks into (which sets
 * that folder's ctime), by a change of the index, or by a change of the ignore rules (a
 * `.gitignore`, or info/exclude and the config, which the snapshot compares byte for byte). ctime
 * cannot be set back by a process (only the clock can), so equal stat data proves nothing moved,
 * provided it was older than the moment the listing began by more than the clock's tick: a change
 * made in the same tick as the stamp could leave it equal ("racy" in git's words); then, or when
 * anything differs, git is asked again. The global and system config and the global ignore file
 * are stamped too (and an ignore file the global config names), so a person's edit of them between
 * steps is seen.
 *
 * The same proof lets the next step's listing before it be taken from this one without git: the
 * worker remembers the last listing of each checkout (see {@link listBeforeStep}). Which files
 * differ from the index is then carried over for every file whose content and mode are as they
 * were, and counted as differing (so never checked out over) for any other.
 */
import { createHash } from 'node:crypto';
import { lstat, open, readdir, readFile, realpath } from 'node:fs/promises';
import { homedir } from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../shared/errors';
import { gitDirOf, gitRaw } from './git';
import { forEachLimited } from '../shared/for-each-limited';
import { indexPaths } from './index-file';
import { userConfigFiles, xdgConfigHome } from './user-config';

/** What the listing before a step found. */
export interface ListingBefore {
  /** Tracked and untracked (not ignored) files, relative to the top level, each once. */
  readonly names: readonly string[];
  /** A hash of the index file ('none' when there is none, undefined when unreadable). */
  readonly index?: string;
  /**
   * Files that differed from the index: changed, deleted, unmerged or untracked. Undefined when
   * the listing was remembered: then {@link settleListing} tells them from the files' contents.
   */
  readonly dirty?: readonly string[];
  /** Stat data of what decides the listing (absolute path → stamp); undefined when it proves nothing. */
  readonly proof?: Readonly<Record<string, string>>;
  /** The remembered listing this one was taken from, when git was not asked. */
  readonly recalled?: RememberedListing;
}

/** A listing this worker took of a checkout, kept while its proof holds (see {@link listBeforeStep}). */
interface RememberedListing {
  readonly names: readonly string[];
  readonly proof: Readonly<Record<string, string>>;
  /** The repository's ignore rules and config as the caller hashed them. */
  readonly rules: string;
  readonly index: string;
  readonly dirty: ReadonlySet<string>;
  /** Each listed file's content and mode as the caller keyed them, when the dirty files were told. */
  readonly contents: ReadonlyMap<string, string>;
}

/** Checkouts whose last listing this worker keeps, the newest ones, up to this many files in all. */
const REMEMBERED_CHECKOUTS = 16;
const REMEMBERED_FILES = 100_000;
const remembered = new Map<string, RememberedListing>();

/** A clock tick is a few milliseconds at most: stat data this much older than the listing cannot be racy. */
export const RACY_MARGIN_MS = 100;
/** Where a file system keeps whole seconds only (its stamps have no nanoseconds), a tick is up to two seconds. */
export const COARSE_RACY_MARGIN_MS = 2_000;
/** A config that names an ignore file, or includes other config files, which could be anywhere. */
const NAMES_OTHER_FILES = /excludesfile|^\s*\[\s*include/im;
/** More folders than this are not stamped (git is asked after the step instead). */
export const MAX_STAMPED_FOLDERS = 20_000;
const STAT_CONCURRENCY = 64;
/** The stamp of a file that is not there (a repository without an index yet). */
const ABSENT = 'absent';
/** A proof's key for where a path leads (its real path), not its stat data; no path holds a NUL. */
const RESOLVED = '\0resolved\0';

/**
 * The listing before a step, in the checkout at `top` (a real path). `skip`: a folder under it
 * not to stamp (the intent's own worktree, where the step writes). One git process; two when the
 * index cannot be read directly; none when this worker listed the checkout before with the same
 * `rules` (a hash of its ignore rules and config), the same index, and a proof that still holds.
 */
export async function listBeforeStep(top: string, skip?: string, rules?: string): Promise<ListingBefore> {
  const since = Date.now();
  const gitDir = await gitDirOf(top);
  const index = gitDir && !process.env.GIT_INDEX_FILE ? await readIndex(path.join(gitDir, 'index')) : undefined;
  const kept = rules === undefined ? undefined : remembered.get(memoryKey(top, skip));
  if (kept && kept.rules === rules && kept.index === hashOfIndex(index) && (await proofHolds(kept.proof))) {
    return { names: kept.names, index: kept.index, proof: kept.proof, recalled: kept };
  }
  const status = await gitRaw(top, [
    '--no-optional-locks', 'status', '--porcelain=v2', '-z', '--untracked-files=all', '--ignored=matching', '--no-renames', '--ignore-submodules=all',
  ]);
  const tracked = index?.data === 'none' ? [] : index ? indexPaths(index.data) : undefined;
  if (status.code !== 0 || !gitDir || !index || !tracked) return listWithGit(top, gitDir ? (index ?? (await readIndex(path.join(gitDir, 'index')))) : undefined);
  const untracked: string[] = [];
  const ignored: string[] = [];
  const dirty = new Set<string>();
  for (const entry of status.stdout.split('\0')) {
    if (entry.startsWith('? ')) {
      untracked.push(entry.slice(2));
      dirty.add(entry.slice(2));
    } else if (entry.startsWith('! ')) {
      ignored.push(entry.slice(2));
    } else if (entry.startsWith('1 ')) {
      // 1 XY sub mH mI mW hH hI path: Y says how the working-tree file differs from the index
      const fields = entry.split(' ');
      if (fields[1]![1] !== '.') dirty.add(fields.slice(8).join(' '));
    } else if (entry.startsWith('u ')) {
      dirty.add(entry.split(' ').slice(10).join(' '));
    }
  }
  const names = [...new Set([...tracked, ...untracked])];
  const indexHash = hashOfIndex(index);
  // An ignore file the repository's config names could be anywhere, and a checkout whose .git is
  // a file keeps its config elsewhere: then git is asked after the step.
  const config = gitDir === path.join(top, '.git') ? await readFile(path.join(gitDir, 'config'), 'utf8').catch(() => undefined) : undefined;
  const worktreeConfig = gitDir ? await readFile(path.join(gitDir, 'config.worktree'), 'utf8').catch(() => '') : '';
  const proof = config === undefined || NAMES_OTHER_FILES.test(config) || NAMES_OTHER_FILES.test(worktreeConfig)
    ? undefined
    : await stampListing(top, { since, names, ignored, skip, index: { file: index.file, stamp: index.data === 'none' ? ABSENT : index.stamp } });
  return { names, ...(indexHash ? { index: indexHash } : {}), dirty: [...dirty], ...(proof ? { proof } : {}) };
}

/**
 * The files that differed from the index before the step, and the listing kept for the next one.
 * `contents`: every listed file's content and mode as a key (equal keys, equal files). A listing
 * from git says which files differed; a remembered one says so for the files whose key is what
 * it was then, and every other file is taken to differ. Kept only with a proof and `rules`.
 */
export function settleListing(top: string, skip: string | undefined, rules: string | undefined, listing: ListingBefore, contents: ReadonlyMap<string, string>): readonly string[] {
  const recalled = listing.recalled;
  const dirty = listing.dirty ? new Set(listing.dirty) : new Set(recalled?.dirty);
  if (!listing.dirty) {
    for (const name of listing.names) {
      const now = contents.get(name);
      if (now === undefined || now !== recalled?.contents.get(name)) dirty.add(name);
    }
  }
  const key = memoryKey(top, skip);
  remembered.delete(key);
  if (listing.proof && listing.index !== undefined && rules !== undefined) {
    remembered.set(key, { names: listing.names, proof: listing.proof, rules, index: listing.index, dirty, contents });
    let files = 0;
    for (const kept of remembered.values()) files += kept.names.length;
    while (remembered.size > 0 && (remembered.size > REMEMBERED_CHECKOUTS || files > REMEMBERED_FILES)) {
      const oldest = remembered.keys().next().value!;
      files -= remembered.get(oldest)!.names.length;
      remembered.delete(oldest);
    }
  }
  return [...dirty];
}

/** Forgets every remembered listing (tests). */
export function forgetListings(): void {
  remembered.clear();
}

/** One memory per checkout, whichever intent's worktree is skipped, unless that worktree lies inside it. */
function memoryKey(top: string, skip: string | undefined): string {
  const rel = skip === undefined ? undefined : path.relative(top, skip);
  const inside = rel !== undefined && rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel);
  return `${top}\0${inside ? skip : ''}`;
}

/**
 * The listing after a step: the names found before when `proof` still holds (and `rulesUnchanged`:
 * info/exclude and the config compared equal), else git's listing now.
 */
export async function listAfterStep(top: string, before: Pick<ListingBefore, 'names' | 'proof'>, rulesUnchanged: boolean): Promise<{ readonly names: readonly string[]; readonly asked: boolean }> {
  if (rulesUnchanged && before.proof && (await proofHolds(before.proof))) return { names: before.names, asked: false };
  const listing = await gitRaw(top, ['ls-files', '-z', '--cached', '--others', '--exclude-standard']);
  if (listing.code !== 0) throw failure(`cannot list the files of ${top}: ${listing.stderr.trim()}`);
  return { names: [...new Set(listing.stdout.split('\0').filter(Boolean))], asked: true };
}

/** The listing from `ls-files -t` alone, where the index cannot be read directly: no proof. `index`: the checkout's index as read. */
async function listWithGit(top: string, index: IndexFile | undefined): Promise<ListingBefore> {
  const listing = await gitRaw(top, ['ls-files', '-z', '-t', '--modified', '--deleted', '--cached', '--others', '--exclude-standard']);
  if (listing.code !== 0) throw failure(`cannot list the files of ${top}: ${listing.stderr.trim()}`);
  // -t: `C` changed, `R` deleted, `?` untracked, `H` tracked (and matching the index)
  const entries = listing.stdout.split('\0').filter(Boolean);
  const indexHash = hashOfIndex(index);
  return {
    names: [...new Set(entries.map((entry) => entry.slice(2)))],
    ...(indexHash ? { index: indexHash } : {}),
    dirty: [...new Set(entries.filter((entry) => !entry.startsWith('H ')).map((entry) => entry.slice(2)))],
  };
}

/** A checkout's index file: its bytes and stat data, or 'none' when there is no index. */
interface IndexFile {
  readonly file: string;
  readonly data: Buffer | 'none';
  readonly stamp?: string;
}

/**
 * A hash of the index of the checkout at `top`, the file git keeps it in (in the git dir its
 * `.git` is or points to); 'none' when there is no index yet, undefined when it cannot be read.
 */
export async function indexHashOf(top: string): Promise<string | undefined> {
  const gitDir = await gitDirOf(top);
  return hashOfIndex(gitDir ? await readIndex(path.join(gitDir, 'index')) : undefined);
}

function hashOfIndex(index: IndexFile | undefined): string | undefined {
  return index?.data === 'none' ? 'none' : index ? createHash('sha256').update(index.data).digest('hex') : undefined;
}

/** The index file's bytes and stat data from one open file; 'none' when there is no index; undefined when unreadable. */
async function readIndex(file: string): Promise<IndexFile | undefined> {
  const handle = await open(file, 'r').catch((error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? 'none' : undefined));
  if (handle === 'none') return { file, data: 'none' };
  if (!handle) return undefined;
  try {
    const stat = await handle.stat({ bigint: true });
    return { file, data: await handle.readFile(), stamp: stampText(stat) };
  } catch {
    return undefined;
  } finally {
    await handle.close();
  }
}

interface BigStat {
  readonly ino: bigint;
  readonly size: bigint;
  readonly mode: bigint;
  readonly ctimeNs: bigint;
  readonly mtimeNs: bigint;
}

function stampText(stat: BigStat): string {
  return `${stat.ino}:${stat.mode}:${stat.size}:${stat.ctimeNs}:${stat.mtimeNs}`;
}

/**
 * Stamps every folder git would look into for untracked files (from the top level down, past
 * `.git` folders, ignored folders, links and `skip`), the index and every `.gitignore`;
 * undefined when one was changed too recently to tell a later change from it, or there are too
 * many folders.
 */
async function stampListing(
  top: string,
  input: { readonly since: number; readonly names: readonly string[]; readonly ignored: readonly string[]; readonly skip?: string; readonly index: { readonly file: string; readonly stamp?: string } },
): Promise<Record<string, string> | undefined> {
  const settled = BigInt(input.since - RACY_MARGIN_MS) * 1_000_000n;
  const settledCoarse = BigInt(input.since - COARSE_RACY_MARGIN_MS) * 1_000_000n;
  const isSettled = (ctimeNs: bigint, mtimeNs: bigint): boolean => {
    const limit = ctimeNs % 1_000_000_000n === 0n ? settledCoarse : settled;
    return ctimeNs < limit && mtimeNs < limit;
  };
  const stamps: Record<string, string> = {};
  const stamp = (abs: string, stat: BigStat): boolean => {
    if (!isSettled(stat.ctimeNs, stat.mtimeNs)) return false;
    stamps[abs] = stampText(stat);
    return true;
  };
  if (!input.index.stamp) return undefined;
  if (input.index.stamp !== ABSENT) {
    const [, , , ctime, mtime] = input.index.stamp.split(':');
    if (!isSettled(BigInt(ctime!), BigInt(mtime!))) return undefined;
  }
  stamps[input.index.file] = input.index.stamp;
  const ignoredFolders = new Set(input.ignored.filter((name) => name.endsWith('/')).map((name) => path.join(top, name.slice(0, -1))));
  const skip = input.skip ? path.resolve(input.skip) : undefined;
  let folders = 0;
  let racy = false;
  const walk = async (dir: string): Promise<void> => {
    if (racy || ++folders > MAX_STAMPED_FOLDERS) return;
    const stat = await lstat(dir, { bigint: true }).catch(() => undefined);
    if (!stat?.isDirectory() || !stamp(dir, stat)) {
      racy = true;
      return;
    }
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => undefined);
    if (!entries) {
      racy = true;
      return;
    }
    const below = entries
      .filter((entry) => entry.isDirectory() && entry.name !== '.git')
      .map((entry) => path.join(dir, entry.name))
      .filter((sub) => !ignoredFolders.has(sub) && sub !== skip);
    await forEachLimited(below, STAT_CONCURRENCY, walk);
  };
  await walk(top);
  if (racy || folders > MAX_STAMPED_FOLDERS) return undefined;
  const rules = [...input.names, ...input.ignored].filter((name) => path.posix.basename(name) === '.gitignore').map((name) => path.join(top, name));
  for (const file of rules) {
    const stat = await lstat(file, { bigint: true }).catch(() => undefined);
    if (!stat || !stamp(file, stat)) return undefined;
  }
  return (await stampGlobalRules(stamp, stamps)) ? stamps : undefined;
}

/**
 * Stamps the system and global config and the global ignore files (absent ones as absent, so
 * one created later is seen too; a link and the file it leads to both), and an ignore file the
 * global config names; false when one is too recent, a config includes other files (which could
 * be anywhere), or names an ignore file other than by a plain path.
 */
async function stampGlobalRules(stamp: (abs: string, stat: BigStat) => boolean, stamps: Record<string, string>): Promise<boolean> {
  // Config given in the environment is the worker's own and could name ignore rules anywhere.
  if (process.env.GIT_CONFIG_COUNT !== undefined || process.env.GIT_CONFIG_PARAMETERS !== undefined) return false;
  const home = process.env.HOME ?? homedir();
  const configs = userConfigFiles();
  const ignores = [path.join(xdgConfigHome(), 'git', 'ignore')];
  for (const file of configs) {
    const text = await readFile(file, 'utf8').catch(() => undefined);
    if (text === undefined) continue;
    if (/^\s*\[\s*include/im.test(text)) return false;
    const named = [...text.matchAll(/^\s*excludesfile\s*=(.*)$/gim)].map((match) => match[1]!.trim());
    // Only `excludesFile = <path>` on a line of its own, a plain absolute or home path, is read here.
    if (named.length !== (text.match(/excludesfile/gi) ?? []).length) return false;
    for (const value of named) {
      if (!/^(~\/|\/)[^;#"\\]*$/.test(value)) return false;
      ignores.push(value.startsWith('~/') ? path.join(home, value.slice(2)) : value);
    }
  }
  for (const file of [...configs, ...ignores]) {
    const stat = await lstat(file, { bigint: true }).catch(() => undefined);
    if (!stat) {
      stamps[file] = ABSENT;
      continue;
    }
    if (!stamp(file, stat)) return false;
    // Where a link on the way (the file or a folder above it) leads: another file if one is moved.
    const target = await realpath(file).catch(() => undefined);
    const reached = target ? await lstat(target, { bigint: true }).catch(() => undefined) : undefined;
    if (!target || !reached || !stamp(target, reached)) return false;
    stamps[`${RESOLVED}${file}`] = target;
  }
  return true;
}


/** Whether every stamped path still has the stat data it had. */
async function proofHolds(proof: Readonly<Record<string, string>>): Promise<boolean> {
  let holds = true;
  await forEachLimited(Object.entries(proof), STAT_CONCURRENCY, async ([abs, before]) => {
    if (!holds) return;
    if (abs.startsWith(RESOLVED)) {
      if ((await realpath(abs.slice(RESOLVED.length)).catch(() => ABSENT)) !== before) holds = false;
      return;
    }
    const stat = await lstat(abs, { bigint: true }).catch(() => undefined);
    if (stat ? stampText(stat) !== before : before !== ABSENT) holds = false;
  });
  return holds;
}

function failure(message: string): ApplicationFailure {
  return ApplicationFailure.create({ type: FailureType.GitFailed, message, nonRetryable: true });
}
