import { readFileSync } from 'node:fs';
import { cpuTicksOf, parseProcStat } from '../../src/shared/proc-stat';

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
