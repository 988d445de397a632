import { readFileSync } from 'node:fs';
import { parseProcStat } from '../../src/runtime/proc-stat';

test('reads state, parent and group after the command name, whatever that name holds', () => {
  expect(parseProcStat('4242 (my (odd) cmd) Z 1 4240 4240 0 -1')).toEqual({ state: 'Z', ppid: 1, pgrp: 4240 });
});

test("reads this process's own line as the kernel writes it", () => {
  const own = parseProcStat(readFileSync('/proc/self/stat', 'utf8'));
  expect(own.ppid).toBe(process.ppid);
  expect(own.state).toMatch(/^[RS]$/);
});
