/**
 * Commits read from a repository's object store without starting git, where git keeps them as
 * loose objects (`objects/<first two hex digits>/<the rest>`, `commit <size>\0<content>`
 * deflated): the commits Warden made for an intent are read back at its archive, merge and
 * cleanup, and git writes each new commit loose. A commit that is not loose (packed, or in an
 * alternate store) is left to git: the answer is undefined.
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

/**
 * The object `name` in `objectsDir`: 'not-commit' when it is another kind of object, undefined
 * when it is not there as a loose object or cannot be read exactly.
 */
export async function readLooseCommit(objectsDir: string, name: string): Promise<CommitFields | 'not-commit' | undefined> {
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
  if (header[1] !== 'commit') return 'not-commit';
  const content = data.toString('utf8', nul + 1);
  const end = content.indexOf('\n\n');
  const lines = (end < 0 ? content : content.slice(0, end)).split('\n');
  const tree = /^tree ([0-9a-f]+)$/.exec(lines[0] ?? '')?.[1];
  const parents = lines.map((line) => /^parent ([0-9a-f]+)$/.exec(line)?.[1]).filter((p): p is string => p !== undefined);
  const committer = lines.find((line) => line.startsWith('committer '));
  const date = committer ? / (\d+ [+-]\d{4})$/.exec(committer)?.[1] : undefined;
  return tree && date ? { tree, parents, committerDate: date } : undefined;
}
