/**
 * Every ref of a repository read from the files git keeps them in, without starting git: the
 * snapshot before each agent stage and test run needs them all (to put back a ref a step moved),
 * and reads the repository's other control files the same way.
 *
 * Git's files backend keeps refs in `packed-refs` (`<object> <ref>` lines, `^<object>` for a
 * tag's peeled commit) and as loose files under `refs/`, which win over packed ones; a loose file
 * holds an object name or `ref: <target>` (a symbolic ref, e.g. refs/remotes/origin/HEAD). What
 * this cannot read with certainty (another ref store, an unexpected file) it leaves to git.
 */
import { lstat, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

const OBJECT_NAME = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
/** Symbolic refs pointing at symbolic refs: git follows five levels. */
const MAX_SYMBOLIC_DEPTH = 5;

/**
 * Ref name → the object it names (a symbolic ref: its target's object), as `git for-each-ref
 * --format='%(objectname) %(refname)'` lists them in the repository whose common git dir is
 * `commonDir`; undefined when the refs are not kept as plain files there (a reftable store, a
 * loose file git would have to interpret).
 */
export async function refsFromFiles(commonDir: string): Promise<Record<string, string> | undefined> {
  if (await reftableIn(commonDir)) return undefined;
  const refs = await packedRefs(commonDir);
  if (!refs) return undefined;
  const symbolic = new Map<string, string>();
  if (!(await readLoose(commonDir, 'refs', refs, symbolic))) return undefined;
  for (const [ref, target] of symbolic) {
    let at = target;
    for (let depth = 0; depth < MAX_SYMBOLIC_DEPTH && symbolic.has(at); depth++) at = symbolic.get(at)!;
    const name = refs.get(at);
    // A symbolic ref whose target is missing is left out, as git leaves out a broken ref.
    if (name) refs.set(ref, name);
  }
  return Object.fromEntries(refs);
}

/**
 * The refs `names` (full ref names) and the objects they name, read as git reads one ref: its
 * loose file, else its line in `packed-refs`, a symbolic ref followed to its target. What it
 * costs does not grow with the refs the repository holds (a branch and refs for every intent).
 * A ref that does not exist is not in the record. Undefined when the refs are not kept as plain
 * files there, or when one of them is a file git would have to interpret, or
 * `withReplaceRefs` is false and the repository has replace refs.
 */
export async function refsNamedFromFiles(commonDir: string, names: readonly string[], withReplaceRefs = true): Promise<Record<string, string> | undefined> {
  if (await reftableIn(commonDir)) return undefined;
  const packed = await packedRefs(commonDir);
  if (!packed) return undefined;
  if (!withReplaceRefs) {
    if ([...packed.keys()].some((ref) => ref.startsWith('refs/replace/'))) return undefined;
    const replace = await readdir(path.join(commonDir, 'refs', 'replace')).catch((error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? [] : undefined));
    if (!replace || replace.length > 0) return undefined;
  }
  const found: Record<string, string> = {};
  for (const name of new Set(names)) {
    let at = name;
    let object: string | undefined;
    for (let depth = 0; ; depth++) {
      const loose = await looseRef(commonDir, at);
      if (loose === undefined) return undefined;
      if (loose === 'absent') object = packed.get(at);
      else if ('object' in loose) object = loose.object;
      else if (depth < MAX_SYMBOLIC_DEPTH) {
        at = loose.target;
        continue;
      } else return undefined; // deeper than git follows: let git say what it makes of it
      break;
    }
    if (object) found[name] = object;
  }
  return found;
}

async function reftableIn(commonDir: string): Promise<boolean> {
  return (await readdir(commonDir).catch(() => [] as string[])).includes('reftable');
}

/** The refs in `packed-refs` (none when there is no such file); undefined when a line is not one git writes. */
async function packedRefs(commonDir: string): Promise<Map<string, string> | undefined> {
  const refs = new Map<string, string>();
  const packed = await readFile(path.join(commonDir, 'packed-refs'), 'utf8').catch((error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? '' : undefined));
  if (packed === undefined) return undefined;
  for (const line of packed.split('\n')) {
    if (line === '' || line.startsWith('#') || line.startsWith('^')) continue;
    const [name, ref, more] = line.split(' ');
    if (!name || !ref || more !== undefined || !OBJECT_NAME.test(name) || !ref.startsWith('refs/')) return undefined;
    refs.set(ref, name);
  }
  return refs;
}

/**
 * The loose file of the ref `name`: the object it names, or the target of a symbolic ref;
 * `absent` when there is no such file (a folder by that name holds no ref either); undefined for
 * a name git would not read there, or a file it would have to interpret (a link, anything else).
 */
async function looseRef(commonDir: string, name: string): Promise<LooseRef | 'absent' | undefined> {
  const parts = name.split('/');
  if (parts[0] !== 'refs' || parts.some((part) => part === '' || part === '.' || part === '..' || part.endsWith('.lock'))) return undefined;
  const file = path.join(commonDir, ...parts);
  const stats = await lstat(file).catch((error: NodeJS.ErrnoException) => (error.code === 'ENOENT' || error.code === 'ENOTDIR' ? 'absent' : undefined));
  if (stats === 'absent' || stats?.isDirectory()) return 'absent';
  if (!stats?.isFile()) return undefined;
  return looseRefIn(file);
}

/** What a loose ref file holds: an object name, or `ref: <target>` (a symbolic ref). */
type LooseRef = { readonly object: string } | { readonly target: string };

/** The loose ref file `file` read; undefined when it holds anything else (or cannot be read). */
async function looseRefIn(file: string): Promise<LooseRef | undefined> {
  const content = (await readFile(file, 'utf8').catch(() => '')).trim();
  if (OBJECT_NAME.test(content)) return { object: content };
  if (/^ref: refs\/\S+$/.test(content)) return { target: content.slice('ref: '.length) };
  return undefined;
}

/** Loose refs under `rel` into `refs` (object names) and `symbolic` (targets); false on anything else. */
async function readLoose(commonDir: string, rel: string, refs: Map<string, string>, symbolic: Map<string, string>): Promise<boolean> {
  const entries = await readdir(path.join(commonDir, rel), { withFileTypes: true }).catch(() => undefined);
  if (!entries) return rel !== 'refs'; // no refs folder at all is not a files store
  for (const entry of entries) {
    const name = `${rel}/${entry.name}`;
    if (entry.isDirectory()) {
      if (!(await readLoose(commonDir, name, refs, symbolic))) return false;
    } else if (entry.isFile()) {
      if (entry.name.endsWith('.lock')) continue; // an update in progress; no ref is named so
      const loose = await looseRefIn(path.join(commonDir, name));
      if (!loose) return false;
      if ('object' in loose) refs.set(name, loose.object);
      else symbolic.set(name, loose.target);
    } else {
      return false;
    }
  }
  return true;
}
