/**
 * Commits and trees read from a repository's object store without starting git, where git keeps
 * them as loose objects (`objects/<first two hex digits>/<the rest>`, holding `<type>
 * <size>\0<content>` deflated). The commits and trees Warden made for an intent are read back at
 * its archive, merge and cleanup, and git writes each new one loose. An object that is not loose
 * (packed, or in an alternate store) is left to git: the answer is undefined. Whether git would
 * read the object as it is stored (no replace refs, grafts or shallow history) is the caller's
 * to know (see `plainObjectFiles` in git.ts).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { inflateSync } from 'node:zlib';

/** What Warden reads of a commit. */
export interface CommitFields {
  readonly tree: string;
  readonly parents: readonly string[];
  /** The committer date as `--date=raw` prints it (`<seconds> <zone>`). */
  readonly committerDate: string;
}

/** One entry of a tree object, its bytes kept as they are. */
export interface TreeEntry {
  readonly mode: string;
  readonly name: string;
  readonly object: string;
  readonly raw: Buffer;
}

/** Commits walked, at most, looking for an ancestor before git is asked instead. */
const MAX_WALKED_COMMITS = 1_000;

/** The loose object `name`: its type and content; undefined when it is not there or not whole. */
export async function readLooseObject(objectsDir: string, name: string): Promise<{ readonly type: string; readonly content: Buffer } | undefined> {
  const compressed = await readFile(path.join(objectsDir, name.slice(0, 2), name.slice(2))).catch(() => undefined);
  if (!compressed) return undefined;
  let data: Buffer;
  try {
    data = inflateSync(compressed);
  } catch {
    return undefined;
  }
  const nul = data.indexOf(0);
  const header = nul > 0 ? /^(\w+) (\d+)$/.exec(data.toString('latin1', 0, nul)) : null;
  if (!header || Number(header[2]) !== data.length - nul - 1) return undefined;
  return { type: header[1]!, content: data.subarray(nul + 1) };
}

/**
 * The commit `name` in `objectsDir`: 'not-commit' when it is another kind of object, undefined
 * when it is not there as a loose object or cannot be read exactly.
 */
export async function readLooseCommit(objectsDir: string, name: string): Promise<CommitFields | 'not-commit' | undefined> {
  const object = await readLooseObject(objectsDir, name);
  if (!object) return undefined;
  if (object.type !== 'commit') return 'not-commit';
  const content = object.content.toString('utf8');
  const end = content.indexOf('\n\n');
  const lines = (end < 0 ? content : content.slice(0, end)).split('\n');
  const tree = /^tree ([0-9a-f]+)$/.exec(lines[0] ?? '')?.[1];
  const parents = lines.map((line) => /^parent ([0-9a-f]+)$/.exec(line)?.[1]).filter((p): p is string => p !== undefined);
  const committer = lines.find((line) => line.startsWith('committer '));
  const date = committer ? / (\d+ [+-]\d{4})$/.exec(committer)?.[1] : undefined;
  // A zone git would not write as it stands (-0000, minutes past 59, hours past 14) is git's to read.
  const zone = date?.split(' ')[1];
  if (!zone || zone === '-0000' || !/^[+-](0\d|1[0-4])[0-5]\d$/.test(zone)) return undefined;
  return tree && date ? { tree, parents, committerDate: date } : undefined;
}

/** The entries of the loose tree `name`, in their stored order; undefined when it is not a loose tree. */
export async function readLooseTree(objectsDir: string, name: string): Promise<TreeEntry[] | undefined> {
  const object = await readLooseObject(objectsDir, name);
  if (object?.type !== 'tree') return undefined;
  const hashBytes = name.length / 2;
  const entries: TreeEntry[] = [];
  const data = object.content;
  let at = 0;
  while (at < data.length) {
    const space = data.indexOf(0x20, at);
    const nul = space < 0 ? -1 : data.indexOf(0, space);
    if (nul < 0 || nul + 1 + hashBytes > data.length) return undefined;
    const next = nul + 1 + hashBytes;
    entries.push({ mode: data.toString('latin1', at, space), name: data.toString('utf8', space + 1, nul), object: data.toString('hex', nul + 1, next), raw: data.subarray(at, next) });
    at = next;
  }
  return entries;
}

/**
 * True when `ancestor` is `from` or reached from it over parents, every commit on the way read
 * loose; undefined when the walk cannot tell (a commit not loose, or more than a thousand
 * walked): then git is to be asked. Never false: not finding it proves nothing.
 */
export async function reachedThroughLoose(objectsDir: string, from: string, ancestor: string): Promise<true | undefined> {
  // The start must be a commit the store holds, even when it is the ancestor asked for.
  const start = await readLooseCommit(objectsDir, from);
  if (!start || start === 'not-commit') return undefined;
  const seen = new Set<string>([from]);
  const queue = [from];
  while (queue.length > 0) {
    const at = queue.shift()!;
    if (at === ancestor) return true;
    if (seen.size > MAX_WALKED_COMMITS) return undefined;
    const commit = await readLooseCommit(objectsDir, at);
    if (!commit || commit === 'not-commit') return undefined;
    for (const parent of commit.parents) {
      if (!seen.has(parent)) {
        seen.add(parent);
        queue.push(parent);
      }
    }
  }
  return undefined;
}
