/**
 * Git objects written by Warden itself into a repository's object store, the way git writes a
 * loose object: `objects/<first two hex digits>/<the rest>`, holding `<type> <size>\0<content>`
 * deflated, read-only, put in place with a link from a temporary file so no reader ever sees half
 * of one. An ending intent keeps its lineage and its commits under refs of its own; making those
 * commits took a git process per step (hash-object, update-index, write-tree, commit-tree), and a
 * stop ends a hundred intents at once. Only the ref updates still go to git.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { link, mkdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { deflateSync } from 'node:zlib';
import { commonDirOf, gitDirOf, WARDEN_GIT_PERSON } from './git';
import { objectName, type ObjectFormat, type ObjectType } from './object-names';
import { userConfigFiles } from './user-config';

export class LooseObjectStore {
  private constructor(
    readonly objectsDir: string,
    readonly format: ObjectFormat,
  ) {}

  /**
   * The object store of the repository checked out at `repoPath` (its `.git` a folder, or a file
   * naming one; a linked worktree's through its `commondir`), or undefined when it is anything
   * else, or when git would write objects other than plainly: a shared repository (git then sets
   * group permissions on what it makes), a config that includes other files (which could say so),
   * or an object directory named in the environment. The caller then asks git.
   */
  static async of(repoPath: string, format: ObjectFormat): Promise<LooseObjectStore | undefined> {
    if (process.env.GIT_OBJECT_DIRECTORY !== undefined) return undefined;
    const gitDir = await gitDirOf(repoPath);
    if (!gitDir) return undefined;
    const common = await commonDirOf(gitDir);
    const config = await readFile(path.join(common, 'config'), 'utf8').catch(() => undefined);
    // commitEncoding: git names it in every commit it writes there.
    if (config === undefined || /sharedrepository|commitencoding|\[\s*include/i.test(config)) return undefined;
    // The user's config too: an include there could say so as well, as could config in the environment.
    if (process.env.GIT_CONFIG_COUNT !== undefined || process.env.GIT_CONFIG_PARAMETERS !== undefined) return undefined;
    for (const file of userConfigFiles()) {
      if (/sharedrepository|\[\s*include/i.test(await readFile(file, 'utf8').catch(() => ''))) return undefined;
    }
    // The identity in the environment wins over Warden's for git: its commits would differ from these.
    if (['GIT_AUTHOR_NAME', 'GIT_AUTHOR_EMAIL', 'GIT_COMMITTER_NAME', 'GIT_COMMITTER_EMAIL'].some((name) => process.env[name] !== undefined)) return undefined;
    const objectsDir = path.join(common, 'objects');
    return (await stat(objectsDir).catch(() => undefined))?.isDirectory() ? new LooseObjectStore(objectsDir, format) : undefined;
  }

  /** Writes the object (nothing when the store holds it already) and returns its name. */
  async write(type: ObjectType, content: Buffer): Promise<string> {
    const name = objectName(this.format, type, content);
    const folder = path.join(this.objectsDir, name.slice(0, 2));
    const file = path.join(folder, name.slice(2));
    // Git freshens an object it finds written: a prune then counts it as new, not as long unreachable.
    if (existsSync(file)) {
      const now = new Date();
      await utimes(file, now, now).catch(() => undefined);
      return name;
    }
    await mkdir(folder, { recursive: true });
    const temporary = path.join(folder, `tmp_obj_${randomBytes(6).toString('hex')}`);
    await writeFile(temporary, deflateSync(Buffer.concat([Buffer.from(`${type} ${content.length}\0`), content])), { mode: 0o444, flag: 'wx' });
    try {
      await link(temporary, file);
    } catch (error) {
      // Another writer put the same object there first: its bytes are the same.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    } finally {
      await rm(temporary, { force: true });
    }
    return name;
  }
}

/**
 * A commit object's content as `git commit-tree` writes it with Warden's identity: the tree, the
 * parents in order, Warden as author and committer at `when` (a time, written in UTC, or a date
 * as `--date=raw` prints it: `<seconds> <zone>`), then the message, ending in one newline.
 */
export function commitContent(commit: { readonly tree: string; readonly parents: readonly string[]; readonly message: string; readonly when: Date | string }): Buffer {
  const date = typeof commit.when === 'string' ? commit.when : `${Math.floor(commit.when.getTime() / 1000)} +0000`;
  const person = `${WARDEN_GIT_PERSON} ${date}`;
  const message = commit.message.endsWith('\n') ? commit.message : `${commit.message}\n`;
  return Buffer.from(`tree ${commit.tree}\n${commit.parents.map((parent) => `parent ${parent}\n`).join('')}author ${person}\ncommitter ${person}\n\n${message}`);
}
