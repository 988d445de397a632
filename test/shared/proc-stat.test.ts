import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpuTicksOf, parseProcStat, reapedChildrenTicksOf } from '../../src/shared/proc-stat';

test('reads state, parent and group after the command name, whatever that name holds', () => {
  expect(parseProcStat('4242 (my (odd) cmd) Z 1 4240 4240 0 -1')).toEqual({ state: 'Z', ppid: 1, pgrp: 4240 });
});

test("reads this process's own line as the kernel writes it", () => {
  const own = parseProcStat(readFileSync('/proc/self/stat', 'utf8'));
  expect(own.ppid).toBe(process.ppid);
  expect(own.state).toMatch(/^[RS]$/);
});

test('reads user plus system CPU ticks after the command name', () => {
  expect(cpuTicksOf('4242 (a) b) R 1 4240 4240 0 -1 4194560 100 0 0 0 37 5 0 0 20 0 1 0')).toBe(42);
  let spin = 0;
  for (let i = 0; i < 5e7; i++) spin += i;
  expect(spin).toBeGreaterThan(0);
  expect(cpuTicksOf(readFileSync('/proc/self/stat', 'utf8'))).toBeGreaterThan(0);
});

test('reads the CPU ticks of the children that exited and were waited for', () => {
  expect(reapedChildrenTicksOf('4242 (a) b) R 1 4240 4240 0 -1 4194560 100 0 0 0 37 5 11 3 20 0 1 0')).toBe(14);
  const before = reapedChildrenTicksOf(readFileSync('/proc/self/stat', 'utf8'));
  // A child that spins for a while, then exits and is waited for: its CPU moves to this process's count.
  const spun = spawnSync(process.execPath, ['-e', 'let s = 0; for (let i = 0; i < 1e8; i++) s += i;']);
  expect(spun.status).toBe(0);
  expect(reapedChildrenTicksOf(readFileSync('/proc/self/stat', 'utf8'))).toBeGreaterThan(before);
});
