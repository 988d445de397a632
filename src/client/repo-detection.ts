import type { ForgeKind } from '../shared/forge';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { testCommandOfPackageJson } from '../activities/test-command';
import { gitOut } from './git-output';

/** A setting told from a repository, and what told it (for the comment beside it). */
export interface Found {
  readonly value: string;
  readonly because: string;
}

/** A file's text in `dir`, or undefined when there is none. */
function fileText(dir: string, name: string): string | undefined {
  const file = path.join(dir, name);
  return existsSync(file) ? readFileSync(file, 'utf8') : undefined;
}

/** Whether `name` in `dir` exists and its text matches `pattern` (any text when there is none). */
function hasFile(dir: string, name: string, pattern?: RegExp): boolean {
  const text = fileText(dir, name);
  return text !== undefined && (pattern === undefined || pattern.test(text));
}

/**
 * The command that runs the tests of the repository at `dir`, told from the files that mark each
 * tool, in this order: package.json's test script, pytest, Go, Cargo, a Makefile's test target.
 */
export function findTestCommand(dir: string): Found | undefined {
  const packageJson = fileText(dir, 'package.json');
  const npm = packageJson === undefined ? undefined : testCommandOfPackageJson(packageJson);
  if (npm) return { value: npm, because: "package.json's test script" };
  const pytest =
    hasFile(dir, 'pytest.ini') ||
    hasFile(dir, 'conftest.py') ||
    hasFile(dir, 'pyproject.toml', /^\[tool\.pytest\.ini_options\]/m) ||
    hasFile(dir, 'setup.cfg', /^\[tool:pytest\]/m) ||
    hasFile(dir, 'tox.ini', /^\[pytest\]/m);
  if (pytest) return { value: 'pytest -q', because: "pytest's settings" };
  if (hasFile(dir, 'go.mod')) return { value: 'go test ./...', because: 'go.mod' };
  if (hasFile(dir, 'Cargo.toml')) return { value: 'cargo test', because: 'Cargo.toml' };
  const makefile = ['GNUmakefile', 'makefile', 'Makefile'].find((name) => hasFile(dir, name, /^test\s*:/m));
  if (makefile) return { value: 'make test', because: `the test target of ${makefile}` };
  return undefined;
}

/** The branch intents start from: the branch checked out at `dir`, else the one origin's HEAD names. */
export function findBaseBranch(dir: string): Found | undefined {
  const current = gitOut(dir, ['symbolic-ref', '--quiet', '--short', 'HEAD']);
  if (current) return { value: current, because: 'the current branch' };
  const remote = gitOut(dir, ['symbolic-ref', '--quiet', '--short', 'refs/remotes/origin/HEAD']);
  if (remote?.startsWith('origin/')) return { value: remote.slice('origin/'.length), because: "origin's HEAD" };
  return undefined;
}

/** The forges whose kind a remote's host alone tells. */
const HOSTED_FORGES: Readonly<Record<string, ForgeKind>> = { 'github.com': 'github', 'gitlab.com': 'gitlab' };

/**
 * The forge the repository's `origin` is on, as far as its address tells: `value` is its kind
 * where the host says (github.com, gitlab.com), else empty. Undefined without an origin.
 */
export function findForge(dir: string): (Found & { readonly kind?: ForgeKind }) | undefined {
  const url = gitOut(dir, ['remote', 'get-url', 'origin']);
  if (!url) return undefined;
  // The host of https://host/…, ssh://user@host/… or user@host:…; a token in the address is never repeated.
  const host = /^[a-z+]+:\/\/(?:[^@/]*@)?([^/:]+)/i.exec(url)?.[1] ?? /^[^@/]+@([^:/]+):/.exec(url)?.[1];
  const kind = host ? HOSTED_FORGES[host.toLowerCase()] : undefined;
  return { value: kind ?? '', because: `origin is on ${host ?? 'an address warden cannot read'}`, ...(kind ? { kind } : {}) };
}
