import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { git } from '../../src/activities/git';
import { processTally, tallySince } from '../../src/activities/process-tally';
import { lineageRefFiles, readLineageRefFile, recordLineageRef } from '../../src/activities/lineage-ref';
import { trashEmptied } from '../../src/activities/trash';
import { ensureWorktree } from '../../src/activities/worktree';
import { createSampleRepo } from '../../src/client/sample-repo';
import { activeLineageDir, lineageRefFor } from '../../src/shared/ids';

let tmp: string;
let repo: string;
let worktreeRoot: string;

beforeEach(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'warden-lineage-ref-'));
  repo = createSampleRepo(path.join(tmp, 'repo'));
  worktreeRoot = path.join(tmp, 'worktrees');
});
afterEach(async () => {
  await trashEmptied();
  await rm(tmp, { recursive: true, force: true });
});

/** An intent worktree with a lineage folder holding `files` (committed on its branch when `commit`). */
async function intentWithLineage(intentId: string, files: Record<string, string>, commit = true): Promise<{ worktreePath: string; folder: string }> {
  const { worktreePath } = await ensureWorktree({ repoPath: repo, baseBranch: 'main', intentId, worktreeRoot });
  const folder = path.join(worktreePath, activeLineageDir(intentId));
  for (const [name, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(folder, name)), { recursive: true });
    await writeFile(path.join(folder, name), content);
  }
  if (commit) {
    await git(worktreePath, ['add', '-A']);
    await git(worktreePath, ['commit', '-q', '-m', `warden(${intentId}): triage attempt 1`]);
  }
  return { worktreePath, folder };
}

describe('the lineage ref', () => {
  it('holds the lineage folder byte for byte, on top of the intent branch', async () => {
    // Trailing blank lines, a CRLF and a name .gitignore-like rules would drop: all kept as they are.
    const files = { '01-triage.prompt.md': '# Warden: triage\n\n', '01-triage.md': 'risk LOW\r\n', '04-impl-attempt-1-tests.log': 'ok\n', 'nested/extra.md': 'x' };
    await writeFile(path.join(repo, '.gitattributes'), '*.md text eol=lf\n');
    await writeFile(path.join(repo, '.gitignore'), '*.log\n');
    await git(repo, ['add', '-A']);
    await git(repo, ['commit', '-q', '-m', 'attributes that would change the files']);
    const { worktreePath, folder } = await intentWithLineage('a', files, false);
    await expect(recordLineageRef(repo, 'a', folder)).resolves.toBe('refs/warden/lineage/a');
    expect((await lineageRefFiles(repo, 'a'))?.sort()).toEqual(Object.keys(files).sort());
    for (const [name, content] of Object.entries(files)) {
      expect(await readLineageRefFile(repo, 'a', name)).toBe(content);
      expect(await git(repo, ['cat-file', '-s', `${lineageRefFor('a')}:${name}`])).toBe(String(Buffer.byteLength(content)));
    }
    expect(await git(repo, ['rev-parse', `${lineageRefFor('a')}^1`])).toBe(await git(worktreePath, ['rev-parse', 'HEAD']));
    // Outside every branch: the branches are as they were.
    expect(await git(repo, ['branch', '--contains', lineageRefFor('a')])).toBe('');
    expect(readFileSync(path.join(folder, '01-triage.md'), 'utf8')).toBe('risk LOW\r\n');
  });

  it('makes a new lineage commit in one git process, the ref moved (the refs and their loose commits read from files): its objects are written here, and git finds them sound', async () => {
    const { worktreePath, folder } = await intentWithLineage('a', { '01-triage.md': 'risk LOW\n', 'nested/deeper/02-lld.md': '# design\n', 'empty.md': '' });
    const tally = processTally();
    await recordLineageRef(repo, 'a', folder);
    expect(tallySince(tally).launched.git).toBe(1);
    expect(await lineageRefFiles(repo, 'a')).toEqual(['01-triage.md', 'empty.md', 'nested/deeper/02-lld.md']);
    expect(await readLineageRefFile(repo, 'a', 'nested/deeper/02-lld.md')).toBe('# design\n');
    expect(await git(repo, ['log', '-1', '--format=%an <%ae>|%cn <%ce>|%P', lineageRefFor('a')])).toBe(`Warden <warden@localhost>|Warden <warden@localhost>|${await git(worktreePath, ['rev-parse', 'HEAD'])}`);
    // Every object reachable from the ref is whole and well formed (fsck exits non-zero otherwise).
    await git(repo, ['fsck', '--strict', '--no-dangling', lineageRefFor('a')]);
  });

  it('leaves out what is not a regular file: a symlink would put its target into the repository', async () => {
    const { folder } = await intentWithLineage('a', { '01-triage.md': 'risk LOW\n' });
    await symlink('/etc/hostname', path.join(folder, 'stolen.md'));
    await recordLineageRef(repo, 'a', folder);
    expect(await lineageRefFiles(repo, 'a')).toEqual(['01-triage.md']);
  });

  it('makes no new commit for the same lineage on the same branch, and keeps the earlier one as a parent when it changes', async () => {
    const { worktreePath, folder } = await intentWithLineage('a', { '01-triage.md': 'risk LOW\n' });
    await recordLineageRef(repo, 'a', folder);
    const first = await git(repo, ['rev-parse', lineageRefFor('a')]);
    const again = processTally();
    await recordLineageRef(repo, 'a', folder);
    expect(await git(repo, ['rev-parse', lineageRefFor('a')])).toBe(first);
    // The branch and the ref read from their files: the files' tree, named here, is the ref's
    expect(tallySince(again).launched.git).toBe(1); // the rev-parse above

    await writeFile(path.join(folder, '02-lld.md'), '# design\n');
    await git(worktreePath, ['add', '-A']);
    await git(worktreePath, ['commit', '-q', '-m', 'warden(a): lld attempt 1']);
    await recordLineageRef(repo, 'a', folder);
    const second = await git(repo, ['rev-parse', lineageRefFor('a')]);
    expect(second).not.toBe(first);
    expect(await git(repo, ['log', '-1', '--format=%P', second])).toBe(`${await git(worktreePath, ['rev-parse', 'HEAD'])} ${first}`);
    expect(await lineageRefFiles(repo, 'a')).toEqual(['01-triage.md', '02-lld.md']);
  });

  it('names the ref made earlier when the folder has gone since, and none when there never was a lineage', async () => {
    const { folder } = await intentWithLineage('a', { '01-triage.md': 'risk LOW\n' });
    await recordLineageRef(repo, 'a', folder);
    await rm(folder, { recursive: true });
    await expect(recordLineageRef(repo, 'a', folder)).resolves.toBe(lineageRefFor('a'));
    await expect(recordLineageRef(repo, 'b', path.join(tmp, 'nothing'))).resolves.toBeUndefined();
    await expect(lineageRefFiles(repo, 'b')).resolves.toBeUndefined();
  });
});
