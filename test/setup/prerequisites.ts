/**
 * Tests that need a system program (test/setup/system-packages.ts) go through here. The global
 * setup looks for each program, installs it when it can, and publishes what it found through the
 * environment jest's workers inherit:
 *
 *   WARDEN_TEST_PROGRAM_<NAME>   the program's path (or bin folder), when it is here
 *   WARDEN_TEST_MISSING_<NAME>   one line saying what is missing and how to install it
 *
 * A block of tests that needs a missing program is skipped under a title that names it, and the
 * summary reporter (test/setup/skip-summary-reporter.js) prints the line once with the count.
 */
import type { SystemProgram } from './system-packages';

const envName = (prefix: string, program: SystemProgram): string => `${prefix}_${program.toUpperCase()}`;
export const programEnv = (program: SystemProgram): string => envName('WARDEN_TEST_PROGRAM', program);
export const missingEnv = (program: SystemProgram): string => envName('WARDEN_TEST_MISSING', program);

/** The marker a skipped block's title carries; the reporter groups skipped tests by it. */
export const skipMarker = (program: SystemProgram): string => `[skipped: needs ${program}]`;

/** Where `program` is, or undefined when the setup found it missing. */
export function programPath(program: SystemProgram): string | undefined {
  return process.env[programEnv(program)] || undefined;
}

/** `describe` when `program` is here; otherwise a skipped block whose title says what it needs. */
export function describeWith(program: SystemProgram, title: string, body: () => void): void {
  if (programPath(program) !== undefined) describe(title, body);
  else describe.skip(`${title} ${skipMarker(program)}`, body);
}

/** `it` when `program` is here; otherwise a skipped test whose title says what it needs. */
export function itWith(program: SystemProgram, title: string, body: jest.ProvidesCallback, timeout?: number): void {
  if (programPath(program) !== undefined) it(title, body, timeout);
  else it.skip(`${title} ${skipMarker(program)}`, body);
}
