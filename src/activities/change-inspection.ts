/**
 * Change inspection: after an agent step, what did the agent change, and did it stay inside its
 * box? Git is the boundary: whatever the agent ran, its effect is judged from the worktree's
 * changes against the declared paths, and any escape is reverted and halts the intent.
 *
 * Checks, each producing {@link ChangeViolation}s:
 * - `outside-declared-paths`: a path added, changed or deleted in the worktree since the step's
 *   start commit (committed or not, untracked files included, ignored files not) that matches
 *   none of the intent's declared globs (Warden's own lineage folder is always allowed);
 * - `symlink-escape`: a changed path that is a symbolic link resolving outside the worktree, or
 *   into its `.git`;
 * - `git-dir-changed`: the worktree's `.git` file no longer points at its own git dir; HEAD
 *   detached or switched to another branch; the branch no longer contains the start commit
 *   (history rewritten); another ref (e.g. the base branch) now contains commits made in this
 *   step; a nested repository added; and, with a {@link RepoSnapshot}, the repository's hooks,
 *   config, info/ (exclude) or the worktree's own git-dir files changed;
 * - `outside-worktree-write`: with a {@link RepoSnapshot} taken before the step, a file of the
 *   target repo's own working tree (tracked or untracked, not ignored) created, deleted or
 *   changed.
 *
 * Also here, because they need the same view of the changes: {@link scanChangedFilesForStubs},
 * the anti-stub scan of the files the intent changed, and {@link holdBackSecrets}, the secret
 * scan of a step's change before it is committed.
 *
 * Not workflow code (git, file system). Git runs with an explicit `--git-dir`/`--work-tree`
 * found from the repository's worktree registry, so a tampered `.git` file cannot redirect the
 * inspection to another repository.
 *
 * Limits: only the target repository is watched for outside writes (not $HOME or /tmp); a write
 * that restores size and mtime of a file larger than {@link HASH_LIMIT_BYTES} is not seen; a
 * person editing the target repo's working tree (or switching its branch) during the step looks
 * like an escape.
 */
import { createHash } from 'node:crypto';
import { existsSync, realpathSync } from 'node:fs';
import { lstat, mkdir, readdir, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType } from '../shared/errors';
import { pathAllowed } from '../shared/glob';
import type { StubFinding } from '../safety/stub-detector';
import { gitRaw, parseNameStatus, reachedInGitDir, readBlobs, type FileChange, type GitResult, type NameStatus } from './git';
import { refsFromFiles } from './ref-files';
import { COARSE_RACY_MARGIN_MS, indexHashOf, listAfterStep, listBeforeStep, RACY_MARGIN_MS, settleListing, type ListingBefore } from './repo-listing';
import { forEachLimited } from '../shared/for-each-limited';
import { recordNamedBy, recordsOfFolder } from './worktree-records';
import { detectNewStubs, MAX_STUB_SCAN_BYTES, stubLanguage } from '../safety/stub-detector';
import { applyAllowances, MAX_SECRET_SCAN_BYTES, scanTextForSecrets } from '../safety/secret-scan';
import type { SecretFinding, SecretScan } from '../shared/secret-findings';
import type { SecretAllowance } from '../shared/intent';

export type ViolationKind = 'outside-declared-paths' | 'symlink-escape' | 'git-dir-changed' | 'outside-worktree-write';

export interface ChangeViolation {
  readonly kind: ViolationKind;
  /** Worktree-relative for worktree paths, repo-relative for outside writes, `<git>/…` for git-dir files. */
  readonly path: string;
  readonly detail: string;
}

export type ChangeStatus = 'added' | 'modified' | 'deleted' | 'type-changed' | 'untracked';

export interface ChangedPath {
  /** Relative to the worktree root, `/`-separated. An untracked nested repository ends with `/`. */
  readonly path: string;
  readonly status: ChangeStatus;
}

/** Small by design, so an activity may return it: violations are capped, paths are counted. */
export interface InspectionReport {
  /** True when there is no violation. */
  readonly ok: boolean;
  /** At most {@link MAX_REPORTED_VIOLATIONS}, in check order. */
  readonly violations: readonly ChangeViolation[];
  /** Violations found beyond the cap. */
  readonly omittedViolations: number;
  /** How many paths changed in the worktree since the start commit. */
  readonly changedPaths: number;
  /** Which checks ran: outside writes and git control files need a {@link RepoSnapshot}. */
  readonly checked: {
    readonly declaredPaths: boolean;
    readonly symlinks: boolean;
    readonly gitDir: boolean;
    readonly gitControlFiles: boolean;
    readonly outsideWrites: boolean;
  };
  /** One line for people and for the SafetyEvent's reason. */
  readonly summary: string;
}

/** State of a file in the target repo's working tree. */
export interface FileStamp {
  readonly type: 'file' | 'symlink' | 'dir' | 'other';
  readonly size: number;
  readonly mtimeMs: number;
  /** Permission bits (git keeps the executable one). */
  readonly mode: number;
  /**
   * Before a step: the file's ctime, when it was the same before and after its content was read
   * (so the hash is of the content that ctime dates). A process can set mtime back, not ctime.
   */
  readonly ctimeMs?: number;
  /** sha256 of the content (or the link target) for files up to {@link HASH_LIMIT_BYTES}. */
  readonly hash?: string;
}

/**
 * The target repository before an agent step: its working tree files (tracked and untracked,
 * ignored ones and `.git` excluded) and its git control files (config, hooks, info/, HEAD, each
 * worktree's HEAD/gitdir/commondir/config.worktree). Thousands of entries: keep it inside the
 * activity, never in workflow history.
 */
export interface RepoSnapshot {
  /** Real path of the repository's top level. */
  readonly repoPath: string;
  readonly files: Readonly<Record<string, FileStamp>>;
  /** Path relative to the common git dir → sha256 of its content. */
  readonly gitControl: Readonly<Record<string, string>>;
  /** The same files' contents and modes, to put back what an escape changed (see {@link restoreOutside}). */
  readonly gitControlCopies?: Readonly<Record<string, ControlCopy>>;
  /** Every ref and its commit, to put back a ref an escape moved. */
  readonly refs?: Readonly<Record<string, string>>;
  /**
   * The target repo's index (a hash of the file git keeps it in; undefined when there is none to
   * read), and the paths whose working-tree file differed from it: changed, deleted or untracked.
   */
  readonly checkout?: { readonly index?: string; readonly dirty: readonly string[] };
  /** The listing before the step, and what proves it still holds after (see repo-listing.ts). */
  readonly listing?: ListingBefore;
  /**
   * `worktrees/<name>`: the one worktree record read (the intent's own), when the snapshot was
   * taken for a worktree; otherwise every worktree's record was read.
   */
  readonly ownRecord?: string;
  readonly takenAt: string;
}

/** A git control file as it was: its bytes (or a link's target) and its mode. */
export type ControlCopy = { readonly kind: 'file'; readonly data: Buffer; readonly mode: number } | { readonly kind: 'link'; readonly target: string };

export interface InspectChangesInput {
  /** The intent's worktree. */
  readonly worktreePath: string;
  /** The target repository (the one the worktree belongs to). */
  readonly repoPath: string;
  /** The commit the agent step started from. */
  readonly baseCommit: string;
  /** The intent's declared globs, relative to the repo root (`Intent.paths`). */
  readonly declaredPaths: readonly string[];
  /** Taken with {@link takeRepoSnapshot} before the step; enables the outside-write check. */
  readonly repoSnapshot?: RepoSnapshot;
  /** Globs always allowed besides the declared ones. Default {@link WARDEN_OWN_PATHS}. */
  readonly alwaysAllowed?: readonly string[];
  /**
   * The branch the worktree must be on (`warden/<id>`, or a full `refs/heads/…` name). Without
   * it (and without a snapshot) a HEAD switched to another branch is not seen.
   */
  readonly branch?: string;
}

/** Warden writes the lineage (prompts, artifacts, test logs) itself, inside the worktree. */
export const WARDEN_OWN_PATHS: readonly string[] = ['docs/lineage/**'];
export const MAX_REPORTED_VIOLATIONS = 100;
/** Files up to this size are hashed, so a touch without a content change is not a write. */
export const HASH_LIMIT_BYTES = 1024 * 1024;
const STAT_CONCURRENCY = 64;

/** Where git keeps a worktree's state. */
interface GitLocation {
  /** Real path of the worktree. */
  readonly worktree: string;
  /** The repository's common git dir (`repo/.git`). */
  readonly commonDir: string;
  /** The worktree's own git dir (`repo/.git/worktrees/<name>`, or the common dir for the main worktree). */
  readonly gitDir: string;
  /** `worktrees/<name>` relative to the common dir; '' for the main worktree. */
  readonly gitDirRel: string;
}

/**
 * Inspects what an agent step changed in the worktree (see the file comment for the checks).
 * Reports; changes nothing. Throws a non-retryable `GIT_FAILED` if the worktree is not a
 * worktree of `repoPath` or `baseCommit` is unknown.
 */
export async function inspectChanges(input: InspectChangesInput): Promise<InspectionReport> {
  return (await inspectStep(input)).report;
}

/**
 * What an inspection saw of the worktree: HEAD's commit and the changes since the start commit.
 * Valid only until anything else runs in the worktree; it spares the secret scan that follows
 * the inspection in the same activity ({@link holdBackSecrets}) asking git the same again.
 */
export interface InspectedWorktree {
  readonly baseCommit: string;
  readonly head: string;
  readonly changes: readonly ChangedPath[];
}

/** {@link inspectChanges}, and what it saw of the worktree. */
export async function inspectStep(input: InspectChangesInput): Promise<{ readonly report: InspectionReport; readonly seen: InspectedWorktree }> {
  const loc = await locateWorktree(input.repoPath, input.worktreePath);
  // One status answers HEAD, the untracked files and, most often, the whole change.
  const status = await worktreeStatus(loc);
  const headCommit = status?.head ?? (await startAndHead(loc, input));
  const violations: ChangeViolation[] = [];
  const add = (v: ChangeViolation) => violations.push(v);

  // 1. git itself: the .git pointer, HEAD, history, refs
  await checkDotGit(loc, add);
  const snapshotHead = input.repoSnapshot?.gitControl[joinRel(loc.gitDirRel, 'HEAD')];
  const head = await readHead(loc);
  const expectedRef = input.branch ? (input.branch.startsWith('refs/') ? input.branch : `refs/heads/${input.branch}`) : undefined;
  if (!head.branch) add({ kind: 'git-dir-changed', path: '<git>/HEAD', detail: `HEAD is detached (${head.raw.trim().slice(0, 60)}): the worktree must stay on its branch` });
  else if ((expectedRef && head.branch !== expectedRef) || (snapshotHead && snapshotHead !== sha256(head.raw))) {
    add({ kind: 'git-dir-changed', path: '<git>/HEAD', detail: `HEAD was switched to ${head.branch} during the step` });
  }
  // Nothing committed in the step (the stage commits after the inspection): HEAD is the start commit.
  const descends = headCommit !== '' && (headCommit === input.baseCommit || (await descendsFrom(loc, input, headCommit)));
  if (!descends) {
    add({ kind: 'git-dir-changed', path: '<git>/HEAD', detail: `the branch no longer contains the step's start commit ${input.baseCommit.slice(0, 12)}: its history was rewritten` });
  } else {
    for (const ref of await refsHoldingNewCommits(loc, input.baseCommit, headCommit, expectedRef ?? head.branch)) {
      add({ kind: 'git-dir-changed', path: ref, detail: `${ref} now contains commits made in this step: only the intent branch may move` });
    }
  }

  // 2. the worktree's changes: declared paths, symlinks, nested repositories
  const changes =
    status && headCommit === input.baseCommit && status.againstHead ? withUntracked(status.againstHead, status.untracked) : await listChanges(loc, input.baseCommit, status?.untracked);
  const allowed = input.alwaysAllowed ?? WARDEN_OWN_PATHS;
  for (const change of changes) {
    const rel = change.path.replace(/\/$/, '');
    if (rel.split('/').includes('.git')) {
      add({ kind: 'git-dir-changed', path: change.path, detail: `${change.status}: a path inside a .git folder` });
      continue;
    }
    if (!pathAllowed(input.declaredPaths, rel) && !pathAllowed(allowed, rel)) {
      add({ kind: 'outside-declared-paths', path: change.path, detail: `${change.status}, but not in the declared paths (${input.declaredPaths.join(', ')})` });
    }
    if (change.status === 'deleted') continue;
    const abs = path.join(loc.worktree, rel);
    if (change.path.endsWith('/') && existsSync(path.join(abs, '.git'))) {
      add({ kind: 'git-dir-changed', path: change.path, detail: 'a nested git repository was created in the worktree' });
    }
    const escape = await symlinkEscape(loc.worktree, abs);
    if (escape) add({ kind: 'symlink-escape', path: change.path, detail: escape });
  }

  // 3. outside the worktree: the target repo's working tree and git control files
  const snapshot = input.repoSnapshot;
  if (snapshot) {
    const after = await takeRepoSnapshot(snapshot.repoPath, { previous: snapshot, exclude: loc.worktree });
    for (const v of compareFiles(snapshot, after)) add(v);
    for (const v of compareGitControl(snapshot, after, loc.gitDirRel)) add(v);
  }

  const shown = violations.slice(0, MAX_REPORTED_VIOLATIONS);
  const report = {
    ok: violations.length === 0,
    violations: shown,
    omittedViolations: violations.length - shown.length,
    changedPaths: changes.length,
    checked: { declaredPaths: true, symlinks: true, gitDir: true, gitControlFiles: Boolean(snapshot), outsideWrites: Boolean(snapshot) },
    summary: summarize(violations, changes.length),
  };
  return { report, seen: { baseCommit: input.baseCommit, head: headCommit, changes } };
}

/**
 * HEAD's commit ('' when HEAD names none) after checking that the start commit is a commit of
 * the repository (a non-retryable failure if not). One rev-parse for both: with the closing `--`
 * it fails unless each names a commit, and only then are they asked one by one.
 */
async function startAndHead(loc: GitLocation, input: InspectChangesInput): Promise<string> {
  const both = await gitIn(loc, ['rev-parse', `${input.baseCommit}^{commit}`, 'HEAD^{commit}', '--']);
  const head = both.stdout.split('\n')[1]?.trim();
  if (both.code === 0 && head) return head;
  if ((await gitIn(loc, ['rev-parse', '--verify', '--quiet', `${input.baseCommit}^{commit}`])).code !== 0) {
    throw failure(`cannot inspect ${input.worktreePath}: ${input.baseCommit} is not a commit of ${input.repoPath}`);
  }
  return (await gitIn(loc, ['rev-parse', '--verify', '--quiet', 'HEAD^{commit}'])).stdout.trim();
}

/**
 * Whether HEAD still contains the start commit, HEAD's commit known from the status. The ancestry
 * question fails (exit 128) when the start commit is not a commit at all: only then is it asked
 * on its own, to fail the inspection as {@link startAndHead} does.
 */
async function descendsFrom(loc: GitLocation, input: InspectChangesInput, head: string): Promise<boolean> {
  const asked = await gitIn(loc, ['merge-base', '--is-ancestor', input.baseCommit, head]);
  if (asked.code === 0 || asked.code === 1) return asked.code === 0;
  if ((await gitIn(loc, ['rev-parse', '--verify', '--quiet', `${input.baseCommit}^{commit}`])).code !== 0) {
    throw failure(`cannot inspect ${input.worktreePath}: ${input.baseCommit} is not a commit of ${input.repoPath}`);
  }
  return false;
}

/** What one `git status` of the worktree says. */
interface WorktreeStatus {
  /** HEAD's commit; undefined before the first commit. */
  readonly head?: string;
  /** Untracked files, not ignored ones (as `ls-files --others --exclude-standard` lists them). */
  readonly untracked: readonly string[];
  /**
   * Tracked paths that differ from HEAD, as `git diff --name-status --no-renames HEAD` would name
   * them; undefined when an entry cannot say so alone (changed both in the index and after it,
   * unmerged, a submodule): then the diff is asked.
   */
  readonly againstHead?: ReadonlyMap<string, ChangeStatus>;
}

/**
 * The worktree's `git status` (porcelain v2): one process where HEAD's commit, the diff against
 * it and the untracked files took three. `--no-optional-locks`: the inspection writes nothing,
 * not even the index's refreshed stat data. Undefined when the status fails.
 */
async function worktreeStatus(loc: GitLocation): Promise<WorktreeStatus | undefined> {
  const status = await gitRaw(loc.worktree, [
    '--no-optional-locks', `--git-dir=${loc.gitDir}`, `--work-tree=${loc.worktree}`,
    'status', '--porcelain=v2', '-z', '--branch', '--no-ahead-behind', '--untracked-files=all', '--no-renames', '--ignore-submodules=none',
  ]);
  if (status.code !== 0) return undefined;
  let head: string | undefined;
  const untracked: string[] = [];
  const againstHead = new Map<string, ChangeStatus>();
  let plain = true;
  for (const entry of status.stdout.split('\0')) {
    if (entry.startsWith('# branch.oid ')) {
      const oid = entry.slice('# branch.oid '.length);
      if (oid !== '(initial)') head = oid;
    } else if (entry.startsWith('? ')) {
      untracked.push(entry.slice(2));
    } else if (entry.startsWith('1 ')) {
      // 1 XY sub mH mI mW hH hI path
      const fields = entry.split(' ');
      const change = fields[2] === 'N...' ? againstHeadOf(fields[1]!) : undefined;
      if (change) againstHead.set(fields.slice(8).join(' '), change);
      else plain = false;
    } else if (entry !== '' && !entry.startsWith('#')) {
      plain = false; // unmerged ('u'), or a rename git was told not to look for ('2')
    }
  }
  return { ...(head ? { head } : {}), untracked, ...(plain ? { againstHead } : {}) };
}

/**
 * A status entry's X (index against HEAD) and Y (worktree against the index) as the diff of
 * the worktree against HEAD names the path, when they alone decide it.
 */
function againstHeadOf(xy: string): ChangeStatus | undefined {
  const [x, y] = [xy[0], xy[1]];
  const named = (code: string | undefined): ChangeStatus | undefined => (code === 'M' ? 'modified' : code === 'T' ? 'type-changed' : code === 'A' ? 'added' : code === 'D' ? 'deleted' : undefined);
  if (x === '.') return named(y);
  if (y === '.') return named(x);
  if (y === 'D' && (x === 'M' || x === 'T')) return 'deleted'; // at HEAD, and gone from the worktree
  if (x === 'A' && (y === 'M' || y === 'T')) return 'added'; // not at HEAD, and in the worktree
  return undefined; // e.g. staged, then changed back in the worktree: only a diff can tell
}

/** Changes against HEAD and the untracked files, in {@link listChanges}' form. */
function withUntracked(againstHead: ReadonlyMap<string, ChangeStatus>, untracked: readonly string[]): ChangedPath[] {
  const byPath = new Map(againstHead);
  for (const file of untracked) if (!byPath.has(file)) byPath.set(file, 'untracked');
  return sortedChanges(byPath);
}

/**
 * Every path changed in the worktree since `baseCommit`: committed, staged, unstaged, and
 * untracked (not ignored). Renames are a deletion and an addition. Sorted by path.
 * `repoPath` makes git use the worktree's registered git dir rather than trusting `.git`.
 */
export async function listChangedPaths(worktreePath: string, baseCommit: string, repoPath?: string): Promise<ChangedPath[]> {
  const loc = repoPath ? await locateWorktree(repoPath, worktreePath) : await locateFromWorktree(worktreePath);
  return listChanges(loc, baseCommit);
}

/**
 * The anti-stub scan (the completeness gate) of what the intent changed: every TypeScript,
 * JavaScript and Python file added or modified in the worktree since the merge base of HEAD and
 * `baseRef` (a base branch ref or a commit), committed or not, compared with its version there,
 * so only stubs the agent added count ({@link detectNewStubs}). Deleted files, files over
 * {@link MAX_STUB_SCAN_BYTES} and Warden's lineage are skipped. Findings use worktree-relative
 * paths; `parse-failed` ones are warnings (fail-open), the rest block.
 */
export async function scanChangedFilesForStubs(input: {
  readonly worktreePath: string;
  readonly baseRef: string;
  readonly repoPath?: string;
  /** The merge base of HEAD and `baseRef`, when the caller found it with {@link mergeBaseOf} in the same activity call. */
  readonly mergeBase?: string;
  /** The untracked files, when the caller listed them with {@link untrackedFilesOf} in the same activity call. */
  readonly untracked?: readonly string[];
  /** The diff from the merge base, when the caller asked for it with {@link diffFromBaseOf} in the same activity call (with the untracked files). */
  readonly diff?: readonly NameStatus[];
}): Promise<StubFinding[]> {
  const loc = input.repoPath ? await locateWorktree(input.repoPath, input.worktreePath) : await locateFromWorktree(input.worktreePath);
  const base = input.mergeBase ?? (await mergeBaseIn(loc, input.worktreePath, input.baseRef));
  const findings: StubFinding[] = [];
  const changes = input.diff && input.untracked ? changesOf(input.diff, input.untracked) : await listChanges(loc, base, input.untracked);
  const scanned: { readonly change: ChangedPath; readonly after: string }[] = [];
  for (const change of changes) {
    if (change.status === 'deleted' || !stubLanguage(change.path) || pathAllowed(WARDEN_OWN_PATHS, change.path)) continue;
    const abs = path.join(loc.worktree, change.path);
    const info = await lstat(abs).catch(() => undefined);
    if (!info?.isFile() || info.size > MAX_STUB_SCAN_BYTES) continue;
    scanned.push({ change, after: await readFile(abs, 'utf8') });
  }
  // The changed files' versions at the base, from one git process.
  const changedBefore = (change: ChangedPath) => change.status === 'modified' || change.status === 'type-changed';
  const atBase = await readBlobs(loc.worktree, scanned.filter(({ change }) => changedBefore(change)).map(({ change }) => `${base}:${change.path}`), gitDirArgs(loc));
  for (const { change, after } of scanned) {
    const before = changedBefore(change) ? atBase.get(`${base}:${change.path}`) : undefined;
    findings.push(...detectNewStubs({ path: change.path, before, after }));
  }
  return findings;
}

/**
 * The merge base of the worktree's HEAD and `baseRef`, asked with the worktree's registered git
 * dir (as the stub scan does); a non-retryable `GIT_FAILED` when there is none.
 */
export async function mergeBaseOf(input: { readonly worktreePath: string; readonly baseRef: string; readonly repoPath?: string }): Promise<string> {
  const loc = input.repoPath ? await locateWorktree(input.repoPath, input.worktreePath) : await locateFromWorktree(input.worktreePath);
  return mergeBaseIn(loc, input.worktreePath, input.baseRef);
}

/**
 * The worktree's untracked files (not ignored ones), asked with its registered git dir: for checks
 * of one activity call that each need them, with nothing run in the worktree between them.
 */
export async function untrackedFilesOf(input: { readonly worktreePath: string; readonly repoPath?: string }): Promise<string[]> {
  const loc = input.repoPath ? await locateWorktree(input.repoPath, input.worktreePath) : await locateFromWorktree(input.worktreePath);
  const listed = await gitIn(loc, ['ls-files', '-z', '--others', '--exclude-standard']);
  if (listed.code !== 0) throw failure(`cannot list the untracked files of ${input.worktreePath}: ${listed.stderr.trim()}`);
  return listed.stdout.split('\0').filter(Boolean);
}

/**
 * The worktree's diff from `base` (committed or not, untracked files aside), renames found, asked
 * with its registered git dir: for the checks of one activity call that each read it (the stub
 * scan takes a rename as a deletion and an addition, the tamper check compares a renamed test
 * with its old self), with nothing run in the worktree between them.
 */
export async function diffFromBaseOf(input: { readonly worktreePath: string; readonly repoPath?: string; readonly base: string }): Promise<NameStatus[]> {
  const loc = input.repoPath ? await locateWorktree(input.repoPath, input.worktreePath) : await locateFromWorktree(input.worktreePath);
  const diff = await gitIn(loc, ['diff', '--name-status', '-z', '-M', '--no-ext-diff', '--ignore-submodules=none', input.base]);
  if (diff.code !== 0) throw failure(`git diff ${input.base} failed in ${input.worktreePath}: ${diff.stderr.trim()}`);
  return parseNameStatus(diff.stdout);
}

/**
 * What the checks after an impl attempt read of the worktree against `base` (the merge base), in
 * two git processes where three took one each: the untracked files and the diff from the base
 * with renames found (as {@link untrackedFilesOf} and {@link diffFromBaseOf} give them, a copy
 * named as a copy: the checks take it as an addition, as they take that diff's), and,
 * when the status shows the tracked files as committed and the diff has no rename or copy, the
 * change's size per file against the base (as `changesAgainstBase` counts it: the committed
 * change, Warden's lineage left out), from the same diff. Otherwise `committed` is undefined and
 * the caller asks for it. Nothing may run in the worktree between this and the checks.
 */
export async function changeFromBaseOf(input: { readonly worktreePath: string; readonly repoPath: string; readonly base: string }): Promise<{
  readonly untracked: string[];
  readonly diff: NameStatus[];
  readonly committed?: FileChange[];
}> {
  const loc = await locateWorktree(input.repoPath, input.worktreePath);
  const status = await gitIn(loc, ['--no-optional-locks', 'status', '--porcelain=v2', '-z', '--untracked-files=all', '--no-renames', '--ignore-submodules=none']);
  if (status.code !== 0) throw failure(`cannot read the status of ${input.worktreePath}: ${status.stderr.trim()}`);
  const entries = status.stdout.split('\0').filter(Boolean);
  const untracked = entries.filter((entry) => entry.startsWith('? ')).map((entry) => entry.slice(2));
  const asCommitted = entries.every((entry) => entry.startsWith('? ') || entry.startsWith('#'));
  // -C as well: a copy the configuration (diff.renames) would have the size count finds no size here.
  const diffed = await gitIn(loc, ['diff', '-z', '-M', '-C', '--raw', '--numstat', '--no-ext-diff', '--ignore-submodules=none', input.base]);
  if (diffed.code !== 0) throw failure(`git diff ${input.base} failed in ${input.worktreePath}: ${diffed.stderr.trim()}`);
  const diff: NameStatus[] = [];
  const numstat: FileChange[] = [];
  const tokens = diffed.stdout.split('\0');
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (token.startsWith(':')) {
      // :<mode> <mode> <object> <object> <status>, then the path (two for a rename or copy)
      const code = token.split(' ').pop()!;
      if (code.startsWith('R') || code.startsWith('C')) {
        diff.push({ code, from: tokens[i + 1]!, path: tokens[i + 2]! });
        i += 2;
      } else {
        diff.push({ code, path: tokens[i + 1]! });
        i += 1;
      }
      continue;
    }
    const counted = /^(\d+|-)\t(\d+|-)\t([^]*)$/.exec(token);
    if (!counted) continue;
    if (counted[3] === '') i += 2; // a rename's two paths: no size from here then
    else numstat.push({ path: counted[3]!, added: Number(counted[1]) || 0, deleted: Number(counted[2]) || 0 }); // binary files show "-"
  }
  const renamed = diff.some((entry) => entry.from !== undefined);
  const committed = asCommitted && !renamed ? numstat.filter((change) => !pathAllowed(['docs/lineage', 'docs/lineage/**'], change.path)) : undefined;
  return { untracked, diff, ...(committed ? { committed } : {}) };
}

/** A diff with renames and the untracked files, in {@link listChanges}' form: a rename is a deletion and an addition, a copy an addition. */
function changesOf(diff: readonly NameStatus[], untracked: readonly string[]): ChangedPath[] {
  const byPath = new Map<string, ChangeStatus>();
  for (const { code, path: file, from } of diff) {
    if (from !== undefined) {
      if (code.startsWith('R')) byPath.set(from, 'deleted');
      byPath.set(file, 'added');
    } else {
      byPath.set(file, code.startsWith('A') ? 'added' : code.startsWith('D') ? 'deleted' : code.startsWith('T') ? 'type-changed' : 'modified');
    }
  }
  for (const file of untracked) if (!byPath.has(file)) byPath.set(file, 'untracked');
  return sortedChanges(byPath);
}

async function mergeBaseIn(loc: GitLocation, worktreePath: string, baseRef: string): Promise<string> {
  // Most often the base is where the branch left it: the branch's loose commits reach it.
  const reached = await reachedInGitDir(loc.gitDir, baseRef, 'HEAD');
  if (reached) return reached;
  const mergeBase = await gitIn(loc, ['merge-base', 'HEAD', baseRef]);
  if (mergeBase.code !== 0) throw failure(`cannot compare ${worktreePath} with ${baseRef}: ${mergeBase.stderr.trim() || 'no common commit'}`);
  return mergeBase.stdout.trim();
}

/**
 * The secret scan of one step's change (see secret-scan.ts), before it is committed: every file
 * added or changed in the worktree since `baseCommit` (committed in the step or not, untracked
 * included, Warden's lineage too: the agent can write there), and each version of a file in a
 * commit the step made itself, so a secret committed and then deleted is found as well (the last
 * 50 of them). Files over {@link MAX_SECRET_SCAN_BYTES} and links are not scanned.
 *
 * Findings a person allowed (`allowances`) stay. Any other finding holds the change back: the
 * step's own commits are undone (its files kept), and each file with a finding is put back as it
 * was at `baseCommit` (removed if it is new), so none of it can be committed. Returns both kinds.
 */
export async function holdBackSecrets(input: {
  readonly worktreePath: string;
  readonly repoPath: string;
  readonly baseCommit: string;
  readonly allowances: readonly SecretAllowance[];
  /** What {@link inspectStep} saw from the same start commit, when nothing has run in the worktree since. */
  readonly inspected?: InspectedWorktree;
}): Promise<SecretScan> {
  const loc = await locateWorktree(input.repoPath, input.worktreePath);
  const findings: SecretFinding[] = [];
  const scanned = new Set<string>();
  const scan = async (file: string, read: () => Promise<string | undefined>): Promise<void> => {
    const content = await read();
    if (content === undefined) return;
    for (const f of await scanTextForSecrets(file, content)) {
      const key = `${f.path}:${f.line}:${f.rule}`;
      if (!scanned.has(key)) findings.push(f);
      scanned.add(key);
    }
  };
  const inWorktree = new Set<string>();
  const seen = input.inspected?.baseCommit === input.baseCommit ? input.inspected : undefined;
  for (const change of seen?.changes ?? (await listChanges(loc, input.baseCommit))) {
    if (change.status === 'deleted' || change.path.endsWith('/')) continue;
    inWorktree.add(change.path);
    await scan(change.path, async () => {
      const info = await lstat(path.join(loc.worktree, change.path)).catch(() => undefined);
      if (!info?.isFile() || info.size > MAX_SECRET_SCAN_BYTES) return undefined;
      return readFile(path.join(loc.worktree, change.path), 'utf8');
    });
  }
  const head = seen?.head ?? (await gitIn(loc, ['rev-parse', '--verify', '--quiet', 'HEAD^{commit}'])).stdout.trim();
  const ownCommits = head && head !== input.baseCommit;
  if (ownCommits) {
    const commits = (await gitIn(loc, ['rev-list', '-n', '50', `${input.baseCommit}..${head}`])).stdout.split('\n').filter(Boolean);
    for (const commit of commits) {
      // -z: file names as they are, whatever characters they hold
      const files = await gitIn(loc, ['diff-tree', '-r', '-z', '--root', '--no-commit-id', '--name-only', '--no-renames', '--diff-filter=AMT', commit]);
      for (const file of files.stdout.split('\0').filter(Boolean)) {
        await scan(file, async () => {
          const size = await gitIn(loc, ['cat-file', '-s', `${commit}:${file}`]);
          if (size.code !== 0 || Number(size.stdout.trim()) > MAX_SECRET_SCAN_BYTES) return undefined;
          const shown = await gitIn(loc, ['cat-file', 'blob', `${commit}:${file}`]);
          return shown.code === 0 ? shown.stdout : undefined;
        });
      }
    }
  }
  const outcome = applyAllowances(findings, input.allowances);
  if (outcome.held.length === 0) return outcome;
  if (ownCommits) await gitOrThrow(loc, ['reset', '-q', input.baseCommit]);
  for (const file of new Set(outcome.held.map((f) => f.path))) {
    if (!inWorktree.has(file)) continue; // only in a commit of the step, which is gone now
    const before = await gitIn(loc, ['cat-file', '-e', `${input.baseCommit}:${file}`]);
    if (before.code === 0) await gitOrThrow(loc, ['checkout', input.baseCommit, '--', file]);
    else await rm(path.join(loc.worktree, file), { force: true });
  }
  return outcome;
}

/**
 * Puts the worktree back to `baseCommit`: `reset --hard` and `clean -ffd` (untracked files and
 * folders, nested repositories included; ignored files stay). With `repoPath`, a tampered `.git`
 * file is rewritten first; with `branch`, HEAD is put back on `refs/heads/<branch>` before the
 * reset, so a switched HEAD does not drag another branch back. Refs the agent moved elsewhere
 * and writes outside the worktree are not undone: they are reported by {@link inspectChanges}.
 */
export async function revertChanges(
  worktreePath: string,
  baseCommit: string,
  options: { readonly repoPath?: string; readonly branch?: string } = {},
): Promise<void> {
  const loc = options.repoPath ? await locateWorktree(options.repoPath, worktreePath) : await locateFromWorktree(worktreePath);
  if (loc.gitDirRel !== '') {
    const expected = `gitdir: ${loc.gitDir}\n`;
    const dotGit = path.join(loc.worktree, '.git');
    const stat = await lstat(dotGit).catch(() => undefined);
    const current = stat?.isFile() ? await readFile(dotGit, 'utf8') : undefined;
    if (current?.trim() !== expected.trim()) {
      if (stat) await rm(dotGit, { recursive: true, force: true });
      await writeFile(dotGit, expected);
    }
  }
  if (options.branch) await gitOrThrow(loc, ['symbolic-ref', 'HEAD', `refs/heads/${options.branch}`]);
  await gitOrThrow(loc, ['reset', '-q', '--hard', baseCommit]);
  await gitOrThrow(loc, ['clean', '-q', '-ffd']);
}

/**
 * Records the target repository's working tree and git control files, to compare after an agent
 * step ({@link inspectChanges}). Reads every tracked and untracked (not ignored) file up to
 * {@link HASH_LIMIT_BYTES}; a few thousand files take well under a second.
 */
export async function takeRepoSnapshot(
  repoPath: string,
  options: { readonly previous?: RepoSnapshot; readonly exclude?: string; readonly worktree?: string } = {},
): Promise<RepoSnapshot> {
  const top = realpathSync(repoPath);
  const { commonDir, bare } = await repoKindOf(top);
  // The comparison only looks at the intent's own worktree record (compareGitControl), and every
  // parked intent of the repo has one: read just that one when the worktree is named.
  const ownRecord = options.previous ? options.previous.ownRecord : options.worktree ? await worktreeRecordRel(options.worktree, commonDir) : undefined;
  const files: Record<string, FileStamp> = {};
  let checkout: RepoSnapshot['checkout'];
  let listing: RepoSnapshot['listing'];
  const since = Date.now();
  // The control files first: after a step, the listing may be taken over only while they are the same.
  const control = await gitControlFiles(commonDir, ownRecord);
  const skip = options.worktree ? realpathOr(options.worktree) : undefined;
  const rules = rulesOf(control.hashes);
  if (!bare) {
    const previous = options.previous;
    let listed: readonly string[];
    if (previous) {
      const rulesUnchanged = sameRecord(previous.gitControl, control.hashes);
      listed = (await listAfterStep(top, { names: previous.listing?.names ?? [], proof: previous.listing?.proof }, rulesUnchanged)).names;
    } else {
      listing = await listBeforeStep(top, skip, rules);
      listed = listing.names;
    }
    const excludeRel = options.exclude ? path.relative(top, options.exclude) : undefined;
    const names = listed.filter(
      (name) => !excludeRel || excludeRel.startsWith('..') || path.isAbsolute(excludeRel) || !(name === excludeRel || name.startsWith(`${excludeRel}/`)),
    );
    await forEachLimited(names, STAT_CONCURRENCY, async (name) => {
      const stamp = await stampOf(path.join(top, name), options.previous?.files[name], !options.previous);
      if (stamp) files[name] = stamp;
    });
    if (listing) {
      // Also the files that differ from the index: what a restore may take from the index.
      const dirty = settleListing(top, skip, rules, listing, contentKeys(files, since));
      checkout = { ...(listing.index ? { index: listing.index } : {}), dirty };
    }
  }
  // Before a step (not when comparing after it): what it takes to put things back.
  const restorable = options.previous ? {} : { gitControlCopies: control.copies, refs: await refsOf(top, commonDir), ...(checkout ? { checkout } : {}), ...(listing ? { listing } : {}) };
  return { repoPath: top, files, gitControl: control.hashes, ...restorable, ...(ownRecord ? { ownRecord } : {}), takenAt: new Date().toISOString() };
}

/**
 * Every ref of the repository and the object it names: read from the common git dir's files
 * like the other control files when `top` is the repository's own checkout (its `.git` is the
 * common dir); otherwise, or when the refs are not plain files, asked of git.
 */
async function refsOf(top: string, commonDir: string): Promise<Record<string, string>> {
  const dotGit = path.join(top, '.git');
  const own = existsSync(dotGit) && (await lstat(dotGit)).isDirectory() && realpathSync(dotGit) === commonDir;
  return (own ? await refsFromFiles(commonDir) : undefined) ?? (await refsFromGit(top));
}

async function refsFromGit(top: string): Promise<Record<string, string>> {
  const listing = await gitRaw(top, ['for-each-ref', '--format=%(objectname) %(refname)']);
  const refs: Record<string, string> = {};
  for (const line of listing.stdout.split('\n')) {
    const [sha, ref] = line.split(' ');
    if (sha && ref) refs[ref] = sha;
  }
  return refs;
}

/** What {@link restoreOutside} put back, and what it could not. */
export interface OutsideRestore {
  readonly restored: readonly string[];
  readonly notRestored: readonly string[];
}

/**
 * Puts back what a step changed outside its worktree, from the snapshot taken before it: git
 * control files (config, hooks, info/, HEAD, the worktree's own record) to their old bytes, or
 * removed when new; refs the step moved to hold its commits, to their old commit, or deleted when
 * new; in the target repo's working tree, files the step created are removed and files it changed
 * or deleted are checked out of the index again when they matched it before. A file that already
 * differed from the index before the step (or any, when the step changed the index) cannot be put
 * back from git: it is named in `notRestored`.
 */
export async function restoreOutside(snapshot: RepoSnapshot, violations: readonly ChangeViolation[]): Promise<OutsideRestore> {
  const restored: string[] = [];
  const notRestored: string[] = [];
  const { commonDir } = await repoKindOf(snapshot.repoPath);
  // 1. git control files first: HEAD and config decide what the checkouts below do.
  for (const v of violations.filter((x) => x.kind === 'git-dir-changed' && x.path.startsWith('<git>/') && !x.path.startsWith('<git>/refs'))) {
    const rel = v.path.slice('<git>/'.length);
    if (rel === 'HEAD' && !(rel in snapshot.gitControl)) continue; // the worktree's own HEAD: reset by revertChanges
    const abs = path.join(commonDir, rel);
    const copy = snapshot.gitControlCopies?.[rel];
    try {
      if (!(rel in snapshot.gitControl)) await rm(abs, { force: true });
      else if (!copy) throw new Error('no copy kept');
      else {
        await rm(abs, { force: true });
        await mkdir(path.dirname(abs), { recursive: true });
        if (copy.kind === 'link') await symlink(copy.target, abs);
        else await writeFile(abs, copy.data, { mode: copy.mode });
      }
      restored.push(v.path);
    } catch {
      notRestored.push(v.path);
    }
  }
  // 2. refs that now hold the step's commits
  for (const v of violations.filter((x) => x.kind === 'git-dir-changed' && x.path.startsWith('refs/'))) {
    const before = snapshot.refs?.[v.path];
    const result = before ? await gitRaw(snapshot.repoPath, ['update-ref', v.path, before]) : await gitRaw(snapshot.repoPath, ['update-ref', '-d', v.path]);
    (result.code === 0 ? restored : notRestored).push(v.path);
  }
  // 3. the target repo's working tree: created files go; a file that matched the index before the
  // step is checked out of the index again (which leaves the index as it is), while the index is
  // the one the snapshot saw: a step that staged something there could otherwise put it back.
  const dirty = new Set(snapshot.checkout?.dirty ?? []);
  const fromIndex: string[] = [];
  for (const v of violations.filter((x) => x.kind === 'outside-worktree-write')) {
    if (!(v.path in snapshot.files)) {
      await rm(path.join(snapshot.repoPath, v.path), { force: true, recursive: true });
      restored.push(v.path);
    } else if (dirty.has(v.path) || !snapshot.checkout) {
      notRestored.push(v.path);
    } else {
      fromIndex.push(v.path);
    }
  }
  if (fromIndex.length > 0) {
    const index = snapshot.checkout?.index;
    if (index === undefined || index === 'none' || (await indexHashOf(snapshot.repoPath)) !== index) {
      notRestored.push(...fromIndex);
    } else if ((await gitRaw(snapshot.repoPath, ['--literal-pathspecs', 'checkout', '-q', '--', ...fromIndex])).code === 0) {
      restored.push(...fromIndex);
    } else {
      for (const file of fromIndex) ((await gitRaw(snapshot.repoPath, ['--literal-pathspecs', 'checkout', '-q', '--', file])).code === 0 ? restored : notRestored).push(file);
    }
  }
  return { restored, notRestored };
}

/**
 * The repository's own git control files but the worktrees' records (config, info/exclude,
 * hooks, HEAD) as one hash: a listing is remembered for the next step only under the same.
 */
function rulesOf(control: Readonly<Record<string, string>>): string {
  const own = Object.keys(control).filter((name) => !name.startsWith('worktrees/')).sort();
  return sha256(own.map((name) => `${name}\0${control[name]}`).join('\n'));
}

/**
 * Each file's content and mode as a key, for files whose ctime (unchanged while the content was
 * read) is older than `since` by more than a clock tick: a file changed while the listing ran
 * may not be as git saw it, and gets no key, nor does one too large to hash; either counts as
 * differing from the index next time.
 */
function contentKeys(files: Readonly<Record<string, FileStamp>>, since: number): Map<string, string> {
  const keys = new Map<string, string>();
  for (const [name, stamp] of Object.entries(files)) {
    if (stamp.hash === undefined || stamp.ctimeMs === undefined) continue;
    const margin = stamp.ctimeMs % 1000 === 0 ? COARSE_RACY_MARGIN_MS : RACY_MARGIN_MS;
    if (stamp.ctimeMs < since - margin) keys.set(name, `${stamp.type}:${stamp.mode}:${stamp.hash}`);
  }
  return keys;
}

/** Whether two maps of control-file hashes are the same. */
function sameRecord(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => a[key] === b[key]);
}

function realpathOr(file: string): string {
  try {
    return realpathSync(file);
  } catch {
    return path.resolve(file);
  }
}

/** `worktrees/<name>` of the linked worktree at `worktree`, from its `.git` file; undefined for anything else. */
async function worktreeRecordRel(worktree: string, commonDir: string): Promise<string | undefined> {
  const admin = await recordNamedBy(worktree);
  return admin && path.dirname(admin) === path.join(commonDir, 'worktrees') ? `worktrees/${path.basename(admin)}` : undefined;
}

// ---------------------------------------------------------------------------------------------
// git location

/** Where a repository keeps its git state, whether it is bare, and its top level (none when bare). */
interface RepoKind {
  readonly commonDir: string;
  readonly bare: boolean;
  readonly top?: string;
}

/**
 * The target repository's kind, by its real path. Each inspection, snapshot and restore asks for
 * it (a dozen times an intent), and none of it changes while the repository lives: its common git
 * dir, its bareness and its top level are set when it is made (Warden's worktrees are linked
 * worktrees and change none of them; a changed config or .git of the repository is itself a
 * violation the snapshot sees). A repository removed and made again at the same path could differ,
 * so an entry whose common dir (or top level) is gone is asked again. Only target repositories go
 * in here, never a worktree: a worktree path can be removed and made again for another repository.
 */
const repoKinds = new Map<string, RepoKind>();
const MAX_REMEMBERED_REPOS = 1000;

async function repoKindOf(repoPath: string): Promise<RepoKind> {
  const key = realpathSync(repoPath);
  const known = repoKinds.get(key);
  if (known && existsSync(known.commonDir) && (!known.top || existsSync(known.top))) return known;
  const kind = await askRepoKind(key);
  if (repoKinds.size >= MAX_REMEMBERED_REPOS) repoKinds.clear();
  repoKinds.set(key, kind);
  return kind;
}

/**
 * From the files git keeps when `cwd` is a repository's top level with its own `.git` folder
 * (the usual target repository): none started. Otherwise one git process for a repository with
 * a working tree; a bare one (where `--show-toplevel` fails) takes a second.
 */
async function askRepoKind(cwd: string): Promise<RepoKind> {
  const fromFiles = await repoKindFromFiles(cwd);
  if (fromFiles) return fromFiles;
  const out = await gitRaw(cwd, ['rev-parse', '--path-format=absolute', '--git-common-dir', '--is-bare-repository', '--show-toplevel']);
  const [commonDir, bare, top] = out.stdout.trim().split('\n');
  if (out.code === 0 && commonDir && top) return { commonDir: realpathSync(commonDir), bare: bare === 'true', top: realpathSync(top) };
  return uncachedRepoKind(cwd);
}

/**
 * `top`'s kind when its `.git` is a folder git would take as it is: git finds a `.git` folder in
 * the folder it starts in before looking anywhere else, and then that folder is the top level and
 * `.git` the common git dir, unless the environment names other folders, the folder is another
 * worktree's (`commondir`), or its config says otherwise (`core.worktree`, `core.bare`, or a
 * `config.worktree` or an include that could): those are left to git.
 */
async function repoKindFromFiles(top: string): Promise<RepoKind | undefined> {
  if (process.env.GIT_DIR || process.env.GIT_WORK_TREE || process.env.GIT_COMMON_DIR) return undefined;
  const dotGit = path.join(top, '.git');
  if (!(await lstat(dotGit).catch(() => undefined))?.isDirectory()) return undefined;
  if (!existsSync(path.join(dotGit, 'HEAD')) || existsSync(path.join(dotGit, 'commondir')) || existsSync(path.join(dotGit, 'config.worktree'))) return undefined;
  const config = await readFile(path.join(dotGit, 'config'), 'utf8').catch(() => undefined);
  if (config === undefined || /^\s*(?:worktree\b|bare[ \t]*(?:$|=[ \t]*(?![ \t]|false\b|no\b|off\b|0\b))|\[\s*include)/im.test(config)) return undefined;
  return { commonDir: realpathSync(dotGit), bare: false, top };
}

/** The common git dir and whether the repository is bare, asked of git now (no top level). */
async function uncachedRepoKind(cwd: string): Promise<RepoKind> {
  const out = await gitRaw(cwd, ['rev-parse', '--path-format=absolute', '--git-common-dir', '--is-bare-repository']);
  const [commonDir, bare] = out.stdout.trim().split('\n');
  if (out.code !== 0 || !commonDir) throw failure(`${cwd} is not a git repository: ${out.stderr.trim()}`);
  return { commonDir: realpathSync(commonDir), bare: bare === 'true' };
}

/** Finds the worktree's git dir from the repository's registry (`<common>/worktrees/*\/gitdir`). */
async function locateWorktree(repoPath: string, worktreePath: string): Promise<GitLocation> {
  if (!existsSync(worktreePath)) throw failure(`worktree ${worktreePath} does not exist`);
  const worktree = realpathSync(worktreePath);
  const { commonDir, top } = await repoKindOf(repoPath);
  if (top === worktree) return { worktree, commonDir, gitDir: commonDir, gitDirRel: '' };
  const [gitDir] = await recordsOfFolder(commonDir, path.basename(worktree), (folder) => existsSync(folder) && realpathSync(folder) === worktree, { firstOnly: true });
  if (!gitDir) throw failure(`${worktreePath} is not a worktree of ${repoPath}`);
  return { worktree, commonDir, gitDir, gitDirRel: `worktrees/${path.basename(gitDir)}` };
}

/** Without the repository: trusts the worktree's `.git` (used by revert and listing only). */
async function locateFromWorktree(worktreePath: string): Promise<GitLocation> {
  const worktree = realpathSync(worktreePath);
  const out = await gitRaw(worktree, ['rev-parse', '--absolute-git-dir']);
  if (out.code !== 0) throw failure(`${worktreePath} is not a git worktree: ${out.stderr.trim()}`);
  const gitDir = realpathSync(out.stdout.trim());
  const { commonDir } = await uncachedRepoKind(worktree);
  const rel = path.relative(commonDir, gitDir);
  return { worktree, commonDir, gitDir, gitDirRel: rel === '' ? '' : rel.split(path.sep).join('/') };
}

function gitIn(loc: GitLocation, args: readonly string[]): Promise<GitResult> {
  return gitRaw(loc.worktree, [...gitDirArgs(loc), ...args]);
}

function gitDirArgs(loc: GitLocation): string[] {
  return [`--git-dir=${loc.gitDir}`, `--work-tree=${loc.worktree}`];
}

async function gitOrThrow(loc: GitLocation, args: readonly string[]): Promise<string> {
  const result = await gitIn(loc, args);
  if (result.code !== 0) {
    throw ApplicationFailure.create({
      type: FailureType.GitFailed,
      message: `git ${args.join(' ')} failed in ${loc.worktree} (exit ${result.code}): ${result.stderr.trim().slice(-500)}`,
    });
  }
  return result.stdout.trim();
}

function failure(message: string): ApplicationFailure {
  return ApplicationFailure.create({ type: FailureType.GitFailed, message, nonRetryable: true });
}

// ---------------------------------------------------------------------------------------------
// checks

async function checkDotGit(loc: GitLocation, add: (v: ChangeViolation) => void): Promise<void> {
  const dotGit = path.join(loc.worktree, '.git');
  const stat = await lstat(dotGit).catch(() => undefined);
  if (loc.gitDirRel === '') {
    if (!stat?.isDirectory() || realpathSync(dotGit) !== loc.commonDir) {
      add({ kind: 'git-dir-changed', path: '.git', detail: 'the repository\'s .git folder was replaced' });
    }
    return;
  }
  if (!stat) return add({ kind: 'git-dir-changed', path: '.git', detail: 'the worktree\'s .git file was deleted' });
  if (!stat.isFile()) return add({ kind: 'git-dir-changed', path: '.git', detail: `the worktree's .git file was replaced by a ${stat.isDirectory() ? 'folder' : 'link'}` });
  const content = await readFile(dotGit, 'utf8');
  const target = /^gitdir:\s*(.+?)\s*$/m.exec(content)?.[1];
  const resolved = target ? path.resolve(loc.worktree, target) : undefined;
  if (!resolved || !existsSync(resolved) || realpathSync(resolved) !== realpathSync(loc.gitDir)) {
    add({ kind: 'git-dir-changed', path: '.git', detail: `the worktree's .git file points elsewhere (${content.trim().slice(0, 120)})` });
  }
}

async function readHead(loc: GitLocation): Promise<{ readonly raw: string; readonly branch?: string }> {
  const raw = await readFile(path.join(loc.gitDir, 'HEAD'), 'utf8').catch(() => '');
  const branch = /^ref:\s*(refs\/\S+)\s*$/.exec(raw.trim())?.[1];
  return { raw, branch };
}

/** Refs other than the intent branch that now contain a commit made since `base`. */
async function refsHoldingNewCommits(loc: GitLocation, base: string, head: string, ownRef: string | undefined): Promise<string[]> {
  if (base === head) return [];
  const listing = await gitIn(loc, ['rev-list', '--parents', `${base}..${head}`]);
  const rows = listing.stdout.split('\n').filter(Boolean).map((line) => line.split(' '));
  const fresh = new Set(rows.map((r) => r[0]!));
  // the oldest new commits: any ref holding a new commit holds one of these
  const roots = rows.filter((r) => !r.slice(1).some((p) => fresh.has(p))).map((r) => r[0]!).slice(0, 50);
  if (roots.length === 0) return [];
  const refs = await gitIn(loc, ['for-each-ref', '--format=%(refname)', ...roots.flatMap((c) => ['--contains', c])]);
  return refs.stdout
    .split('\n')
    .map((r) => r.trim())
    .filter((r) => r && r !== ownRef);
}

/** `untracked`: the untracked files when a status of the same moment listed them already. */
async function listChanges(loc: GitLocation, baseCommit: string, untracked?: readonly string[]): Promise<ChangedPath[]> {
  const diff = await gitIn(loc, ['diff', '--name-status', '-z', '--no-renames', '--no-ext-diff', '--ignore-submodules=none', baseCommit]);
  if (diff.code !== 0) throw failure(`git diff ${baseCommit} failed in ${loc.worktree}: ${diff.stderr.trim()}`);
  const byPath = new Map<string, ChangeStatus>();
  const parts = diff.stdout.split('\0');
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const code = parts[i]!;
    const file = parts[i + 1]!;
    if (!code) break;
    byPath.set(file, code.startsWith('A') ? 'added' : code.startsWith('D') ? 'deleted' : code.startsWith('T') ? 'type-changed' : 'modified');
  }
  const others = untracked ?? (await gitIn(loc, ['ls-files', '-z', '--others', '--exclude-standard'])).stdout.split('\0').filter(Boolean);
  for (const file of others) if (!byPath.has(file)) byPath.set(file, 'untracked');
  return sortedChanges(byPath);
}

function sortedChanges(byPath: ReadonlyMap<string, ChangeStatus>): ChangedPath[] {
  return [...byPath].map(([p, status]) => ({ path: p, status })).sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** Why the link at `abs` escapes the worktree, or undefined if it is not a link or stays inside. */
async function symlinkEscape(worktree: string, abs: string): Promise<string | undefined> {
  const stat = await lstat(abs).catch(() => undefined);
  if (!stat?.isSymbolicLink()) return undefined;
  const target = await readlink(abs);
  let resolved = path.resolve(path.dirname(abs), target);
  try {
    resolved = realpathSync(abs); // follows chains of links; fails for a dangling one
  } catch {
    // dangling: judge by where it points
  }
  const rel = path.relative(worktree, resolved);
  if (rel === '..' || rel.startsWith(`..${path.sep}`) || path.isAbsolute(rel)) return `symbolic link to ${target}, outside the worktree`;
  if (rel.split(path.sep)[0] === '.git') return `symbolic link to ${target}, inside the worktree's .git`;
  return undefined;
}

async function stampOf(abs: string, previous: FileStamp | undefined, dated = false): Promise<FileStamp | undefined> {
  const stat = await lstat(abs).catch(() => undefined);
  if (!stat) return undefined;
  const type = stat.isSymbolicLink() ? 'symlink' : stat.isFile() ? 'file' : stat.isDirectory() ? 'dir' : 'other';
  const base = { type, size: stat.size, mtimeMs: stat.mtimeMs, mode: stat.mode & 0o7777 } as const;
  if (type === 'dir' || type === 'other') return { ...base, size: 0, mtimeMs: 0 };
  // after the step, only hash what looks different: unchanged stamps keep the earlier hash
  if (previous && previous.type === type && previous.size === base.size && previous.mtimeMs === base.mtimeMs) return { ...base, hash: previous.hash };
  let hash: string | undefined;
  if (type === 'symlink') hash = sha256(await readlink(abs));
  else if (stat.size <= HASH_LIMIT_BYTES) {
    const content = await readFile(abs).catch(() => undefined);
    hash = content ? sha256(content) : undefined;
  }
  if (!hash) return base;
  if (!dated) return { ...base, hash };
  const after = await lstat(abs).catch(() => undefined);
  return { ...base, hash, ...(after && after.ctimeMs === stat.ctimeMs ? { ctimeMs: stat.ctimeMs } : {}) };
}

function compareFiles(before: RepoSnapshot, after: RepoSnapshot): ChangeViolation[] {
  const out: ChangeViolation[] = [];
  const names = [...new Set([...Object.keys(before.files), ...Object.keys(after.files)])].sort();
  for (const name of names) {
    const a = before.files[name];
    const b = after.files[name];
    if (a && !b) out.push({ kind: 'outside-worktree-write', path: name, detail: `deleted from the target repository's working tree (${before.repoPath})` });
    else if (!a && b) out.push({ kind: 'outside-worktree-write', path: name, detail: `created in the target repository's working tree (${before.repoPath})` });
    else if (a && b && changed(a, b)) out.push({ kind: 'outside-worktree-write', path: name, detail: `changed in the target repository's working tree (${before.repoPath})` });
  }
  return out;
}

function changed(a: FileStamp, b: FileStamp): boolean {
  if (a.type !== b.type) return true;
  if (a.type === 'dir' || a.type === 'other') return false;
  if (a.hash && b.hash) return a.hash !== b.hash;
  return a.size !== b.size || a.mtimeMs !== b.mtimeMs;
}

/** Config, hooks and info/ of the repository, and this worktree's own git-dir files. */
function compareGitControl(before: RepoSnapshot, after: RepoSnapshot, ownGitDirRel: string): ChangeViolation[] {
  const own = ownGitDirRel ? `${ownGitDirRel}/` : undefined;
  const relevant = (name: string) => !name.startsWith('worktrees/') || (own !== undefined && name.startsWith(own));
  const out: ChangeViolation[] = [];
  const names = [...new Set([...Object.keys(before.gitControl), ...Object.keys(after.gitControl)])].filter(relevant).sort();
  for (const name of names) {
    if (name === joinRel(ownGitDirRel, 'HEAD')) continue; // reported with the HEAD check
    const a = before.gitControl[name];
    const b = after.gitControl[name];
    if (a === b) continue;
    const what = a === undefined ? 'created' : b === undefined ? 'deleted' : 'changed';
    out.push({ kind: 'git-dir-changed', path: `<git>/${name}`, detail: `${what} during the step: ${describeControl(name)}` });
  }
  return out;
}

function describeControl(name: string): string {
  if (name.startsWith('hooks/')) return 'a git hook runs code on the next git command';
  if (name === 'config' || name.endsWith('config.worktree')) return 'git config can run commands (aliases, hooks path, filters)';
  if (name.startsWith('info/')) return 'info/exclude and info/attributes change what git sees';
  if (name === 'HEAD') return "the target repository's own checkout was switched";
  return 'a file of the worktree\'s git dir';
}

const CONTROL_TOP = ['config', 'config.worktree', 'HEAD'];
const CONTROL_DIRS = ['hooks', 'info'];
const CONTROL_WORKTREE = ['HEAD', 'gitdir', 'commondir', 'config.worktree'];

async function gitControlFiles(commonDir: string, ownRecord: string | undefined): Promise<{ hashes: Record<string, string>; copies: Record<string, ControlCopy> }> {
  const out: Record<string, string> = {};
  const copies: Record<string, ControlCopy> = {};
  const hashInto = async (rel: string) => {
    const abs = path.join(commonDir, rel);
    const stat = await lstat(abs).catch(() => undefined);
    if (!stat) return;
    if (stat.isDirectory()) {
      for (const entry of await readdir(abs).catch(() => [] as string[])) await hashInto(`${rel}/${entry}`);
    } else if (stat.isSymbolicLink()) {
      const target = await readlink(abs);
      out[rel] = sha256(`link:${target}`);
      copies[rel] = { kind: 'link', target };
    } else if (stat.isFile()) {
      const data = await readFile(abs);
      out[rel] = sha256(data);
      if (data.length <= HASH_LIMIT_BYTES) copies[rel] = { kind: 'file', data, mode: stat.mode & 0o7777 };
    }
  };
  const rels = [...CONTROL_TOP, ...CONTROL_DIRS];
  const records = ownRecord ? [ownRecord] : (await readdir(path.join(commonDir, 'worktrees')).catch(() => [] as string[])).map((name) => `worktrees/${name}`);
  for (const record of records) {
    for (const file of CONTROL_WORKTREE) rels.push(`${record}/${file}`);
  }
  // Without an own record, every intent's worktree record is read: a thousand parked intents are
  // four thousand files (0.64 s a snapshot one after another).
  await forEachLimited(rels, STAT_CONCURRENCY, hashInto);
  return { hashes: out, copies };
}

// ---------------------------------------------------------------------------------------------
// helpers

function summarize(violations: readonly ChangeViolation[], changed: number): string {
  if (violations.length === 0) return `clean: ${changed} changed path${changed === 1 ? '' : 's'}, all allowed`;
  const counts = new Map<ViolationKind, number>();
  for (const v of violations) counts.set(v.kind, (counts.get(v.kind) ?? 0) + 1);
  const parts = [...counts].map(([kind, n]) => `${n} ${kind}`).join(', ');
  const first = violations[0]!;
  return `${violations.length} violation${violations.length === 1 ? '' : 's'} (${parts}); first: ${first.kind} ${first.path}: ${first.detail}`.slice(0, 500);
}

function joinRel(dir: string, file: string): string {
  return dir ? `${dir}/${file}` : file;
}

function sha256(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}
