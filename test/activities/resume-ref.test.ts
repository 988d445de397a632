import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { git, gitRaw } from '../../src/activities/git';
import { dropExpiredResumeRefs, keepForResume, readResumeRef, resumableFrom } from '../../src/activities/resume-ref';
import { processTally, tallySince } from '../../src/activities/process-tally';
import { createSampleRepo } from '../../src/client/sample-repo';

let tmp: string;
let repo: string;
const HOUR = 3_600_000;
const now = new Date('2026-01-01T00:00:00Z');

beforeEach(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'warden-resume-ref-'));
  repo = createSampleRepo(path.join(tmp, 'repo'));
});
afterEach(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** A commit on the intent branch `warden/<id>` (made from main the first time). */
async function commitOnBranch(id: string, message: string): Promise<string> {
  const branch = `refs/heads/warden/${id}`;
  const parent = (await gitRaw(repo, ['rev-parse', '--verify', '--quiet', branch])).stdout.trim() || (await git(repo, ['rev-parse', 'main']));
  const commit = await git(repo, ['commit-tree', `${parent}^{tree}`, '-p', parent, '-m', message]);
  await git(repo, ['update-ref', branch, commit]);
  return commit;
}

test("an ended intent's commits stay resumable after its branch is deleted, until the ref is dropped past its date", async () => {
  const first = await commitOnBranch('a', 'spec');
  const head = await commitOnBranch('a', 'impl');
  expect(await keepForResume(repo, 'a', 2 * HOUR, now)).toEqual({ ref: 'refs/warden/resume/a', keptUntil: new Date(now.getTime() + 2 * HOUR) });
  await git(repo, ['update-ref', '-d', 'refs/heads/warden/a']); // a rejection deletes the branch
  expect(await git(repo, ['rev-parse', 'refs/warden/resume/a^1'])).toBe(head);
  expect(await resumableFrom(repo, 'a', first)).toBe(true);
  expect(await resumableFrom(repo, 'a', await git(repo, ['rev-parse', 'main']))).toBe(true);

  // another intent's ref, kept longer, stays; this one goes once its date has passed, not before
  await commitOnBranch('b', 'spec');
  await keepForResume(repo, 'b', 10 * HOUR, now);
  expect(await dropExpiredResumeRefs(repo, new Date(now.getTime() + HOUR))).toEqual([]);
  expect(await dropExpiredResumeRefs(repo, new Date(now.getTime() + 3 * HOUR))).toEqual(['a']);
  expect(await readResumeRef(repo, 'a')).toBeUndefined();
  expect(await resumableFrom(repo, 'a', first)).toBe(false);
  expect((await readResumeRef(repo, 'b'))?.keptUntil).toEqual(new Date(now.getTime() + 10 * HOUR));
});

test('a repository whose ref files hold no resume ref is not asked: no git process; one holding one, packed or loose, is', async () => {
  const launched = async (): Promise<number> => {
    const before = processTally();
    expect(await dropExpiredResumeRefs(repo, new Date(now.getTime() + 3 * HOUR))).toEqual([]);
    return tallySince(before).launched.git ?? 0;
  };
  expect(await launched()).toBe(0);
  await commitOnBranch('d', 'spec');
  await keepForResume(repo, 'd', 10 * HOUR, now);
  expect(await launched()).toBe(1);
  await git(repo, ['pack-refs', '--all']);
  expect(await launched()).toBe(1);
});

test("an ending intent's own ref, just dated, is no reason to ask git; another intent's ref is, and so is its own dated no later than now", async () => {
  const launched = async (keptNow: Awaited<ReturnType<typeof keepForResume>>, at: Date, dropped: string[]): Promise<number> => {
    const before = processTally();
    expect(await dropExpiredResumeRefs(repo, at, keptNow)).toEqual(dropped);
    return tallySince(before).launched.git ?? 0;
  };
  await commitOnBranch('e', 'impl');
  const kept = await keepForResume(repo, 'e', HOUR, now);
  expect(await launched(kept, now, [])).toBe(0);
  // Its date has passed: it goes (listed, then deleted), as it would without the hint.
  expect(await launched(kept, new Date(now.getTime() + 2 * HOUR), ['e'])).toBe(2);
  // Kept for no time at all: expired at once.
  const keptForNothing = await keepForResume(repo, 'e', 0, now);
  expect(await launched(keptForNothing, now, ['e'])).toBe(2);
  // Another intent's ref in the files: git is asked.
  await commitOnBranch('f', 'impl');
  await keepForResume(repo, 'f', 10 * HOUR, now);
  const keptAgain = await keepForResume(repo, 'e', HOUR, now);
  expect(await launched(keptAgain, now, [])).toBe(1);
});

test('a second ending keeps the first ending\'s commits too; no branch, no new ref', async () => {
  expect(await keepForResume(repo, 'c', HOUR, now)).toBeUndefined();
  const firstRun = await commitOnBranch('c', 'impl attempt 1');
  await keepForResume(repo, 'c', HOUR, now);
  // a resume moved the branch back and the run made other commits
  await git(repo, ['update-ref', 'refs/heads/warden/c', await git(repo, ['rev-parse', 'main'])]);
  const secondRun = await commitOnBranch('c', 'impl attempt 1 again');
  await keepForResume(repo, 'c', 2 * HOUR, now);
  expect(await resumableFrom(repo, 'c', firstRun)).toBe(true);
  expect(await resumableFrom(repo, 'c', secondRun)).toBe(true);
  // the same head kept again only moves the date: no chain of commits grows
  const before = await git(repo, ['rev-parse', 'refs/warden/resume/c^2']);
  await keepForResume(repo, 'c', 3 * HOUR, now);
  expect(await git(repo, ['rev-parse', 'refs/warden/resume/c^2'])).toBe(before);
  expect((await readResumeRef(repo, 'c'))?.keptUntil).toEqual(new Date(now.getTime() + 3 * HOUR));
});

test('keeping an intent for resume takes one git process, the ref moved (the refs and their loose commits read from files): the commit is written here, and git finds it sound', async () => {
  const head = await commitOnBranch('e', 'impl');
  const before = processTally();
  await keepForResume(repo, 'e', HOUR, now);
  expect(tallySince(before).launched.git).toBe(1);
  expect(await git(repo, ['log', '-1', '--format=%T %P|%an <%ae>|%ct', 'refs/warden/resume/e'])).toBe(`${await git(repo, ['rev-parse', `${head}^{tree}`])} ${head}|Warden <warden@localhost>|${now.getTime() / 1000}`);
  expect((await readResumeRef(repo, 'e'))?.keptUntil).toEqual(new Date(now.getTime() + HOUR));
  await git(repo, ['fsck', '--strict', '--no-dangling', 'refs/warden/resume/e']);
});
