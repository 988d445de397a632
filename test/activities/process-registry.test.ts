import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { killStrays, type ProcessRecord } from '../../src/activities/process-registry';
import { groupAlive } from '../../src/activities/process';
import { startTimeOf } from '../../src/shared/proc-stat';
import { waitFor } from '../helpers/env';

/** A detached `sleep` (its own process group) and its start time. */
function sleeper(): { pid: number; startTicks: number } {
  const child = spawn('sleep', ['300'], { detached: true, stdio: 'ignore' });
  child.unref();
  const pid = child.pid!;
  return { pid, startTicks: startTimeOf(readFileSync(`/proc/${pid}/stat`, 'utf8')) };
}

function record(dir: string, r: ProcessRecord): void {
  writeFileSync(path.join(dir, `${r.pgid}-${r.startTicks}.json`), JSON.stringify(r));
}

const me = () => ({ pid: process.pid, startTicks: startTimeOf(readFileSync(`/proc/${process.pid}/stat`, 'utf8')) });

test('a group whose worker is gone is killed; one whose worker lives, or whose pid was reused, is left alone', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'registry-'));
  const orphan = sleeper();
  const ownedByLiveWorker = sleeper();
  const reused = sleeper();
  const deadWorker = { pid: me().pid, startTicks: me().startTicks - 1 }; // this pid, another start: a worker that has gone
  record(dir, { pgid: orphan.pid, startTicks: orphan.startTicks, owner: deadWorker, label: 'sleep 300' });
  record(dir, { pgid: ownedByLiveWorker.pid, startTicks: ownedByLiveWorker.startTicks, owner: me(), label: 'sleep 300' });
  // Recorded with another start time: the pid now belongs to a process that is not the recorded one.
  record(dir, { pgid: reused.pid, startTicks: reused.startTicks - 1, owner: deadWorker, label: 'sleep 300' });
  writeFileSync(path.join(dir, 'broken.json'), '{');

  const killed = killStrays(dir);
  expect(killed.map((r) => r.pgid)).toEqual([orphan.pid]);
  await waitFor(() => (groupAlive(orphan.pid) ? undefined : true), 120_000, 'the orphan to die');
  expect(groupAlive(ownedByLiveWorker.pid)).toBe(true);
  expect(groupAlive(reused.pid)).toBe(true);
  // Only the live worker's record stays.
  expect(readdirSync(dir)).toEqual([`${ownedByLiveWorker.pid}-${ownedByLiveWorker.startTicks}.json`]);
  process.kill(-ownedByLiveWorker.pid, 'SIGKILL');
  process.kill(-reused.pid, 'SIGKILL');
});
