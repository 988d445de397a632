/**
 * Git object names computed here rather than by git, for a question "is this the tree git has?"
 * that needs no object written: an object's name is the hash (SHA-1, or SHA-256 in a repository
 * made so) of `<type> <size>\0<content>`, and a tree's content is its entries, each
 * `<mode> <name>\0<the entry's object name, binary>`, in git's order (by name, byte for byte, a
 * folder's name as if it ended in `/`).
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';

export type ObjectFormat = 'sha1' | 'sha256';

/** The object format whose names are as long as `objectName` (40 or 64 hex digits). */
export function objectFormatOf(objectName: string): ObjectFormat | undefined {
  return objectName.length === 40 ? 'sha1' : objectName.length === 64 ? 'sha256' : undefined;
}

/** The kinds of object Warden names (and writes, see loose-objects.ts). */
export type ObjectType = 'blob' | 'tree' | 'commit';

/** The name git gives an object of `type` with `content`. */
export function objectName(format: ObjectFormat, type: ObjectType, content: Buffer): string {
  return createHash(format).update(`${type} ${content.length}\0`).update(content).digest('hex');
}

interface Folder {
  readonly files: Map<string, string>;
  readonly folders: Map<string, Folder>;
}

/** Told of every object a tree is made of (its blobs, its subtrees, itself), e.g. to write it. */
export type ObjectSink = (type: ObjectType, content: Buffer, name: string) => Promise<void>;

/**
 * The tree git writes (`write-tree`) from an index holding `files` (paths relative to `folder`,
 * `/`-separated) as regular non-executable files (`100644`) with their bytes as they are on disk.
 * `sink`, when given, is handed every object of it.
 */
export async function treeNameOfFiles(format: ObjectFormat, folder: string, files: readonly string[], sink?: ObjectSink): Promise<string> {
  const root: Folder = { files: new Map(), folders: new Map() };
  for (const file of files) {
    const parts = file.split('/');
    let at = root;
    for (const part of parts.slice(0, -1)) {
      if (!at.folders.has(part)) at.folders.set(part, { files: new Map(), folders: new Map() });
      at = at.folders.get(part)!;
    }
    const content = await readFile(path.join(folder, file));
    const name = objectName(format, 'blob', content);
    await sink?.('blob', content, name);
    at.files.set(parts[parts.length - 1]!, name);
  }
  return treeName(format, root, sink);
}

async function treeName(format: ObjectFormat, folder: Folder, sink: ObjectSink | undefined): Promise<string> {
  const subtrees: Array<{ key: Buffer; mode: string; name: string; id: string }> = [];
  for (const [name, sub] of folder.folders) subtrees.push({ key: Buffer.from(`${name}/`), mode: '40000', name, id: await treeName(format, sub, sink) });
  const entries = [...[...folder.files].map(([name, id]) => ({ key: Buffer.from(name), mode: '100644', name, id })), ...subtrees].sort((a, b) => Buffer.compare(a.key, b.key));
  const content = Buffer.concat(entries.flatMap((entry) => [Buffer.from(`${entry.mode} ${entry.name}\0`), Buffer.from(entry.id, 'hex')]));
  const name = objectName(format, 'tree', content);
  await sink?.('tree', content, name);
  return name;
}
