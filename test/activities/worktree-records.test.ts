import { mkdir, mkdtemp, realpath, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { git } from '../../src/activities/git';
import { folderOfRecord, recordNamedBy, recordsOfFolder } from '../../src/activities/worktree-records';
import { createSampleRepo } from '../../src/client/sample-repo';

let tmp: string;
let repo: string;
let commonDir: string;
beforeEach(async () => {
  tmp = await realpath(await mkdtemp(path.join(os.tmpdir(), 'warden-records-')));
  repo = createSampleRepo(path.join(tmp, 'repo'));
  commonDir = path.join(repo, '.git');
});
afterEach(async () => {
  await rm(tmp, { recursive: true, force: true });
});

test('a worktree and its record name each other', async () => {
  const worktree = path.join(tmp, 'wt', 'a');
  await git(repo, ['worktree', 'add', '-q', '-b', 'a', worktree, 'main']);
  const admin = await recordNamedBy(worktree);
  expect(admin).toBe(path.join(commonDir, 'worktrees', 'a'));
  expect(await folderOfRecord(admin!)).toBe(worktree);
  expect(await recordsOfFolder(commonDir, 'a', (folder) => folder === worktree)).toEqual([admin]);
  expect(await recordNamedBy(repo)).toBeUndefined(); // the main worktree has a .git folder, not a file
});

test('a record that names anything but a .git is no record of that folder', async () => {
  const odd = path.join(commonDir, 'worktrees', 'odd');
  await mkdir(odd, { recursive: true });
  await writeFile(path.join(odd, 'gitdir'), `${path.join(tmp, 'wt', 'odd', 'elsewhere')}\n`);
  expect(await folderOfRecord(odd)).toBeUndefined();
  expect(await recordsOfFolder(commonDir, 'odd', () => true)).toEqual([]);
});

test('finds every record of a folder, or the first one only', async () => {
  const folder = path.join(tmp, 'wt', 'twice');
  for (const name of ['twice', 'twice1', 'other']) {
    await mkdir(path.join(commonDir, 'worktrees', name), { recursive: true });
    await writeFile(path.join(commonDir, 'worktrees', name, 'gitdir'), `${path.join(name === 'other' ? path.join(tmp, 'wt', 'other') : folder, '.git')}\n`);
  }
  const all = await recordsOfFolder(commonDir, 'twice', (named) => named === folder);
  expect(all.map((admin) => path.basename(admin)).sort()).toEqual(['twice', 'twice1']);
  expect(await recordsOfFolder(commonDir, 'twice', (named) => named === folder, { firstOnly: true })).toHaveLength(1);
});
