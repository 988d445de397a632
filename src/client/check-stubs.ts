import { existsSync, readFileSync, statSync } from 'node:fs';
import type { Command } from 'commander';
import { UserError } from '../shared/errors';
import type * as StubDetector from '../safety/stub-detector';
import type { StubFinding } from '../safety/stub-detector';

export interface CheckStubsResult {
  readonly files: readonly { readonly path: string; readonly language?: string }[];
  readonly findings: readonly StubFinding[];
  /** Findings that block (everything but parse warnings). */
  readonly blocking: number;
  /** 0 clean (or warnings only), 1 stubs found. */
  readonly exitCode: 0 | 1;
}

/**
 * The detector, loaded when a scan runs: it reads TypeScript with the compiler, which takes most
 * of a second to load, and every other command of the CLI would pay for it.
 */
function stubDetector(): typeof StubDetector {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require('../safety/stub-detector') as typeof StubDetector;
}

/**
 * Scans files for stubs. A missing file (or a folder) is a `UserError` with exit code 2, before
 * anything is scanned; files in languages the detector does not read are listed and skipped.
 */
export function checkStubs(files: readonly string[]): CheckStubsResult {
  const missing = files.filter((f) => !existsSync(f) || !statSync(f).isFile());
  if (missing.length > 0) throw new UserError(`file not found: ${missing.join(', ')}`, 2);
  const { detectStubs, stubLanguage } = stubDetector();
  const findings = files.flatMap((f) => detectStubs({ path: f, content: readFileSync(f, 'utf8') }));
  const blocking = findings.filter((f) => f.severity === 'block').length;
  return {
    files: files.map((f) => ({ path: f, language: stubLanguage(f) })),
    findings,
    blocking,
    exitCode: blocking > 0 ? 1 : 0,
  };
}

/**
 * Adds `warden check stubs FILE… [--json]` under `check`: the anti-stub scan of the completeness
 * gate, by hand. Exit 1 when a stub is found, 2 for a missing file, 0 otherwise (parse failures
 * are warnings: the gate fails open on them).
 */
export function addCheckStubsCommand(check: Command, print: (line: string) => void, printJson: (value: unknown) => void): void {
  check
    .command('stubs <files...>')
    .description('Scan TypeScript/JavaScript/Python files for stubs: empty bodies, not-implemented throws, pass/... bodies, trivial returns, TODO markers')
    .option('--json', 'print JSON')
    .action((files: string[], flags: { json?: boolean }) => {
      const result = checkStubs(files);
      const { formatStubFindings } = stubDetector();
      process.exitCode = result.exitCode;
      if (flags.json) return printJson(result);
      const skipped = result.files.filter((f) => !f.language).map((f) => f.path);
      if (skipped.length) print(`not scanned (not TypeScript, JavaScript or Python): ${skipped.join(', ')}`);
      if (result.findings.length) print(formatStubFindings(result.findings));
      const scanned = result.files.length - skipped.length;
      print(
        result.blocking > 0
          ? `${result.blocking} stub${result.blocking === 1 ? '' : 's'} found in ${scanned} file${scanned === 1 ? '' : 's'}`
          : `no stubs in ${scanned} file${scanned === 1 ? '' : 's'}${result.findings.length ? ` (${result.findings.length} warning${result.findings.length === 1 ? '' : 's'})` : ''}`,
      );
    });
}
