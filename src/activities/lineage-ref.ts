import { existsSync } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import { branchForIntent, lineageRefFor } from '../shared/ids';
import { git, gitRaw, moveRefs, refCommits, withTemporaryIndex, type RefCommit, type RefMove } from './git';
import { commitContent, LooseObjectStore } from './loose-objects';
import { objectFormatOf, treeNameOfFiles, type ObjectType } from './object-names';

/** Files hashed or indexed per git call: far below the kernel's argument limit. */
const FILES_PER_CALL = 200;

/**
 * Records the lineage folder `folder` of intent `intentId` in `repoPath` under its lineage ref
 * (see lineageRefFor): a commit whose tree is the folder's files, byte for byte; its first parent
 * is the intent branch's head (every attempt's commit stays reachable through it), its second
 * the ref's earlier commit, if any. The same folder on the same branch head makes no new commit,
 * so a retry changes nothing. Returns the ref, or undefined when there is no lineage to record.
 */
export async function recordLineageRef(repoPath: string, intentId: string, folder: string): Promise<string | undefined> {
  const known = await refCommits(repoPath, lineageRefsRead(intentId));
  const { ref, move } = await lineageCommit(repoPath, intentId, folder, known);
  if (move) await moveRefs(repoPath, [move], `warden: lineage of ${intentId}`);
  return ref;
}

/** The refs {@link lineageCommit} needs read: the intent branch and the lineage ref. */
export function lineageRefsRead(intentId: string): string[] {
  return [`refs/heads/${branchForIntent(intentId)}`, lineageRefFor(intentId)];
}

/**
 * The commit that records the lineage folder, made but not yet under the ref: the ref to return
 * and the move that puts the commit there (none when the ref holds this lineage already, or
 * there is none). `known`: the refs of {@link lineageRefsRead}, read by the caller.
 */
export async function lineageCommit(repoPath: string, intentId: string, folder: string, known: ReadonlyMap<string, RefCommit>): Promise<{ readonly ref?: string; readonly move?: RefMove }> {
  const ref = lineageRefFor(intentId);
  const files = existsSync(folder) ? await regularFilesIn(folder) : [];
  const earlierCommit = known.get(ref);
  if (files.length === 0) return earlierCommit ? { ref } : {};
  const branchHead = known.get(`refs/heads/${branchForIntent(intentId)}`)?.commit;
  const earlier = earlierCommit?.commit;
  const recorded = (tree: string): boolean => earlierCommit?.tree === tree && earlierCommit.parents[0] === branchHead;
  // The objects are written here when the repository's format is known from a commit it holds
  // (git is asked otherwise); the folder as recorded already (a cleanup after the archive) writes none.
  const format = objectFormatOf(branchHead ?? earlier ?? '');
  const store = format ? await LooseObjectStore.of(repoPath, format) : undefined;
  let tree: string;
  if (store) {
    const objects: Array<{ readonly type: ObjectType; readonly content: Buffer }> = [];
    tree = await treeNameOfFiles(store.format, folder, files, async (type, content) => void objects.push({ type, content }));
    if (recorded(tree)) return { ref };
    for (const object of objects) await store.write(object.type, object.content);
  } else {
    tree = await treeOfFiles(repoPath, folder, files);
    if (recorded(tree)) return { ref };
  }
  const parents = [branchHead, earlier].filter((commit): commit is string => commit !== undefined);
  const message = `warden(${intentId}): lineage\n\nThe prompts, logs and documents of intent ${intentId}.${branchHead ? ' The first parent is its branch as it was then.' : ''}\n`;
  const commit = store
    ? await store.write('commit', commitContent({ tree, parents, message, when: new Date() }))
    : await git(repoPath, ['commit-tree', tree, ...parents.flatMap((parent) => ['-p', parent]), '-m', message]);
  return { ref, move: { ref, to: commit, ...(earlier ? { from: earlier } : {}) } };
}

/** The files of the lineage ref of `intentId` (names relative to the folder), or undefined when the repository has no such ref. */
export async function lineageRefFiles(repoPath: string, intentId: string): Promise<string[] | undefined> {
  const listed = await gitRaw(repoPath, ['ls-tree', '-r', '-z', '--name-only', `${lineageRefFor(intentId)}^{tree}`]);
  if (listed.code !== 0) return undefined;
  return listed.stdout.split('\0').filter(Boolean);
}

/** One file of the lineage ref of `intentId`, as `git show REF:FILE` prints it. */
export async function readLineageRefFile(repoPath: string, intentId: string, name: string): Promise<string> {
  return (await gitRaw(repoPath, ['cat-file', 'blob', `${lineageRefFor(intentId)}:${name}`])).stdout;
}

/**
 * The regular files under `folder`, relative to it with `/`. Anything else is left out: a
 * symlink would put the file it points to into the repository.
 */
async function regularFilesIn(folder: string, prefix = ''): Promise<string[]> {
  const found: string[] = [];
  for (const name of (await readdir(path.join(folder, prefix))).sort()) {
    const relative = prefix ? `${prefix}/${name}` : name;
    const stat = await lstat(path.join(folder, relative));
    if (stat.isDirectory()) found.push(...(await regularFilesIn(folder, relative)));
    else if (stat.isFile()) found.push(relative);
  }
  return found;
}

/** A tree of `files` (relative to `folder`) as they are on disk: no filters, no .gitignore, no worktree index touched. */
async function treeOfFiles(repoPath: string, folder: string, files: readonly string[]): Promise<string> {
  return withTemporaryIndex(async (index) => {
    for (let start = 0; start < files.length; start += FILES_PER_CALL) {
      const chunk = files.slice(start, start + FILES_PER_CALL);
      const blobs = (await git(repoPath, ['hash-object', '-w', '--no-filters', '--', ...chunk.map((file) => path.join(folder, file))])).split('\n');
      const entries = chunk.flatMap((file, i) => ['--cacheinfo', `100644,${blobs[i]},${file}`]);
      await git(repoPath, ['update-index', '--add', ...entries], index);
    }
    return git(repoPath, ['write-tree'], index);
  });
}
