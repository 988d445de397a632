import { existsSync } from 'node:fs';
import { access, constants, stat } from 'node:fs/promises';
import { findExecutable } from '../shared/executables';

/** Where Go's own installer puts the toolchain, for machines where it is not on PATH. */
export const GO_FALLBACK = '/usr/local/go/bin/go';

/** What a build from Go source needs to say when there is no Go: what it builds, which Go, and how to run it again. */
export interface GoBuild {
  /** e.g. `building Gitea 1.26.0 for the forge tests`. */
  readonly what: string;
  /** e.g. `go 1.25 or later, with gcc for SQLite`. */
  readonly which: string;
  /** The command that runs the build by hand. */
  readonly command: string;
}

/** The Go toolchain on PATH or at `fallback`, or a clear error saying how to get one. */
export function findGo(build: GoBuild, env: NodeJS.ProcessEnv = process.env, fallback: string = GO_FALLBACK): string {
  const go = findExecutable('go', env.PATH) ?? (existsSync(fallback) ? fallback : undefined);
  if (!go) {
    throw new Error(`${build.what} needs the Go toolchain (${build.which}), and no \`go\` is on PATH or at ${fallback}; install Go from https://go.dev/dl/ and run \`${build.command}\``);
  }
  return go;
}

/** Whether `file` is a regular file this process may run: a build's result is there and whole. */
export async function isExecutableFile(file: string): Promise<boolean> {
  try {
    if (!(await stat(file)).isFile()) return false;
    await access(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
