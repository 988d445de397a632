/**
 * What a git index holds, read from the file git keeps it in, without starting git: the repo
 * snapshot before each agent step needs every tracked file's name, and a step's commit is made
 * from the entries and the cached trees.
 *
 * The format (gitformat-index(5)): a `DIRC` header with the version (2, 3 or 4) and the number of
 * entries; each entry's stat data, object name and flags, then its path (versions 2 and 3: NUL
 * terminated and padded to a multiple of eight bytes; version 4: the number of bytes to drop from
 * the previous path's end, then the rest, NUL terminated); then extensions; then a checksum of all
 * of it. What this cannot read with certainty (a split or sparse index, a checksum that does not
 * match, anything unexpected) it leaves to git: the answer is undefined.
 */
import { createHash } from 'node:crypto';

/** Stat data (40 bytes) before the object name, flags (2 bytes) after it. */
const STAT_BYTES = 40;
const EXTENDED_FLAG = 0x4000;
const NAME_LENGTH_MASK = 0x0fff;
const SKIP_WORKTREE_FLAG = 0x4000;
const INTENT_TO_ADD_FLAG = 0x2000;
const STAGE_MASK = 0x3000;
/** A directory entry of a sparse index. */
const SPARSE_DIRECTORY_MODE = 0o040000;

/** One entry of an index: its path, mode, object name and merge stage (0 unless unmerged). */
export interface IndexEntry {
  readonly path: string;
  readonly mode: number;
  readonly object: string;
  readonly stage: number;
  /** Added with `git add -N`: tracked, with no content staged yet. */
  readonly intentToAdd: boolean;
}

/** What an index holds: its entries in index order, the length of its object names, and its extensions by signature. */
export interface IndexContent {
  readonly entries: readonly IndexEntry[];
  readonly objectBytes: number;
  readonly extensions: ReadonlyMap<string, Buffer>;
}

/**
 * Every path in the index `data` (the bytes of a repository's `index` file), once each (an
 * unmerged path has several entries), in index order; undefined when it cannot be read exactly.
 */
export function indexPaths(data: Buffer): string[] | undefined {
  const content = readIndex(data);
  if (!content) return undefined;
  const paths: string[] = [];
  for (const entry of content.entries) if (paths[paths.length - 1] !== entry.path) paths.push(entry.path);
  return paths;
}

/**
 * The entries and extensions of the index `data`; undefined when it cannot be read exactly, or
 * holds what Warden leaves to git (a split or sparse index, skip-worktree entries).
 */
export function readIndex(data: Buffer): IndexContent | undefined {
  if (data.length < 12 || data.toString('latin1', 0, 4) !== 'DIRC') return undefined;
  const version = data.readUInt32BE(4);
  if (version < 2 || version > 4) return undefined;
  const objectBytes = checksumBytes(data);
  if (objectBytes === undefined) return undefined;
  const end = data.length - objectBytes;
  const count = data.readUInt32BE(8);
  const entries: IndexEntry[] = [];
  let previous: Buffer = Buffer.alloc(0);
  let at = 12;
  for (let i = 0; i < count; i++) {
    const start = at;
    if (at + STAT_BYTES + objectBytes + 2 > end) return undefined;
    const mode = data.readUInt32BE(at + 24);
    if ((mode & 0o170000) === SPARSE_DIRECTORY_MODE) return undefined;
    const object = data.toString('hex', at + STAT_BYTES, at + STAT_BYTES + objectBytes);
    const flags = data.readUInt16BE(at + STAT_BYTES + objectBytes);
    at += STAT_BYTES + objectBytes + 2;
    let intentToAdd = false;
    if (flags & EXTENDED_FLAG) {
      // A skip-worktree entry (sparse checkout) is tracked but not checked out: left to git.
      if (version < 3) return undefined;
      const extended = data.readUInt16BE(at);
      if (extended & SKIP_WORKTREE_FLAG) return undefined;
      intentToAdd = (extended & INTENT_TO_ADD_FLAG) !== 0;
      at += 2;
    }
    let name: Buffer;
    if (version === 4) {
      const drop = varint(data, at, end);
      if (!drop || drop.value > previous.length) return undefined;
      at = drop.next;
      const nul = data.indexOf(0, at);
      if (nul < 0 || nul >= end) return undefined;
      name = Buffer.concat([previous.subarray(0, previous.length - drop.value), data.subarray(at, nul)]);
      at = nul + 1;
    } else {
      const nul = data.indexOf(0, at);
      if (nul < 0 || nul >= end) return undefined;
      name = data.subarray(at, nul);
      // The entry is padded with one to eight NULs to a multiple of eight bytes.
      at = start + ((nul - start + 8) & ~7);
      if (at > end) return undefined;
    }
    const length = flags & NAME_LENGTH_MASK;
    if (length !== NAME_LENGTH_MASK && length !== name.length) return undefined;
    entries.push({ path: name.toString('utf8'), mode, object, stage: (flags & STAGE_MASK) >> 12, intentToAdd });
    previous = name;
  }
  // Extensions: a split index ("link") keeps entries in another file; a sparse one ("sdir") has
  // directories for entries. Either is left to git; the others do not change the entries.
  const extensions = new Map<string, Buffer>();
  while (at + 8 <= end) {
    const signature = data.toString('latin1', at, at + 4);
    if (signature === 'link' || signature === 'sdir') return undefined;
    const size = data.readUInt32BE(at + 4);
    if (at + 8 + size > end) return undefined;
    extensions.set(signature, data.subarray(at + 8, at + 8 + size));
    at += 8 + size;
  }
  return at === end ? { entries, objectBytes, extensions } : undefined;
}

/**
 * The length of the index's object names, told by its trailing checksum: SHA-1 (20 bytes) or
 * SHA-256 (32) of everything before it. Undefined when neither matches (a file being written, or
 * one written without its checksum).
 */
function checksumBytes(data: Buffer): number | undefined {
  for (const [algorithm, bytes] of [['sha1', 20], ['sha256', 32]] as const) {
    if (data.length < 12 + bytes) continue;
    const body = data.subarray(0, data.length - bytes);
    if (createHash(algorithm).update(body).digest().equals(data.subarray(data.length - bytes))) return bytes;
  }
  return undefined;
}

/** Git's offset varint (each continuation adds one before shifting); undefined past `end`. */
function varint(data: Buffer, at: number, end: number): { readonly value: number; readonly next: number } | undefined {
  if (at >= end) return undefined;
  let byte = data[at++]!;
  let value = byte & 0x7f;
  while (byte & 0x80) {
    if (at >= end || value > 0xffffff) return undefined;
    byte = data[at++]!;
    value = ((value + 1) << 7) | (byte & 0x7f);
  }
  return { value, next: at };
}
