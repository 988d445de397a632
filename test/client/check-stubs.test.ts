import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import { addCheckStubsCommand, checkStubs } from '../../src/client/check-stubs';
import { UserError } from '../../src/shared/errors';

const dir = mkdtempSync(path.join(tmpdir(), 'warden-check-stubs-'));
const stubbed = path.join(dir, 'limiter.ts');
const clean = path.join(dir, 'calc.py');
const broken = path.join(dir, 'broken.ts');
const notes = path.join(dir, 'notes.md');
writeFileSync(stubbed, "export function allow(key: string): boolean {\n  throw new Error('not implemented');\n}\n// TODO: buckets\n");
writeFileSync(clean, 'def add(a, b):\n    return a + b\n');
writeFileSync(broken, 'export function f( {\n');
writeFileSync(notes, 'TODO\n');

/** Runs `warden check stubs ARGS` in-process, as main() would: output lines, JSON values, exit code. */
async function run(...args: string[]): Promise<{ lines: string[]; json: unknown[]; code: number }> {
  const lines: string[] = [];
  const json: unknown[] = [];
  const program = new Command('warden').exitOverride();
  const check = program.command('check').exitOverride();
  addCheckStubsCommand(check, (l) => lines.push(l), (v) => json.push(v));
  const saved = process.exitCode;
  process.exitCode = undefined;
  try {
    await program.parseAsync(['node', 'warden', 'check', 'stubs', ...args]);
    return { lines, json, code: typeof process.exitCode === 'number' ? process.exitCode : 0 };
  } catch (error) {
    if (error instanceof UserError) return { lines: [...lines, `warden: ${error.message}`], json, code: error.exitCode };
    throw error;
  } finally {
    process.exitCode = saved;
  }
}

test('stubs found: each is printed with its place, exit 1', async () => {
  const result = await run(stubbed, clean);
  expect(result.code).toBe(1);
  const text = result.lines.join('\n');
  expect(text).toContain(`${stubbed}:2: not-implemented: function allow throws Error('not implemented'): implement it`);
  expect(text).toContain(`${stubbed}:4: todo-marker:`);
  expect(result.lines.at(-1)).toBe('2 stubs found in 2 files');
});

test('clean files: exit 0; parse failures are warnings; other languages are listed as not scanned', async () => {
  const result = await run(clean, broken, notes);
  expect(result.code).toBe(0);
  expect(result.lines[0]).toBe(`not scanned (not TypeScript, JavaScript or Python): ${notes}`);
  expect(result.lines.join('\n')).toMatch(/broken\.ts:1: parse-failed \(warning\): could not parse/);
  expect(result.lines.at(-1)).toBe('no stubs in 2 files (1 warning)');
});

test('--json prints the findings', async () => {
  const result = await run('--json', stubbed);
  expect(result.code).toBe(1);
  expect(result.lines).toEqual([]);
  expect(result.json[0]).toMatchObject({
    blocking: 2,
    exitCode: 1,
    files: [{ path: stubbed, language: 'typescript' }],
    findings: [
      { path: stubbed, line: 2, kind: 'not-implemented', severity: 'block' },
      { path: stubbed, line: 4, kind: 'todo-marker', severity: 'block' },
    ],
  });
});

test('a missing file: exit 2, one line naming it, nothing scanned', async () => {
  const result = await run(stubbed, path.join(dir, 'nope.ts'));
  expect(result.code).toBe(2);
  expect(result.lines).toEqual([`warden: file not found: ${path.join(dir, 'nope.ts')}`]);
  expect(() => checkStubs([dir])).toThrow(/file not found/);
});

test('no file given is a usage error', async () => {
  await expect(run()).rejects.toMatchObject({ code: 'commander.missingArgument' });
});
