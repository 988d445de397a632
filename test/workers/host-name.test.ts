import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { HOST_NAME } from '../../src/shared/ids';
import { defaultHostName } from '../../src/workers/host-worker';

/** A worker's host is its home's: made once, kept there, the same after a restart; another home is another host. */
test('a home keeps the host name it made, and another home makes its own', () => {
  const home = mkdtempSync(path.join(tmpdir(), 'warden-host-'));
  const first = defaultHostName(home);
  expect(first).toMatch(HOST_NAME);
  expect(readFileSync(path.join(home, 'host-name'), 'utf8').trim()).toBe(first);
  expect(defaultHostName(home)).toBe(first);
  expect(defaultHostName(mkdtempSync(path.join(tmpdir(), 'warden-host-')))).not.toBe(first);
});

test('a kept name that could not name a task queue is made again', () => {
  const home = mkdtempSync(path.join(tmpdir(), 'warden-host-'));
  writeFileSync(path.join(home, 'host-name'), 'no spaces allowed\n');
  const made = defaultHostName(home);
  expect(made).toMatch(HOST_NAME);
  expect(readFileSync(path.join(home, 'host-name'), 'utf8').trim()).toBe(made);
});
