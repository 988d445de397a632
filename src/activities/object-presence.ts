/**
 * Whether a repository's object store holds an object, told without starting git: loose, or named
 * in a pack's index (`objects/pack/*.idx`, version 2: a 256-entry fan-out table, then every object
 * name the pack holds, sorted). Before a commit made in the worker names a tree or file, git
 * would check that the store has it; a commit naming a missing object is a broken repository.
 */
import { existsSync } from 'node:fs';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';

const IDX_MAGIC = 0xff744f63;
const FANOUT_BYTES = 256 * 4;
/** Pack indexes kept read, in bytes: beyond this an index is read again when asked. */
const KEPT_INDEX_BYTES = 64 * 1024 * 1024;

interface PackIndex {
  readonly stamp: string;
  readonly data: Buffer;
}

const kept = new Map<string, PackIndex>();
let keptBytes = 0;

/** Answers "does the store hold this object?" for one store, reading its pack list once. */
export class ObjectPresence {
  private packs?: readonly string[];
  private readonly alternates: boolean;

  constructor(private readonly objectsDir: string) {
    this.alternates = existsSync(path.join(objectsDir, 'info', 'alternates'));
  }

  /** True when the store holds `name`; false when it does not; undefined when it cannot tell (another store may). */
  async holds(name: string): Promise<boolean | undefined> {
    if (existsSync(path.join(this.objectsDir, name.slice(0, 2), name.slice(2)))) return true;
    this.packs ??= (await readdir(path.join(this.objectsDir, 'pack')).catch(() => [] as string[])).filter((file) => file.endsWith('.idx')).map((file) => path.join(this.objectsDir, 'pack', file));
    const wanted = Buffer.from(name, 'hex');
    let sure = !this.alternates;
    for (const file of this.packs) {
      // An index whose pack is gone (a repack removing it) holds nothing any more.
      if (!existsSync(`${file.slice(0, -'.idx'.length)}.pack`)) continue;
      const found = await inPackIndex(file, wanted).catch(() => undefined);
      if (found) return true;
      if (found === undefined) sure = false;
    }
    return sure ? false : undefined;
  }
}

/** Whether the pack index `file` names `wanted`; undefined when it is not a version 2 index Warden can read. */
async function inPackIndex(file: string, wanted: Buffer): Promise<boolean | undefined> {
  const data = await packIndex(file);
  if (!data || data.length < 8 + FANOUT_BYTES || data.readUInt32BE(0) !== IDX_MAGIC || data.readUInt32BE(4) !== 2) return undefined;
  const size = wanted.length;
  const first = wanted[0]!;
  let low = first === 0 ? 0 : data.readUInt32BE(8 + (first - 1) * 4);
  let high = data.readUInt32BE(8 + first * 4);
  const names = 8 + FANOUT_BYTES;
  if (names + data.readUInt32BE(8 + 255 * 4) * size > data.length) return undefined;
  while (low < high) {
    const middle = (low + high) >>> 1;
    const order = data.compare(wanted, 0, size, names + middle * size, names + (middle + 1) * size);
    if (order === 0) return true;
    if (order > 0) high = middle;
    else low = middle + 1;
  }
  return false;
}

/** The bytes of a pack index, kept while they fit: a pack never changes once written. */
async function packIndex(file: string): Promise<Buffer | undefined> {
  const info = await stat(file).catch(() => undefined);
  if (!info) return undefined;
  const stamp = `${info.ino}:${info.size}:${info.mtimeMs}`;
  const known = kept.get(file);
  if (known?.stamp === stamp) return known.data;
  const data = await readFile(file).catch(() => undefined);
  if (!data) return undefined;
  if (known) {
    kept.delete(file);
    keptBytes -= known.data.length;
  }
  if (keptBytes + data.length <= KEPT_INDEX_BYTES) {
    kept.set(file, { stamp, data });
    keptBytes += data.length;
  }
  return data;
}
