import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { recordEndingRefs } from '../../src/activities/ending-refs';
import { git, gitRaw, moveRefs } from '../../src/activities/git';
import { lineageRefFiles, readLineageRefFile } from '../../src/activities/lineage-ref';
import { processTally, tallySince } from '../../src/activities/process-tally';
import { readResumeRef } from '../../src/activities/resume-ref';
import { trashEmptied } from '../../src/activities/trash';
import { ensureWorktree } from '../../src/activities/worktree';
import { createSampleRepo } from '../../src/client/sample-repo';
import { activeLineageDir, lineageRefFor, resumeRefFor } from '../../src/shared/ids';

let tmp: string;
let repo: string;
const HOUR = 3_600_000;
const now = new Date('2026-01-01T00:00:00Z');

beforeEach(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'warden-ending-refs-'));
  repo = createSampleRepo(path.join(tmp, 'repo'));
});
afterEach(async () => {
  await trashEmptied();
  await rm(tmp, { recursive: true, force: true });
});

test("an ending intent's lineage and resume refs take one read of the ref files and one transaction: one git process", async () => {
  const { worktreePath } = await ensureWorktree({ repoPath: repo, baseBranch: 'main', intentId: 'a', worktreeRoot: path.join(tmp, 'worktrees') });
  const folder = path.join(worktreePath, activeLineageDir('a'));
  await mkdir(folder, { recursive: true });
  await writeFile(path.join(folder, '01-triage.md'), 'risk LOW\n');
  await git(worktreePath, ['add', '-A']);
  await git(worktreePath, ['commit', '-q', '-m', 'warden(a): triage attempt 1']);
  const head = await git(worktreePath, ['rev-parse', 'HEAD']);

  const tally = processTally();
  const ending = await recordEndingRefs(repo, 'a', { lineageFolder: folder, keepForResumeMs: HOUR, now });
  expect(tallySince(tally).launched.git).toBe(1);
  expect(ending).toEqual({ lineageRef: lineageRefFor('a'), kept: { ref: resumeRefFor('a'), keptUntil: new Date(now.getTime() + HOUR) } });
  expect(await lineageRefFiles(repo, 'a')).toEqual(['01-triage.md']);
  expect(await readLineageRefFile(repo, 'a', '01-triage.md')).toBe('risk LOW\n');
  expect(await git(repo, ['rev-parse', `${lineageRefFor('a')}^1`, `${resumeRefFor('a')}^1`])).toBe(`${head}\n${head}`);
  expect((await readResumeRef(repo, 'a'))?.keptUntil).toEqual(new Date(now.getTime() + HOUR));
  await git(repo, ['fsck', '--strict', '--no-dangling']);

  // Again, later (a retried cleanup): the lineage is recorded already, the resume ref's date moves.
  const lineage = await git(repo, ['rev-parse', lineageRefFor('a')]);
  const again = await recordEndingRefs(repo, 'a', { lineageFolder: folder, keepForResumeMs: HOUR, now: new Date(now.getTime() + HOUR) });
  expect(again.kept?.keptUntil).toEqual(new Date(now.getTime() + 2 * HOUR));
  expect(await git(repo, ['rev-parse', lineageRefFor('a')])).toBe(lineage);
  expect((await readResumeRef(repo, 'a'))?.keptUntil).toEqual(new Date(now.getTime() + 2 * HOUR));
});

test('moveRefs moves every ref or none: a ref that no longer names what it did stops the whole transaction', async () => {
  const main = await git(repo, ['rev-parse', 'main']);
  await git(repo, ['update-ref', 'refs/warden/one', main]);
  const other = await git(repo, ['commit-tree', `${main}^{tree}`, '-p', main, '-m', 'other']);
  await expect(moveRefs(repo, [{ ref: 'refs/warden/two', to: other }, { ref: 'refs/warden/one', to: other, from: other }], 'test')).rejects.toThrow(/update-ref/);
  expect((await gitRaw(repo, ['rev-parse', '--verify', '--quiet', 'refs/warden/two'])).code).not.toBe(0);
  expect(await git(repo, ['rev-parse', 'refs/warden/one'])).toBe(main);
  // `create` refuses a ref that exists.
  await expect(moveRefs(repo, [{ ref: 'refs/warden/one', to: other }], 'test')).rejects.toThrow(/update-ref/);
  await moveRefs(repo, [{ ref: 'refs/warden/two', to: other }, { ref: 'refs/warden/one', to: other, from: main }], 'test');
  expect(await git(repo, ['rev-parse', 'refs/warden/one', 'refs/warden/two'])).toBe(`${other}\n${other}`);
});
