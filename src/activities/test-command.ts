import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The repo's own test command when it can be told from the repo: `npm test` when package.json
 * has a test script; otherwise none (then the intent must name one, see `warden run --test-cmd`).
 */
export function detectTestCommand(worktreePath: string): string | undefined {
  const pkg = path.join(worktreePath, 'package.json');
  return existsSync(pkg) ? testCommandOfPackageJson(readFileSync(pkg, 'utf8')) : undefined;
}

/** `npm test --silent` when this package.json text has a test script. */
export function testCommandOfPackageJson(text: string): string | undefined {
  try {
    const scripts = (JSON.parse(text) as { scripts?: Record<string, string> }).scripts;
    return scripts?.test ? 'npm test --silent' : undefined;
  } catch {
    return undefined;
  }
}
