/**
 * A tree less some of its folders, made from loose trees without starting git: the intent's
 * change without its lineage is the branch head's tree less the lineage folders, and the trees
 * on the way to them are ones git wrote for the branch's own commits (loose). The result is the
 * tree `read-tree`, `rm -r --cached` and `write-tree` in a temporary index make: a tree the
 * removal empties goes from its parent too, and a tree it does not touch keeps its name. Where
 * a tree on the way is not loose, or holds an entry git would write otherwise (a mode git no
 * longer writes), the answer is undefined and git is asked.
 */
import type { LooseObjectStore } from './loose-objects';
import { readLooseTree, type TreeEntry } from './loose-reader';

/** The modes git writes into a tree from an index. */
const MODES_GIT_WRITES = new Set(['40000', '100644', '100755', '120000', '160000']);
const FOLDER_MODE = '40000';
const LINK_MODE = '120000';
/** Code points some file systems ignore in names (so `.g\u200cit` is `.git` there): git refuses such names, and so does this. */
const IGNORABLE_IN_NAMES = /[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]/;

/** Thrown inside the walk when git has to be asked instead. */
class AskGit extends Error {}

/**
 * The tree `tree` less the paths `folders` (`/`-separated, files or folders, missing ones
 * ignored), its new trees written to `store`; undefined when git is to be asked.
 */
export async function treeLessFolders(store: LooseObjectStore, tree: string, folders: readonly string[]): Promise<string | undefined> {
  try {
    const result = await without(store, tree, folders.map((folder) => folder.split('/').filter(Boolean)));
    if (result === 'unchanged') return tree;
    return result === 'empty' ? store.write('tree', Buffer.alloc(0)) : result;
  } catch (error) {
    if (error instanceof AskGit) return undefined;
    throw error;
  }
}

/**
 * Whether a tree's entries are as git writes them: modes it writes, names its path check lets
 * into an index (no `.git` however spelt, no `.` or `..`, no `/`, `\` or `:`, no link named as
 * `.gitmodules`), in its order (by name, a folder's as if it ended in `/`), each name once.
 */
function asGitWritesIt(entries: readonly TreeEntry[]): boolean {
  let previous: Buffer | undefined;
  for (const entry of entries) {
    if (!MODES_GIT_WRITES.has(entry.mode)) return false;
    const name = entry.name;
    const plain = name.toLowerCase().replace(/[. ]+$/, '');
    if (name === '' || name === '.' || name === '..' || /[/\\:]/.test(name) || IGNORABLE_IN_NAMES.test(name) || plain === '.git' || plain === 'git~1') return false;
    if (entry.mode === LINK_MODE && (plain.startsWith('.gitmodules') || plain.startsWith('gitmod~'))) return false;
    const key = Buffer.from(entry.mode === FOLDER_MODE ? `${name}/` : name);
    if (previous && Buffer.compare(previous, key) >= 0) return false;
    previous = key;
  }
  return true;
}

async function without(store: LooseObjectStore, tree: string, paths: readonly (readonly string[])[]): Promise<string | 'unchanged' | 'empty'> {
  const entries = await readLooseTree(store.objectsDir, tree);
  if (!entries) throw new AskGit();
  const kept: TreeEntry[] = [];
  const rewritten = new Map<TreeEntry, Buffer>();
  let changed = false;
  for (const entry of entries) {
    const below = paths.filter((parts) => parts[0] === entry.name);
    if (below.length === 0) {
      kept.push(entry);
    } else if (below.some((parts) => parts.length === 1)) {
      changed = true; // removed whole, whatever it is
    } else if (entry.mode !== FOLDER_MODE) {
      kept.push(entry); // a file where a folder was to be removed from: nothing to remove
    } else {
      const sub = await without(store, entry.object, below.map((parts) => parts.slice(1)));
      if (sub === 'unchanged') {
        kept.push(entry);
      } else {
        changed = true;
        if (sub !== 'empty') {
          kept.push(entry);
          rewritten.set(entry, Buffer.concat([Buffer.from(`${entry.mode} `), Buffer.from(entry.name, 'utf8'), Buffer.from([0]), Buffer.from(sub, 'hex')]));
        }
      }
    }
  }
  if (!changed) return 'unchanged';
  // A tree rewritten here must be byte for byte what write-tree would make of its entries, and
  // hold only entries git would take from an index.
  if (!asGitWritesIt(entries)) throw new AskGit();
  if (kept.length === 0) return 'empty';
  return store.write('tree', Buffer.concat(kept.map((entry) => rewritten.get(entry) ?? entry.raw)));
}
