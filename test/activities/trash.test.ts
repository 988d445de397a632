import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sweepTrash, throwAway, trashEmptied } from '../../src/activities/trash';

let tmp: string;
beforeEach(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'warden-trash-'));
});
afterEach(async () => {
  await trashEmptied();
  await rm(tmp, { recursive: true, force: true });
});

async function folderWithFiles(dir: string, count: number): Promise<string> {
  await mkdir(path.join(dir, 'sub'), { recursive: true });
  for (let i = 0; i < count; i++) await writeFile(path.join(dir, i % 2 ? 'sub' : '', `f${i}`), 'x');
  return dir;
}

test('moves a folder out of the way at once, then deletes it', async () => {
  const target = await folderWithFiles(path.join(tmp, 'worktree'), 20);
  const trash = path.join(tmp, '.trash');
  await expect(throwAway(target, trash)).resolves.toBe(true);
  expect(existsSync(target)).toBe(false);
  await trashEmptied();
  expect(await readdir(trash)).toEqual([]);
});

test('says so when there is nothing to throw away', async () => {
  await expect(throwAway(path.join(tmp, 'missing'), path.join(tmp, '.trash'))).resolves.toBe(false);
});

test('a sweep deletes what an earlier process left in the trash', async () => {
  const trash = path.join(tmp, '.trash');
  await folderWithFiles(path.join(trash, 'left-by-a-crash'), 5);
  await sweepTrash(trash);
  await trashEmptied();
  expect(await readdir(trash)).toEqual([]);
});

test('throwing something away also deletes what an earlier process left there', async () => {
  const trash = path.join(tmp, '.trash');
  await folderWithFiles(path.join(trash, 'left-by-a-crash'), 5);
  await throwAway(await folderWithFiles(path.join(tmp, 'worktree'), 3), trash);
  await trashEmptied();
  expect(await readdir(trash)).toEqual([]);
});

test('takes many folders at once, and every one is deleted', async () => {
  const trash = path.join(tmp, '.trash');
  const targets = await Promise.all(Array.from({ length: 30 }, (_, i) => folderWithFiles(path.join(tmp, `w${i}`), 4)));
  await Promise.all(targets.map((target) => throwAway(target, trash)));
  for (const target of targets) expect(existsSync(target)).toBe(false);
  await trashEmptied();
  expect(await readdir(trash)).toEqual([]);
});
